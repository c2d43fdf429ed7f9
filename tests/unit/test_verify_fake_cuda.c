/* Fake libcuda.so.1 for verify's CPU tests: one "GPU" whose device memory is
 * host memory (a device pointer is a host address), so that gdunlock verify
 * and the I/O engine run their whole flow without a GPU. Copies are
 * synchronous; streams and events are tokens. */
#include "cuda/cuda_api.h"
#include "fake_fifo_swap.h"

#include <stdio.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_DECLARE(name, sym, params) gdu_CUresult fake_##name params __asm__(sym);
GDU_CUDA_FUNCTIONS(FAKE_DECLARE)

static char token; /* what streams, events and contexts point at */

gdu_CUresult fake_cuInit(unsigned flags)
{
    fake_fifo_swap();
    return GDU_CUDA_SUCCESS;
}
gdu_CUresult fake_cuDriverGetVersion(int *v)
{
    *v = 13000;
    return GDU_CUDA_SUCCESS;
}
gdu_CUresult fake_cuGetErrorName(gdu_CUresult r, const char **name)
{
    *name = r == 0     ? "CUDA_SUCCESS"
            : r == 2   ? "CUDA_ERROR_OUT_OF_MEMORY"
            : r == 801 ? "CUDA_ERROR_NOT_SUPPORTED"
                       : "CUDA_ERROR_UNKNOWN";
    return GDU_CUDA_SUCCESS;
}
gdu_CUresult fake_cuDeviceGetCount(int *count)
{
    *count = 1;
    return GDU_CUDA_SUCCESS;
}
gdu_CUresult fake_cuDeviceGet(gdu_CUdevice *dev, int ordinal)
{
    *dev = ordinal;
    return ordinal == 0 ? GDU_CUDA_SUCCESS : GDU_CUDA_ERROR_INVALID_DEVICE;
}
gdu_CUresult fake_cuDeviceGetName(char *name, int len, gdu_CUdevice dev)
{
    snprintf(name, (size_t)len, "Fake GPU");
    return GDU_CUDA_SUCCESS;
}
gdu_CUresult fake_cuDeviceGetPCIBusId(char *id, int len, gdu_CUdevice dev)
{
    snprintf(id, (size_t)len, "0000:01:00.0");
    return GDU_CUDA_SUCCESS;
}
gdu_CUresult fake_cuDeviceGetAttribute(int *value, int attr, gdu_CUdevice dev)
{
    /* FAKE_CUDA_RDMA: a GPU that reports GPUDirect RDMA (a data-center one);
     * FAKE_CUDA_DMABUF: one that exports dma-bufs. */
    *value = attr == GDU_CU_ATTR_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED ? !getenv("FAKE_CUDA_NO_VMM")
             : attr == GDU_CU_ATTR_GPU_DIRECT_RDMA_SUPPORTED         ? !!getenv("FAKE_CUDA_RDMA")
             : attr == GDU_CU_ATTR_DMA_BUF_SUPPORTED                 ? !!getenv("FAKE_CUDA_DMABUF")
             : attr == GDU_CU_ATTR_UNIFIED_ADDRESSING                ? 1
                                                                     : 0;
    return GDU_CUDA_SUCCESS;
}
/* A dma-buf of device memory: a memfd named after the range (the fake
 * libibverbs checks a registration against it); refused as GeForce libcuda
 * refuses it (CUDA_ERROR_NOT_SUPPORTED) unless FAKE_CUDA_DMABUF. */
gdu_CUresult fake_cuMemGetHandleForAddressRange(void *handle, gdu_CUdeviceptr ptr, size_t size,
                                                int type, unsigned long long flags)
{
    if (!getenv("FAKE_CUDA_DMABUF") || type != GDU_CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD || flags)
        return GDU_CUDA_ERROR_NOT_SUPPORTED;
    if (size == 0 || size % 4096 != 0 || ptr % 4096 != 0)
        return GDU_CUDA_ERROR_INVALID_VALUE;
    char name[96];
    snprintf(name, sizeof name, "fake-dmabuf:%llx:%zu", (unsigned long long)ptr, size);
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0)
        return GDU_CUDA_ERROR_OUT_OF_MEMORY;
    *(int *)handle = fd;
    return GDU_CUDA_SUCCESS;
}

gdu_CUresult fake_cuDeviceTotalMem(size_t *bytes, gdu_CUdevice dev)
{
    *bytes = 1ull << 34;
    return GDU_CUDA_SUCCESS;
}
gdu_CUresult fake_cuDevicePrimaryCtxRetain(gdu_CUcontext *ctx, gdu_CUdevice dev)
{
    *ctx = (gdu_CUcontext)(void *)&token;
    return GDU_CUDA_SUCCESS;
}
gdu_CUresult fake_cuCtxGetCurrent(gdu_CUcontext *ctx)
{
    *ctx = (gdu_CUcontext)(void *)&token;
    return GDU_CUDA_SUCCESS;
}

static gdu_CUresult host_alloc(gdu_CUdeviceptr *p, size_t bytes, size_t align)
{
    void *m = aligned_alloc(align, (bytes + align - 1) / align * align);
    if (!m)
        return GDU_CUDA_ERROR_OUT_OF_MEMORY;
    *p = (gdu_CUdeviceptr)(uintptr_t)m;
    return GDU_CUDA_SUCCESS;
}
/* Like the real one: 256-byte alignment only, so verify must align itself. */
gdu_CUresult fake_cuMemAlloc(gdu_CUdeviceptr *p, size_t bytes)
{
    gdu_CUdeviceptr base;
    gdu_CUresult r = host_alloc(&base, bytes + 512, 4096);
    if (r == GDU_CUDA_SUCCESS) {
        /* remember the real start just before the returned address */
        gdu_CUdeviceptr user = base + 256;
        *p = user;
    }
    return r;
}
gdu_CUresult fake_cuMemFree(gdu_CUdeviceptr p)
{
    if (p)
        free((void *)(uintptr_t)(p - 256));
    return GDU_CUDA_SUCCESS;
}
gdu_CUresult fake_cuMemHostAlloc(void **p, size_t bytes, unsigned flags)
{
    *p = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    return *p ? GDU_CUDA_SUCCESS : GDU_CUDA_ERROR_OUT_OF_MEMORY;
}
gdu_CUresult fake_cuMemFreeHost(void *p)
{
    free(p);
    return GDU_CUDA_SUCCESS;
}
gdu_CUresult fake_cuMemcpyHtoD(gdu_CUdeviceptr dst, const void *src, size_t n)
{
    memcpy((void *)(uintptr_t)dst, src, n);
    return GDU_CUDA_SUCCESS;
}
gdu_CUresult fake_cuMemcpyDtoH(void *dst, gdu_CUdeviceptr src, size_t n)
{
    memcpy(dst, (const void *)(uintptr_t)src, n);
    return GDU_CUDA_SUCCESS;
}
gdu_CUresult fake_cuMemcpyHtoDAsync(gdu_CUdeviceptr dst, const void *src, size_t n, gdu_CUstream s)
{
    return fake_cuMemcpyHtoD(dst, src, n);
}
gdu_CUresult fake_cuMemcpyDtoHAsync(void *dst, gdu_CUdeviceptr src, size_t n, gdu_CUstream s)
{
    return fake_cuMemcpyDtoH(dst, src, n);
}
gdu_CUresult fake_cuMemsetD8(gdu_CUdeviceptr dst, unsigned char v, size_t n)
{
    memset((void *)(uintptr_t)dst, v, n);
    return GDU_CUDA_SUCCESS;
}
gdu_CUresult fake_cuStreamCreate(gdu_CUstream *s, unsigned flags)
{
    *s = (gdu_CUstream)(void *)&token;
    return GDU_CUDA_SUCCESS;
}
gdu_CUresult fake_cuEventCreate(gdu_CUevent *e, unsigned flags)
{
    *e = (gdu_CUevent)(void *)&token;
    return GDU_CUDA_SUCCESS;
}
gdu_CUresult fake_cuLaunchHostFunc(gdu_CUstream s, gdu_CUhostFn fn, void *user)
{
    fn(user);
    return GDU_CUDA_SUCCESS;
}

/* VMM: the reserved range is real memory; the "physical" handle only records its size. */
gdu_CUresult fake_cuMemGetAllocationGranularity(size_t *gran, const gdu_CUmemAllocationProp *prop,
                                                int option)
{
    *gran = 2u << 20;
    return GDU_CUDA_SUCCESS;
}
gdu_CUresult fake_cuMemCreate(gdu_CUmemGenericAllocationHandle *h, size_t size,
                              const gdu_CUmemAllocationProp *prop, unsigned long long flags)
{
    size_t *rec = malloc(sizeof *rec);
    if (!rec)
        return GDU_CUDA_ERROR_OUT_OF_MEMORY;
    *rec = size;
    *h = (gdu_CUmemGenericAllocationHandle)(uintptr_t)rec;
    return GDU_CUDA_SUCCESS;
}
gdu_CUresult fake_cuMemRelease(gdu_CUmemGenericAllocationHandle h)
{
    free((void *)(uintptr_t)h);
    return GDU_CUDA_SUCCESS;
}
gdu_CUresult fake_cuMemAddressReserve(gdu_CUdeviceptr *p, size_t size, size_t align,
                                      gdu_CUdeviceptr addr, unsigned long long f)
{
    return host_alloc(p, size, align ? align : 4096);
}
gdu_CUresult fake_cuMemAddressFree(gdu_CUdeviceptr p, size_t size)
{
    free((void *)(uintptr_t)p);
    return GDU_CUDA_SUCCESS;
}
