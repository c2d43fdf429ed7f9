#include "shim_gpu_common.h"

#include "driverabi/nv_status.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const gdu_cuda *cu;

gdu_CUcontext shim_gpu_init(int device)
{
    char why[256];
    cu = gdu_cuda_load(why, sizeof why);
    if (cu == NULL) {
        printf("NOGPU: %s\n", why);
        exit(SHIM_GPU_NO_GPU);
    }
    int count = 0;
    if (cu->cuDeviceGetCount(&count) != GDU_CUDA_SUCCESS || device >= count) {
        printf("NOGPU: CUDA device %d not present (%d devices)\n", device, count);
        exit(SHIM_GPU_NO_GPU);
    }
    gdu_CUdevice dev;
    gdu_CUcontext ctx;
    CK(cu->cuDeviceGet(&dev, device));
    CK(cu->cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cu->cuCtxSetCurrent(ctx));
    return ctx;
}

int shim_gpu_device_count(void)
{
    int count = 0;
    cu->cuDeviceGetCount(&count);
    return count;
}

void shim_gpu_check(gdu_CUresult r, const char *what)
{
    if (r != GDU_CUDA_SUCCESS) {
        printf("CUDAERROR %s: %s\n", what, gdu_cuda_result_name(r));
        fflush(stdout);
        exit(1);
    }
}

void shim_vmm_alloc(int device, size_t size, shim_vmm *v)
{
    shim_vmm_alloc_rdma(device, size, false, v);
}

void shim_vmm_alloc_rdma(int device, size_t size, bool rdma_capable, shim_vmm *v)
{
    gdu_CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = GDU_CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = GDU_CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    prop.allocFlags.gpuDirectRDMACapable = rdma_capable;
    size_t gran = 0;
    CK(cu->cuMemGetAllocationGranularity(&gran, &prop, GDU_CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    v->size = (size + gran - 1) / gran * gran;
    CK(cu->cuMemAddressReserve(&v->ptr, v->size, 0, 0, 0));
    CK(cu->cuMemCreate(&v->handle, v->size, &prop, 0));
    CK(cu->cuMemMap(v->ptr, v->size, 0, v->handle, 0));
    gdu_CUmemAccessDesc access = {.location = prop.location,
                                  .flags = GDU_CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CK(cu->cuMemSetAccess(v->ptr, v->size, &access, 1));
}

void shim_vmm_free(shim_vmm *v)
{
    CK(cu->cuMemUnmap(v->ptr, v->size));
    CK(cu->cuMemRelease(v->handle));
    CK(cu->cuMemAddressFree(v->ptr, v->size));
}

uint64_t shim_gpu_fill_and_sum(gdu_CUdeviceptr ptr, size_t size, unsigned seed)
{
    const size_t block = 1 << 20;
    for (size_t off = 0; off < size; off += block) {
        size_t n = size - off < block ? size - off : block;
        CK(cu->cuMemsetD8(ptr + off, (unsigned char)(seed + off / block), n));
    }
    CK(cu->cuCtxSynchronize());
    unsigned char *host = malloc(size);
    CK(cu->cuMemcpyDtoH(host, ptr, size));
    uint64_t sum = 1469598103934665603ULL;
    for (size_t i = 0; i < size; i++)
        sum = (sum ^ host[i]) * 1099511628211ULL;
    free(host);
    return sum;
}

int shim_gpu_probe(gdu_CUdeviceptr ptr, char *buf, size_t len)
{
    int (*probe)(unsigned long long, unsigned *);
    *(void **)&probe = dlsym(RTLD_DEFAULT, "gdunlock_test_probe_registered");
    if (probe == NULL) {
        snprintf(buf, len, "-2 no-shim");
        return -2;
    }
    unsigned status = 0;
    int r = probe(ptr, &status);
    if (r == -1 && status == 0xffff)
        snprintf(buf, len, "-1 no-mapping-or-NV503C-known");
    else
        snprintf(buf, len, "%d %s", r, gdu_nv_status_name(status));
    return r;
}

int shim_gpu_totals(const char *tag, unsigned long long out[9])
{
    int (*totals)(unsigned long long *);
    *(void **)&totals = dlsym(RTLD_DEFAULT, "gdunlock_test_totals");
    memset(out, 0, 9 * sizeof out[0]);
    if (totals == NULL || totals(out) != 0) {
        printf("TOTALS %s none\n", tag);
        return 0;
    }
    printf("TOTALS %s registered=%llu unregistered=%llu live=%llu already=%llu created=%llu "
           "failures=%llu "
           "rm_calls=%llu mappings=%llu objects=%llu\n",
           tag, out[0], out[1], out[2], out[3], out[4], out[5], out[6], out[7], out[8]);
    return 1;
}

void shim_gpu_pin(int device, const char *name, gdu_CUdeviceptr ptr, size_t size)
{
    static const char *const rules[] = {"found",      "bad-length",    "not-registered",
                                        "no-vaspace", "many-vaspaces", "spans-allocations",
                                        "past-end",   "two-objects",   "not-supported",
                                        "bar1-full"};
    int (*lookup)(unsigned long long, unsigned long long, int *, char *, size_t);
    *(void **)&lookup = dlsym(RTLD_DEFAULT, "gdunlock_test_pin_lookup");
    printf("PTR %d %s 0x%llx %zu\n", device, name, (unsigned long long)ptr, size);
    if (lookup == NULL)
        return;
    char why[400];
    int err = 0;
    int rule = lookup(ptr, size, &err, why, sizeof why);
    printf("PIN %d %s %s %d %s\n", device, name,
           rule >= 0 && rule < (int)(sizeof rules / sizeof rules[0]) ? rules[rule] : "unknown", err,
           why);
}

void shim_gpu_dump_report(const char *path)
{
    char *(*report)(void);
    *(void **)&report = dlsym(RTLD_DEFAULT, "gdunlock_test_report");
    if (report == NULL || path == NULL)
        return;
    char *text = report();
    FILE *f = text != NULL ? fopen(path, "w") : NULL;
    if (f != NULL) {
        fputs(text, f);
        fclose(f);
    }
    free(text);
}
