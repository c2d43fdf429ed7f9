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
 * A route that cannot be taken prints "ROUTE <name> unavailable: why".
 * Then CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE (15) of a 16 MiB
 * cuMemAlloc buffer ("device") and of static memory CUDA does not know
 * ("host"), one line each: dlsym, cuGetProcAddress_v2, cuGetProcAddress,
 * cuPointerGetAttributes (through dlsym), rdma-library (the probe library
 * named like NCCL's). The answer goes into eight bytes of 0xa5, read only
 * after the call returned: "PROUTE <route> <buffer> <v> bytes=<n>" (the n
 * bytes the call wrote, little-endian: the attribute's width, which the CUDA
 * reference does not give), "... untouched" (success, nothing written) or
 * "... error <r>". The 2026-12-01 run printed -1 everywhere because the
 * value was read as an argument beside the call that wrote it (C leaves
 * their order open; gcc read it first). */
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

typedef int (*pointer_fn)(void *, int, unsigned long long);
typedef int (*pointers_fn)(unsigned, int *, void **, unsigned long long);

/* The caller's buffer for attribute 15. */
typedef union {
    unsigned char b[8];
    int i;
    unsigned long long all;
} answer_buf;

static void fill(answer_buf *a) { memset(a->b, 0xa5, sizeof a->b); }

/* One PROUTE line for a call that returned r and left a. */
static void proute(const char *name, const char *buffer, int r, const answer_buf *a)
{
    if (r != 0) {
        printf("PROUTE %s %s error %d\n", name, buffer, r);
        return;
    }
    int n = 0;
    for (int k = 0; k < (int)sizeof a->b; k++)
        if (a->b[k] != 0xa5)
            n = k + 1;
    unsigned long long v = 0;
    for (int k = n; k-- > 0;)
        v = v << 8 | a->b[k];
    if (n == 0)
        printf("PROUTE %s %s untouched\n", name, buffer);
    else
        printf("PROUTE %s %s %llu bytes=%d\n", name, buffer, v, n);
}

static void pointer_routes(void *cuda,
                           int (*gp2)(const char *, void **, int, unsigned long long, int *),
                           int (*gp1)(const char *, void **, int, unsigned long long))
{
    int (*retain)(void **, int);
    int (*set)(void *);
    int (*alloc)(unsigned long long *, size_t);
    *(void **)&retain = dlsym(cuda, "cuDevicePrimaryCtxRetain");
    *(void **)&set = dlsym(cuda, "cuCtxSetCurrent");
    *(void **)&alloc = dlsym(cuda, "cuMemAlloc_v2");
    void *ctx = NULL;
    unsigned long long dev = 0;
    if (!retain || !set || !alloc || retain(&ctx, 0) != 0 || set(ctx) != 0 ||
        alloc(&dev, 16 << 20) != 0) {
        printf("PROUTE unavailable: no context or buffer\n");
        return;
    }
    static char host_buffer[1 << 16];
    const struct {
        const char *name;
        unsigned long long ptr;
    } buffers[] = {{"device", dev}, {"host", (unsigned long long)(size_t)host_buffer}};
    pointer_fn direct, v2 = NULL, v1 = NULL;
    pointers_fn many;
    *(void **)&direct = dlsym(cuda, "cuPointerGetAttribute");
    *(void **)&many = dlsym(cuda, "cuPointerGetAttributes");
    int status = 0;
    if (gp2 != NULL)
        gp2("cuPointerGetAttribute", (void **)&v2, 12000, 0, &status);
    if (gp1 != NULL)
        gp1("cuPointerGetAttribute", (void **)&v1, 12000, 0);
    char self[PATH_MAX], probe[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = '\0';
    snprintf(probe, sizeof probe, "%s/libnccl_gdunlock_probe.so", dirname(self));
    void *lib = dlopen(probe, RTLD_NOW | RTLD_LOCAL);
    int (*ask)(pointer_fn, unsigned long long, int *) = NULL;
    if (lib != NULL)
        *(void **)&ask = dlsym(lib, "gdunlock_probe_ask_pointer");
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++) {
        const char *b = buffers[i].name;
        unsigned long long p = buffers[i].ptr;
        answer_buf a;
        int r;
        const struct {
            const char *name;
            pointer_fn f;
        } one[] = {{"dlsym", direct}, {"cuGetProcAddress_v2", v2}, {"cuGetProcAddress", v1}};
        for (size_t k = 0; k < sizeof one / sizeof one[0]; k++) {
            if (one[k].f == NULL) {
                printf("PROUTE %s %s unavailable\n", one[k].name, b);
                continue;
            }
            fill(&a);
            r = one[k].f(a.b, 15, p);
            proute(one[k].name, b, r, &a);
        }
        int attr = 15;
        void *data[1] = {a.b};
        if (many != NULL) {
            fill(&a);
            r = many(1, &attr, data, p);
            proute("cuPointerGetAttributes", b, r, &a);
        }
        if (ask != NULL && direct != NULL) {
            fill(&a);
            r = ask(direct, p, &a.i);
            proute("rdma-library", b, r, &a);
        }
    }
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

    pointer_routes(cuda, gp2, gp1);

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
