/* libcufile_trace_probe.so: stands for libcufile in test_shim_interpose (the
 * shim traces callers named libcufile*): reaches libcuda as libcufile does,
 * by dlopen + dlsym, asks both GPUDirect RDMA attributes and makes its
 * P2PDMA probe. */
#include <dlfcn.h>
#include <stddef.h>

int trace_probe_ask(const char *libcuda, unsigned long long ptr, int out[3]);

/* out: attribute 116 of device 0, attribute 15 of ptr, and the status of a
 * dma-buf handle for 64 KiB at ptr mapped through the PCIe BAR (libcufile's
 * P2PDMA probe). */
int trace_probe_ask(const char *libcuda, unsigned long long ptr, int out[3])
{
    void *cuda = dlopen(libcuda, RTLD_NOW | RTLD_LOCAL);
    if (cuda == NULL)
        return -1;
    int (*device)(int *, int, int);
    int (*pointer)(void *, int, unsigned long long);
    *(void **)&device = dlsym(cuda, "cuDeviceGetAttribute");
    *(void **)&pointer = dlsym(cuda, "cuPointerGetAttribute");
    int (*range)(void *, unsigned long long, size_t, int, unsigned long long);
    *(void **)&range = dlsym(cuda, "cuMemGetHandleForAddressRange");
    int fd = -1;
    out[2] = range != NULL ? range(&fd, ptr, 65536, 1, 1) : -1;
    int r = device != NULL && pointer != NULL && device(&out[0], 116, 0) == 0 &&
                    pointer(&out[1], 15, ptr) == 0
                ? 0
                : -1;
    dlclose(cuda);
    return r;
}
