/* shim_gpu_buffers [DEVICE|all]: cuMemAlloc buffers (1 B, 2 MiB, 64 MiB,
 * 64 MiB + 4 KiB) and a 64 MiB VMM buffer on each device; for each, the
 * shim's RM probe while it lives and after it is freed; GPU work on each;
 * the shim's totals; what the model of the kernel's lookup finds for each
 * (and for a piece of one, and for a range past the end of one), and, with
 * SHIM_GPU_LEDGER=path, the shim's account of every registration RM holds
 * while all buffers live. Lines: PTR, PIN (shim_gpu_common.h), BUF <dev>
 * <name> <probe> <status>, FREED <dev> <name> <probe> <status>, SUM <dev>
 * <checksum>, TOTALS ... */
#include "shim_gpu_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB ((size_t)1 << 20)

static const struct {
    const char *name;
    size_t size;
} sizes[] = {{"cuMemAlloc-1B", 1},
             {"cuMemAlloc-2MiB", 2 * MiB},
             {"cuMemAlloc-64MiB", 64 * MiB},
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
        shim_gpu_pin(device, sizes[i].name, ptr[i], sizes[i].size);
    }
    /* A cuFile buffer in the middle of an allocation, and one past its end. */
    shim_gpu_pin(device, "piece-of-64MiB", ptr[2] + 4096, 8 * MiB);
    shim_gpu_pin(device, "past-end-of-64MiB", ptr[2] + 63 * MiB, 2 * MiB);
    shim_vmm vmm;
    shim_vmm_alloc(device, 64 * MiB, &vmm);
    sum ^= shim_gpu_fill_and_sum(vmm.ptr, vmm.size, 99);
    shim_gpu_probe(vmm.ptr, probe, sizeof probe);
    printf("BUF %d VMM-64MiB %s\n", device, probe);
    shim_gpu_pin(device, "VMM-64MiB", vmm.ptr, vmm.size);
    shim_gpu_dump_report(getenv("SHIM_GPU_LEDGER"));
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
