/* shim_gpu_buffers [DEVICE|all]: cuMemAlloc buffers (1 B, 2 MiB, 64 MiB,
 * 64 MiB + 4 KiB) and a 64 MiB VMM buffer on each device; for each, the
 * shim's RM probe while it lives and after it is freed; GPU work on each;
 * the shim's totals. Lines: BUF <dev> <name> <probe> <status>,
 * FREED <dev> <name> <probe> <status>, SUM <dev> <checksum>, TOTALS ... */
#include "shim_gpu_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB ((size_t)1 << 20)

static const struct {
    const char *name;
    size_t size;
} sizes[] = {{"cuMemAlloc-1B", 1}, {"cuMemAlloc-2MiB", 2 * MiB}, {"cuMemAlloc-64MiB", 64 * MiB},
             {"cuMemAlloc-64MiB+4KiB", 64 * MiB + 4096}};
enum { NSIZES = sizeof sizes / sizeof sizes[0] };

static void one_device(int device)
{
    gdu_CUcontext ctx = shim_gpu_init(device);
    (void)ctx;
    gdu_CUdeviceptr ptr[NSIZES];
    char probe[96];
    uint64_t sum = 0;
    for (int i = 0; i < NSIZES; i++) {
        CK(cu->cuMemAlloc(&ptr[i], sizes[i].size));
        sum ^= shim_gpu_fill_and_sum(ptr[i], sizes[i].size, (unsigned)i);
        shim_gpu_probe(ptr[i], probe, sizeof probe);
        printf("BUF %d %s %s\n", device, sizes[i].name, probe);
    }
    shim_vmm vmm;
    shim_vmm_alloc(device, 64 * MiB, &vmm);
    sum ^= shim_gpu_fill_and_sum(vmm.ptr, vmm.size, 99);
    shim_gpu_probe(vmm.ptr, probe, sizeof probe);
    printf("BUF %d VMM-64MiB %s\n", device, probe);
    for (int i = 0; i < NSIZES; i++) {
        CK(cu->cuMemFree(ptr[i]));
        shim_gpu_probe(ptr[i], probe, sizeof probe);
        printf("FREED %d %s %s\n", device, sizes[i].name, probe);
    }
    gdu_CUdeviceptr vptr = vmm.ptr;
    shim_vmm_free(&vmm);
    shim_gpu_probe(vptr, probe, sizeof probe);
    printf("FREED %d VMM-64MiB %s\n", device, probe);
    printf("SUM %d %016llx\n", device, (unsigned long long)sum);
}

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "0";
    unsigned long long t[9];
    if (strcmp(which, "all") == 0) {
        shim_gpu_init(0);
        int n = shim_gpu_device_count();
        printf("DEVICES %d\n", n);
        for (int d = 0; d < n; d++)
            one_device(d);
    } else {
        one_device(atoi(which));
    }
    shim_gpu_totals("end", t);
    printf("DONE\n");
    return 0;
}
