/* shim_attr_direct: cuDeviceGetAttribute(GPU_DIRECT_RDMA_SUPPORTED) as a
 * program linked with -lcuda calls it (bound by the dynamic linker). Built
 * only where the CUDA toolkit's stub libcuda.so exists. Prints
 * "ROUTE direct <v>", then "PROUTE direct device <v>": the pointer attribute
 * (15) of a cuMemAlloc buffer, the same way. */
#include <stddef.h>
#include <stdio.h>

int cuInit(unsigned flags);
int cuDeviceGetAttribute(int *value, int attr, int dev);
int cuDevicePrimaryCtxRetain(void **ctx, int dev);
int cuCtxSetCurrent(void *ctx);
int cuMemAlloc_v2(unsigned long long *ptr, size_t size);
int cuPointerGetAttribute(void *data, int attribute, unsigned long long ptr);

int main(void)
{
    int v = -1;
    if (cuInit(0) != 0) {
        printf("NOGPU: cuInit failed\n");
        return 69;
    }
    int r = cuDeviceGetAttribute(&v, 116, 0);
    printf(r == 0 ? "ROUTE direct %d\n" : "ROUTE direct error %d\n", r == 0 ? v : r);
    void *ctx = NULL;
    unsigned long long buf = 0;
    if (cuDevicePrimaryCtxRetain(&ctx, 0) == 0 && cuCtxSetCurrent(ctx) == 0 &&
        cuMemAlloc_v2(&buf, 16 << 20) == 0) {
        v = -1;
        r = cuPointerGetAttribute(&v, 15, buf);
        printf(r == 0 ? "PROUTE direct device %d\n" : "PROUTE direct device error %d\n",
               r == 0 ? v : r);
    }
    return 0;
}
