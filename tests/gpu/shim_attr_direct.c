/* shim_attr_direct: cuDeviceGetAttribute(GPU_DIRECT_RDMA_SUPPORTED) as a
 * program linked with -lcuda calls it (bound by the dynamic linker). Built
 * only where the CUDA toolkit's stub libcuda.so exists. Prints
 * "ROUTE direct <v>". */
#include <stdio.h>

int cuInit(unsigned flags);
int cuDeviceGetAttribute(int *value, int attr, int dev);

int main(void)
{
    int v = -1;
    if (cuInit(0) != 0) {
        printf("NOGPU: cuInit failed\n");
        return 69;
    }
    int r = cuDeviceGetAttribute(&v, 116, 0);
    printf(r == 0 ? "ROUTE direct %d\n" : "ROUTE direct error %d\n", r == 0 ? v : r);
    return 0;
}
