/* shim_attr_check [CUDART]: CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED of
 * device 0 through every route programs take, one line each:
 *   ROUTE direct <v>        cuDeviceGetAttribute bound by the dynamic linker
 *                           (shim_attr_direct, linked with -lcuda, prints this one)
 *   ROUTE dlsym <v>         dlopen("libcuda.so.1") + dlsym: libcufile's route
 *   ROUTE cuGetProcAddress_v2 <v>, ROUTE cuGetProcAddress <v>: cudart's and
 *                           PyTorch's route to driver functions
 *   ROUTE cudaDeviceGetAttribute <v>: through libcudart (CUDART, a path or
 *                           "libcudart.so"), fastsafetensors' route
 *   ROUTE rdma-library <v>  asked from a library whose name starts with
 *                           "libnccl" (libnccl_gdunlock_probe.so beside this
 *                           program), as NCCL asks
 * A route that cannot be taken prints "ROUTE <name> unavailable: why". */
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { ATTR = 116 };

typedef int (*attr_fn)(int *, int, int);

static void route(const char *name, attr_fn f, const char *why)
{
    int v = -1;
    if (f == NULL) {
        printf("ROUTE %s unavailable: %s\n", name, why);
        return;
    }
    int r = f(&v, ATTR, 0);
    if (r != 0)
        printf("ROUTE %s error %d\n", name, r);
    else
        printf("ROUTE %s %d\n", name, v);
}

int main(int argc, char **argv)
{
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (cuda == NULL) {
        printf("NOGPU: %s\n", dlerror());
        return 69;
    }
    int (*init)(unsigned);
    *(void **)&init = dlsym(cuda, "cuInit");
    if (init == NULL || init(0) != 0) {
        printf("NOGPU: cuInit failed\n");
        return 69;
    }
    attr_fn f;
    *(void **)&f = dlsym(cuda, "cuDeviceGetAttribute");
    route("dlsym", f, "no cuDeviceGetAttribute");

    int (*gp2)(const char *, void **, int, unsigned long long, int *);
    *(void **)&gp2 = dlsym(cuda, "cuGetProcAddress_v2");
    attr_fn f2 = NULL;
    int status = 0;
    if (gp2 != NULL && gp2("cuDeviceGetAttribute", (void **)&f2, 12000, 0, &status) != 0)
        f2 = NULL;
    route("cuGetProcAddress_v2", f2, "cuGetProcAddress_v2 missing or failed");

    int (*gp1)(const char *, void **, int, unsigned long long);
    *(void **)&gp1 = dlsym(cuda, "cuGetProcAddress");
    attr_fn f1 = NULL;
    if (gp1 != NULL && gp1("cuDeviceGetAttribute", (void **)&f1, 12000, 0) != 0)
        f1 = NULL;
    route("cuGetProcAddress", f1, "cuGetProcAddress missing or failed");

    const char *cudart_path = argc > 1 ? argv[1] : "libcudart.so";
    void *cudart = dlopen(cudart_path, RTLD_NOW | RTLD_LOCAL);
    attr_fn fr = NULL;
    if (cudart != NULL)
        *(void **)&fr = dlsym(cudart, "cudaDeviceGetAttribute");
    route("cudaDeviceGetAttribute", fr, cudart == NULL ? dlerror() : "no cudaDeviceGetAttribute");

    char self[PATH_MAX], probe[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = '\0';
    snprintf(probe, sizeof probe, "%s/libnccl_gdunlock_probe.so", dirname(self));
    void *lib = dlopen(probe, RTLD_NOW | RTLD_LOCAL);
    int (*ask)(attr_fn, int *);
    ask = NULL;
    if (lib != NULL)
        *(void **)&ask = dlsym(lib, "gdunlock_probe_ask");
    if (ask == NULL) {
        printf("ROUTE rdma-library unavailable: %s\n",
               lib == NULL ? dlerror() : "no gdunlock_probe_ask");
    } else {
        int v = -1;
        int r = ask(f, &v);
        printf(r == 0 ? "ROUTE rdma-library %d\n" : "ROUTE rdma-library error %d\n",
               r == 0 ? v : r);
    }
    return 0;
}
