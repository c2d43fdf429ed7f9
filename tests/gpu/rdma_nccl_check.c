/* rdma_nccl_check [DEVICE]: what NCCL 2.28.9's GPUDirect RDMA decision reads
 * on this GPU, and whether the NIC's lookup would find the buffers NCCL
 * registers (docs/rdma-model.md). The attributes are asked from a library
 * named as NCCL's (libnccl_gdunlock_probe.so beside this program), through
 * the function libcuda's cuGetProcAddress hands out, as NCCL's cudart does:
 *   ATTR <n> <value>    116 (GPU check), 110 (VMM flag), 124 (DMA-BUF route)
 * Then NCCL's buffers: the 2 MiB cuMemAlloc of ncclGpuGdrSupport's probe and
 * ncclCommRegister's cudaMalloc buffers, and ncclCudaMalloc's VMM buffer
 * (cuMemCreate with gpuDirectRDMACapable exactly when 110 read 1, alloc.h:
 * 210-240), each with:
 *   PTRATTR <name> <value>  pointer attribute 15, from the NCCL-named library
 *   PTR/PIN ...             the lookup model's verdict (shim_gpu_common.h)
 *   DMABUF <name> <status> <size> <exporter>
 *                           route (b): cuMemGetHandleForAddressRange of the
 *                           buffer as NCCL asks it (net.cc:953, flags 0 off
 *                           C2C systems), and what the kernel says of the fd
 *                           it gave (/proc/self/fdinfo: size, exp_name)
 * Exit 0, 1 on a CUDA error, 69 without a GPU. */
#include "shim_gpu_common.h"

#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)

typedef int (*attr_fn)(int *, int, int);
typedef int (*range_handle_fn)(void *, unsigned long long, size_t, int, unsigned long long);

/* The dma-buf's size and exporter as the kernel shows them for fd. */
static void dmabuf_fdinfo(int fd, unsigned long long *size, char *exporter, size_t len)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/self/fdinfo/%d", fd);
    FILE *f = fopen(path, "r");
    while (f != NULL && fgets(line, sizeof line, f) != NULL) {
        char name[128];
        if (sscanf(line, "size: %llu", size) == 1)
            continue;
        if (sscanf(line, "exp_name: %127s", name) == 1)
            snprintf(exporter, len, "%s", name);
    }
    if (f != NULL)
        fclose(f);
}
typedef int (*pointer_attr_fn)(void *, int, unsigned long long);

static void *probe_library(const char *self)
{
    char path[PATH_MAX], copy[PATH_MAX];
    snprintf(copy, sizeof copy, "%s", self);
    snprintf(path, sizeof path, "%s/libnccl_gdunlock_probe.so", dirname(copy));
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        printf("ERROR %s\n", dlerror());
        exit(1);
    }
    return lib;
}

int main(int argc, char **argv)
{
    int device = argc > 1 ? atoi(argv[1]) : 0;
    shim_gpu_init(device);
    void *lib = probe_library(argv[0]);
    int (*ask)(attr_fn, int, int, int *);
    int (*ask_pointer)(pointer_attr_fn, unsigned long long, int *);
    *(void **)&ask = dlsym(lib, "gdunlock_probe_ask_attribute");
    *(void **)&ask_pointer = dlsym(lib, "gdunlock_probe_ask_pointer");
    /* cudart (NCCL's, built in) takes the driver's functions from
     * cuGetProcAddress_v2 (CUDA 12 on). */
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    int (*gpa)(const char *, void **, int, unsigned long long, int *) = NULL;
    if (cuda != NULL)
        *(void **)&gpa = dlsym(cuda, "cuGetProcAddress_v2");
    attr_fn get = NULL;
    pointer_attr_fn get_pointer = NULL;
    range_handle_fn range = NULL;
    int status = 0;
    if (gpa != NULL) {
        CK(gpa("cuDeviceGetAttribute", (void **)&get, 12000, 0, &status));
        CK(gpa("cuPointerGetAttribute", (void **)&get_pointer, 12000, 0, &status));
        CK(gpa("cuMemGetHandleForAddressRange", (void **)&range, 12000, 0, &status));
    }
    if (ask == NULL || ask_pointer == NULL || get == NULL || get_pointer == NULL || range == NULL) {
        printf("ERROR the probe library or libcuda lacks a function\n");
        return 1;
    }
    static const int attributes[] = {116, 110, 124};
    int value[3];
    for (int i = 0; i < 3; i++) {
        value[i] = -1;
        CK(ask(get, attributes[i], device, &value[i]));
        printf("ATTR %d %d\n", attributes[i], value[i]);
    }
    struct {
        const char *name;
        gdu_CUdeviceptr ptr;
        size_t size;
    } bufs[3] = {{"cudaMalloc-2MiB", 0, 0}, {"cudaMalloc-64MiB", 0, 0}, {"VMM-4MiB", 0, 0}};
    CK(cu->cuMemAlloc(&bufs[0].ptr, bufs[0].size = 2 * MiB));
    CK(cu->cuMemAlloc(&bufs[1].ptr, bufs[1].size = 64 * MiB));
    shim_vmm vmm; /* ncclCuMemAlloc (include/alloc.h:210-240) */
    shim_vmm_alloc_rdma(device, 4 * MiB, value[1] == 1, &vmm);
    bufs[2].ptr = vmm.ptr;
    bufs[2].size = vmm.size;
    for (int i = 0; i < 3; i++) {
        int capable = -1;
        CK(ask_pointer(get_pointer, bufs[i].ptr, &capable));
        printf("PTRATTR %s %d\n", bufs[i].name, capable);
        shim_gpu_pin(device, bufs[i].name, bufs[i].ptr, bufs[i].size);
        int fd = -1;
        unsigned long long size = 0;
        char exporter[128] = "-";
        int r = range(&fd, bufs[i].ptr, bufs[i].size, 1, 0);
        if (r == 0 && fd >= 0) {
            dmabuf_fdinfo(fd, &size, exporter, sizeof exporter);
            close(fd);
        }
        printf("DMABUF %s %d %llu %s\n", bufs[i].name, r, size, exporter);
    }
    shim_gpu_dump_report(getenv("SHIM_GPU_LEDGER"));
    shim_vmm_free(&vmm);
    CK(cu->cuMemFree(bufs[0].ptr));
    CK(cu->cuMemFree(bufs[1].ptr));
    return 0;
}
