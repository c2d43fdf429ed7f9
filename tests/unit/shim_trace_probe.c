/* libcufile_trace_probe.so: stands for libcufile in test_shim_interpose (the
 * shim traces callers named libcufile*): reaches libcuda as libcufile does,
 * by dlopen + dlsym, and asks both GPUDirect RDMA attributes. */
#include <dlfcn.h>
#include <stddef.h>

int trace_probe_ask(const char *libcuda, unsigned long long ptr, int out[2]);

int trace_probe_ask(const char *libcuda, unsigned long long ptr, int out[2])
{
    void *cuda = dlopen(libcuda, RTLD_NOW | RTLD_LOCAL);
    if (cuda == NULL)
        return -1;
    int (*device)(int *, int, int);
    int (*pointer)(void *, int, unsigned long long);
    *(void **)&device = dlsym(cuda, "cuDeviceGetAttribute");
    *(void **)&pointer = dlsym(cuda, "cuPointerGetAttribute");
    int r = device != NULL && pointer != NULL && device(&out[0], 116, 0) == 0 &&
                    pointer(&out[1], 15, ptr) == 0
                ? 0
                : -1;
    dlclose(cuda);
    return r;
}
