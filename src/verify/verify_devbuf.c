/* Device buffers both ways verify tests them: cuMemAlloc, and VMM
 * (cuMemCreate + cuMemAddressReserve + cuMemMap + cuMemSetAccess), each
 * aligned to 64 KiB, the granularity nvidia-fs and the RM lookup require. */
#include "verify/verify_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

static int alloc_plain(const gdu_cuda *cu, size_t size, gdu_verify_devbuf *b, char *why,
                       size_t why_len)
{
    /* Over-allocate so that a 64 KiB aligned range of size bytes fits. */
    b->base_size = size + GDU_VERIFY_ALIGN;
    gdu_CUresult r = cu->cuMemAlloc(&b->base, b->base_size);
    if (r != GDU_CUDA_SUCCESS) {
        b->base = 0;
        snprintf(why, why_len, "cuMemAlloc(%zu): %s", b->base_size, gdu_cuda_result_name(r));
        return r;
    }
    b->ptr = (b->base + GDU_VERIFY_ALIGN - 1) & ~(gdu_CUdeviceptr)(GDU_VERIFY_ALIGN - 1);
    return 0;
}

static int alloc_vmm(const gdu_cuda *cu, gdu_CUdevice dev, size_t size, gdu_verify_devbuf *b,
                     char *why, size_t why_len)
{
    int vmm = 0, rdma = 0;
    cu->cuDeviceGetAttribute(&vmm, GDU_CU_ATTR_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev);
    if (!vmm) {
        snprintf(why, why_len,
                 "the device does not support virtual memory management (cuMemCreate)");
        return -ENOTSUP;
    }
    /* The VMM-specific attribute, which the shim leaves as libcuda says: the
     * general one reads 1 on a GPU the shim unlocks for storage, where
     * cuMemCreate may still refuse the flag. */
    cu->cuDeviceGetAttribute(&rdma, GDU_CU_ATTR_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, dev);
    gdu_CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = GDU_CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = GDU_CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    /* Asking for RDMA-capable memory where the device says it has none fails;
     * where it has, libcuda registers the memory with its ThirdPartyP2P object. */
    prop.allocFlags.gpuDirectRDMACapable = rdma ? 1 : 0;
    size_t gran = 0;
    gdu_CUresult r =
        cu->cuMemGetAllocationGranularity(&gran, &prop, GDU_CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (r != GDU_CUDA_SUCCESS || gran == 0) {
        snprintf(why, why_len, "cuMemGetAllocationGranularity: %s", gdu_cuda_result_name(r));
        return r ? r : -EINVAL;
    }
    size_t align = gran > GDU_VERIFY_ALIGN ? gran : GDU_VERIFY_ALIGN;
    b->base_size = round_up(size, align);
    r = cu->cuMemCreate(&b->handle, b->base_size, &prop, 0);
    if (r != GDU_CUDA_SUCCESS) {
        b->handle = 0;
        snprintf(why, why_len, "cuMemCreate(%zu): %s", b->base_size, gdu_cuda_result_name(r));
        return r;
    }
    r = cu->cuMemAddressReserve(&b->base, b->base_size, align, 0, 0);
    if (r != GDU_CUDA_SUCCESS) {
        b->base = 0;
        snprintf(why, why_len, "cuMemAddressReserve(%zu): %s", b->base_size,
                 gdu_cuda_result_name(r));
        return r;
    }
    r = cu->cuMemMap(b->base, b->base_size, 0, b->handle, 0);
    if (r != GDU_CUDA_SUCCESS) {
        snprintf(why, why_len, "cuMemMap: %s", gdu_cuda_result_name(r));
        return r;
    }
    b->mapped = true;
    gdu_CUmemAccessDesc access = {.location = {GDU_CU_MEM_LOCATION_TYPE_DEVICE, dev},
                                  .flags = GDU_CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    r = cu->cuMemSetAccess(b->base, b->base_size, &access, 1);
    if (r != GDU_CUDA_SUCCESS) {
        snprintf(why, why_len, "cuMemSetAccess: %s", gdu_cuda_result_name(r));
        return r;
    }
    b->ptr = b->base;
    return 0;
}

int gdu_verify_devbuf_alloc(const gdu_cuda *cu, gdu_CUdevice dev, gdu_verify_mem kind, size_t size,
                            gdu_verify_devbuf *out, char *why, size_t why_len)
{
    memset(out, 0, sizeof *out);
    out->kind = kind;
    out->size = size;
    int rc = kind == GDU_VERIFY_MEM_VMM ? alloc_vmm(cu, dev, size, out, why, why_len)
                                        : alloc_plain(cu, size, out, why, why_len);
    if (rc != 0)
        gdu_verify_devbuf_free(cu, out);
    return rc;
}

void gdu_verify_devbuf_free(const gdu_cuda *cu, gdu_verify_devbuf *b)
{
    if (b->kind == GDU_VERIFY_MEM_VMM) {
        if (b->mapped)
            cu->cuMemUnmap(b->base, b->base_size);
        if (b->base)
            cu->cuMemAddressFree(b->base, b->base_size);
        if (b->handle)
            cu->cuMemRelease(b->handle);
    } else if (b->base) {
        cu->cuMemFree(b->base);
    }
    gdu_verify_mem kind = b->kind;
    memset(b, 0, sizeof *b);
    b->kind = kind;
}
