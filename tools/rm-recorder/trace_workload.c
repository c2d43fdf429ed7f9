/* The CUDA workload the RM/UVM traces in tests/fixtures/rm-traces/ were
 * recorded on: context set-up, cuMemAlloc of several sizes, a VMM allocation,
 * their frees, and a second context. Each step prints "MARK <t_ns> <step>"
 * (CLOCK_MONOTONIC, the recorder's clock) so trace entries can be attributed. */
#include "cuda/cuda_api.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void mark(const char *step)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    printf("MARK %lld %s\n", (long long)ts.tv_sec * 1000000000 + ts.tv_nsec, step);
    fflush(stdout);
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        gdu_CUresult r_ = (call);                                                                  \
        if (r_ != GDU_CUDA_SUCCESS) {                                                              \
            fprintf(stderr, "%s: %s\n", #call, gdu_cuda_result_name(r_));                          \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv)
{
    int ordinal = argc > 1 ? atoi(argv[1]) : 0;
    char why[256];
    mark("load+cuInit");
    const gdu_cuda *cu = gdu_cuda_load(why, sizeof why);
    if (cu == NULL) {
        fprintf(stderr, "trace_workload: %s\n", why);
        return 69;
    }
    gdu_CUdevice dev;
    gdu_CUcontext ctx;
    CHECK(cu->cuDeviceGet(&dev, ordinal));
    mark("primary-ctx-retain");
    CHECK(cu->cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cu->cuCtxSetCurrent(ctx));
    CHECK(cu->cuCtxSynchronize());

    static const size_t sizes[] = {1, 2u << 20, 64u << 20, (64u << 20) + 4096};
    gdu_CUdeviceptr p[4];
    for (int i = 0; i < 4; i++) {
        char step[64];
        snprintf(step, sizeof step, "cuMemAlloc %zu", sizes[i]);
        mark(step);
        CHECK(cu->cuMemAlloc(&p[i], sizes[i]));
        printf("PTR cuMemAlloc %zu 0x%llx\n", sizes[i], p[i]);
    }
    CHECK(cu->cuMemsetD8(p[2], 0xab, sizes[2]));
    CHECK(cu->cuCtxSynchronize());
    for (int i = 0; i < 4; i++) {
        mark("cuMemFree");
        CHECK(cu->cuMemFree(p[i]));
    }

    gdu_CUmemAllocationProp prop = {0};
    prop.type = GDU_CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = GDU_CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    size_t gran = 0, size = 64u << 20;
    CHECK(cu->cuMemGetAllocationGranularity(&gran, &prop, GDU_CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    size = (size + gran - 1) / gran * gran;
    gdu_CUdeviceptr va;
    gdu_CUmemGenericAllocationHandle h;
    mark("cuMemAddressReserve");
    CHECK(cu->cuMemAddressReserve(&va, size, gran, 0, 0));
    mark("cuMemCreate");
    CHECK(cu->cuMemCreate(&h, size, &prop, 0));
    mark("cuMemMap");
    CHECK(cu->cuMemMap(va, size, 0, h, 0));
    gdu_CUmemAccessDesc access = {{GDU_CU_MEM_LOCATION_TYPE_DEVICE, dev},
                                  GDU_CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    mark("cuMemSetAccess");
    CHECK(cu->cuMemSetAccess(va, size, &access, 1));
    printf("PTR vmm %zu 0x%llx\n", size, va);
    CHECK(cu->cuMemsetD8(va, 0xcd, size));
    CHECK(cu->cuCtxSynchronize());
    mark("cuMemUnmap");
    CHECK(cu->cuMemUnmap(va, size));
    mark("cuMemRelease");
    CHECK(cu->cuMemRelease(h));
    mark("cuMemAddressFree");
    CHECK(cu->cuMemAddressFree(va, size));

    mark("cuCtxCreate");
    gdu_CUcontext second;
    CHECK(cu->cuCtxCreate(&second, 0, dev));
    gdu_CUdeviceptr q;
    mark("cuMemAlloc in second context");
    CHECK(cu->cuMemAlloc(&q, 4u << 20));
    mark("cuCtxDestroy");
    CHECK(cu->cuCtxDestroy(second));
    CHECK(cu->cuCtxSetCurrent(ctx));
    mark("primary-ctx-release");
    CHECK(cu->cuDevicePrimaryCtxRelease(dev));
    mark("exit");
    return 0;
}
