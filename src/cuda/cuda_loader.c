#include "cuda/cuda_api.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static gdu_cuda g_cuda;
static const gdu_cuda *g_loaded;
static char g_why[256];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void load_once(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        snprintf(g_why, sizeof g_why,
                 "libcuda.so.1 not found (no NVIDIA driver user-space library): %s", dlerror());
        return;
    }
    g_cuda.handle = h;
#define GDU_CUDA_RESOLVE(name, sym, params)                                                        \
    *(void **)(&g_cuda.name) = dlsym(h, sym);                                                      \
    if (g_cuda.name == NULL) {                                                                     \
        snprintf(g_why, sizeof g_why, "libcuda.so.1 lacks %s (driver too old?)", sym);             \
        return;                                                                                    \
    }
    GDU_CUDA_FUNCTIONS(GDU_CUDA_RESOLVE)
#undef GDU_CUDA_RESOLVE
    gdu_CUresult r = g_cuda.cuInit(0);
    if (r != GDU_CUDA_SUCCESS) {
        const char *name = NULL;
        g_cuda.cuGetErrorName(r, &name);
        snprintf(g_why, sizeof g_why, "cuInit failed: %s (%d)", name ? name : "unknown", r);
        return;
    }
    g_loaded = &g_cuda;
}

const gdu_cuda *gdu_cuda_load(char *why, size_t why_len)
{
    pthread_once(&g_once, load_once);
    if (g_loaded == NULL && why != NULL && why_len > 0)
        snprintf(why, why_len, "%s", g_why);
    return g_loaded;
}

const char *gdu_cuda_result_name(gdu_CUresult r)
{
    static __thread char buf[96];
    const char *name = NULL;
    if (g_cuda.cuGetErrorName != NULL)
        g_cuda.cuGetErrorName(r, &name);
    snprintf(buf, sizeof buf, "%s (%d)", name ? name : "CUDA_ERROR_UNKNOWN", r);
    return buf;
}
