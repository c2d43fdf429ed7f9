/* A fake libcuda.so.1 with several "GPUs" for CPU tests of gdunlock p2p.
 * Device memory is host memory and copies happen at once; each stream keeps
 * a virtual clock that copies advance by bytes / bandwidth (+ a fixed cost),
 * so measured bandwidths are known in advance:
 *   within one GPU 2000 GB/s, peer access enabled 400 GB/s, staged 40 GB/s;
 *   per-copy cost 1 us, 2 us, 10 us.
 * Kernels (the SM part): cuModuleLoadDataEx takes any PTX with .entry lines,
 * cuLaunchKernel runs gdu_p2p_copy / _fill / _chase on the host. Each
 * address a kernel touches must lie in an allocation of the issuing GPU or
 * of a GPU it enabled peer access to; otherwise the context is lost as on a
 * GPU fault: the launch succeeds and every later call in that context
 * returns CUDA_ERROR_ILLEGAL_ADDRESS. Kernel times: copy and fill 1500 GB/s
 * within a GPU, 300 GB/s storing to a peer, 250 GB/s loading from one, 3 us
 * per launch; chase 0.5 us per local load, 1.5 us per peer load.
 * Environment: GDU_FAKE_P2P_GPUS (default 2), GDU_FAKE_P2P_PEER=0 (no peer
 * access), GDU_FAKE_P2P_CORRUPT=1 (peer-enabled copies damage one byte),
 * GDU_FAKE_P2P_ENABLE_FAIL=1 (cuCtxEnablePeerAccess fails),
 * GDU_FAKE_P2P_SM_FAULT=1 (kernels touching a peer's memory fault, as under
 * the GMMU aperture lock), GDU_FAKE_P2P_SM_CORRUPT=1 (kernel stores into a
 * peer's memory damage one byte), GDU_FAKE_P2P_JIT_FAIL=1 (the PTX does not
 * load; the JIT log says why), GDU_FAKE_P2P_IOMEM_OK=1 (cuMemHostRegister with
 * CU_MEMHOSTREGISTER_IOMEMORY accepts the range, which then counts as the
 * registering GPU's memory; otherwise it answers CUDA_ERROR_INVALID_VALUE).
 * Symbols it lacks come from the weak stubs io.cmake generates. */
#include "cuda/cuda_api.h"
#include "p2p/p2p_sm_pattern.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_DEV = 8, ERR_MAP_FAILED = 205, LAUNCH_US = 3 };

struct CUctx_st {
    int dev;
    int peer[MAX_DEV];
    gdu_CUresult lost; /* sticky error after a kernel fault */
};
struct CUstream_st {
    struct CUctx_st *ctx;
    double clock_us;
};
struct CUevent_st {
    struct CUctx_st *ctx;
    double t_us;
};
enum kernel { K_COPY, K_FILL, K_CHASE };
struct CUmod_st {
    char *text;
};
struct CUfunc_st {
    enum kernel kind;
};
static struct CUfunc_st kernels[] = {{K_COPY}, {K_FILL}, {K_CHASE}};
static const char *const kernel_names[] = {"gdu_p2p_copy", "gdu_p2p_fill", "gdu_p2p_chase"};

/* Device allocations and their GPU. */
static struct alloc {
    uintptr_t base;
    size_t size;
    int dev;
} * allocs;
static size_t nallocs;

static struct CUctx_st ctxs[MAX_DEV];
static __thread gdu_CUcontext current;
static double host_us; /* the latest time the host has waited for */

static int env_int(const char *name, int def)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : def;
}

static int ndev(void)
{
    int n = env_int("GDU_FAKE_P2P_GPUS", 2);
    return n < 1 ? 1 : n > MAX_DEV ? MAX_DEV : n;
}

gdu_CUresult cuInit(unsigned f) { return 0; }
gdu_CUresult cuGetErrorName(gdu_CUresult r, const char **name)
{
    *name = r == ERR_MAP_FAILED                   ? "CUDA_ERROR_MAP_FAILED"
            : r == GDU_CUDA_ERROR_ILLEGAL_ADDRESS ? "CUDA_ERROR_ILLEGAL_ADDRESS"
            : r == GDU_CUDA_ERROR_INVALID_PTX     ? "CUDA_ERROR_INVALID_PTX"
                                                  : "FAKE_CUDA_ERROR";
    return 0;
}
gdu_CUresult cuDeviceGetCount(int *n)
{
    *n = ndev();
    return 0;
}
gdu_CUresult cuDeviceGet(gdu_CUdevice *d, int o)
{
    *d = o;
    return o >= 0 && o < ndev() ? 0 : 101;
}
gdu_CUresult cuDeviceGetName(char *name, int len, gdu_CUdevice d)
{
    snprintf(name, (size_t)len, "Fake GPU %d", d);
    return 0;
}
gdu_CUresult cuDeviceGetPCIBusId(char *id, int len, gdu_CUdevice d)
{
    snprintf(id, (size_t)len, "0000:%02X:00.0", 0x10 + d);
    return 0;
}
gdu_CUresult cuDeviceTotalMem_v2(size_t *b, gdu_CUdevice d)
{
    *b = 1ull << 30;
    return 0;
}
gdu_CUresult cuDeviceGetAttribute(int *v, int attr, gdu_CUdevice d)
{
    *v = attr == GDU_CU_ATTR_PCI_BUS_ID                                           ? 0x10 + d
         : attr == GDU_CU_ATTR_PCI_DOMAIN_ID || attr == GDU_CU_ATTR_PCI_DEVICE_ID ? 0
         : attr == GDU_CU_ATTR_COMPUTE_CAPABILITY_MAJOR                           ? 9
         : attr == GDU_CU_ATTR_COMPUTE_CAPABILITY_MINOR                           ? 0
                                                                                  : 1;
    return 0;
}
gdu_CUresult cuDeviceCanAccessPeer(int *can, gdu_CUdevice d, gdu_CUdevice p)
{
    *can = d != p && env_int("GDU_FAKE_P2P_PEER", 1);
    return 0;
}
gdu_CUresult cuDeviceGetP2PAttribute(int *v, int attr, gdu_CUdevice s, gdu_CUdevice d)
{
    *v = attr == GDU_CU_P2P_ATTR_PERFORMANCE_RANK ? 0 : env_int("GDU_FAKE_P2P_PEER", 1);
    return 0;
}
gdu_CUresult cuDevicePrimaryCtxRetain(gdu_CUcontext *c, gdu_CUdevice d)
{
    ctxs[d].dev = d;
    *c = &ctxs[d];
    return 0;
}
gdu_CUresult cuDevicePrimaryCtxRelease_v2(gdu_CUdevice d)
{
    /* One test process runs many measurements: a lost context starts afresh. */
    memset(ctxs[d].peer, 0, sizeof ctxs[d].peer);
    ctxs[d].lost = 0;
    return 0;
}
gdu_CUresult cuCtxSetCurrent(gdu_CUcontext c)
{
    current = c;
    return 0;
}
gdu_CUresult cuCtxGetCurrent(gdu_CUcontext *c)
{
    *c = current;
    return 0;
}
gdu_CUresult cuCtxSynchronize(void) { return current->lost; }
gdu_CUresult cuCtxEnablePeerAccess(gdu_CUcontext peer, unsigned f)
{
    if (env_int("GDU_FAKE_P2P_ENABLE_FAIL", 0))
        return ERR_MAP_FAILED;
    if (current->peer[peer->dev])
        return GDU_CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
    current->peer[peer->dev] = 1;
    return 0;
}
gdu_CUresult cuCtxDisablePeerAccess(gdu_CUcontext peer)
{
    if (!current->peer[peer->dev])
        return 705; /* CUDA_ERROR_PEER_ACCESS_NOT_ENABLED */
    current->peer[peer->dev] = 0;
    return 0;
}

gdu_CUresult cuMemAlloc_v2(gdu_CUdeviceptr *p, size_t n)
{
    void *m = malloc(n);
    struct alloc *a = realloc(allocs, (nallocs + 1) * sizeof *a);
    if (m == NULL || a == NULL) {
        free(m);
        if (a != NULL)
            allocs = a;
        return GDU_CUDA_ERROR_OUT_OF_MEMORY;
    }
    allocs = a;
    allocs[nallocs++] = (struct alloc){(uintptr_t)m, n, current->dev};
    *p = (gdu_CUdeviceptr)(uintptr_t)m;
    return 0;
}
gdu_CUresult cuMemFree_v2(gdu_CUdeviceptr p)
{
    for (size_t k = 0; k < nallocs; k++)
        if (allocs[k].base == p) {
            allocs[k] = allocs[--nallocs];
            break;
        }
    if (nallocs == 0) {
        free(allocs);
        allocs = NULL;
    }
    free((void *)(uintptr_t)p);
    return 0;
}
gdu_CUresult cuMemHostAlloc(void **p, size_t n, unsigned f)
{
    *p = malloc(n);
    return *p ? 0 : GDU_CUDA_ERROR_OUT_OF_MEMORY;
}
gdu_CUresult cuMemFreeHost(void *p)
{
    free(p);
    return 0;
}
gdu_CUresult cuMemcpyHtoD_v2(gdu_CUdeviceptr d, const void *s, size_t n)
{
    if (current->lost)
        return current->lost;
    memcpy((void *)(uintptr_t)d, s, n);
    return 0;
}
gdu_CUresult cuMemcpyDtoH_v2(void *d, gdu_CUdeviceptr s, size_t n)
{
    if (current->lost)
        return current->lost;
    memcpy(d, (const void *)(uintptr_t)s, n);
    return 0;
}
gdu_CUresult cuMemsetD8_v2(gdu_CUdeviceptr d, unsigned char v, size_t n)
{
    if (current->lost)
        return current->lost;
    memset((void *)(uintptr_t)d, v, n);
    return 0;
}

static double start_of(gdu_CUstream s) { return s->clock_us > host_us ? s->clock_us : host_us; }

static gdu_CUresult run_copy(gdu_CUdeviceptr d, gdu_CUdeviceptr s, size_t n, gdu_CUstream st,
                             double gbps, double cost_us, int corrupt)
{
    memcpy((void *)(uintptr_t)d, (const void *)(uintptr_t)s, n);
    if (corrupt && n > 0)
        ((unsigned char *)(uintptr_t)d)[n / 2] ^= 0x5a;
    st->clock_us = start_of(st) + cost_us + (double)n / (gbps * 1e3);
    return 0;
}
gdu_CUresult cuMemcpyDtoDAsync_v2(gdu_CUdeviceptr d, gdu_CUdeviceptr s, size_t n, gdu_CUstream st)
{
    return run_copy(d, s, n, st, 2000, 1, 0);
}
gdu_CUresult cuMemcpyPeerAsync(gdu_CUdeviceptr d, gdu_CUcontext dc, gdu_CUdeviceptr s,
                               gdu_CUcontext sc, size_t n, gdu_CUstream st)
{
    if (dc == sc)
        return cuMemcpyDtoDAsync_v2(d, s, n, st);
    int direct = sc->peer[dc->dev];
    return direct ? run_copy(d, s, n, st, 400, 2, env_int("GDU_FAKE_P2P_CORRUPT", 0))
                  : run_copy(d, s, n, st, 40, 10, 0);
}

gdu_CUresult cuStreamCreate(gdu_CUstream *s, unsigned f)
{
    *s = calloc(1, sizeof **s);
    (*s)->ctx = current;
    return 0;
}
gdu_CUresult cuStreamDestroy_v2(gdu_CUstream s)
{
    free(s);
    return 0;
}
gdu_CUresult cuStreamSynchronize(gdu_CUstream s)
{
    if (s->clock_us > host_us)
        host_us = s->clock_us;
    return s->ctx->lost;
}
gdu_CUresult cuStreamWaitEvent(gdu_CUstream s, gdu_CUevent e, unsigned f)
{
    if (e->t_us > s->clock_us)
        s->clock_us = e->t_us;
    return 0;
}
gdu_CUresult cuEventCreate(gdu_CUevent *e, unsigned f)
{
    *e = calloc(1, sizeof **e);
    return 0;
}
gdu_CUresult cuEventDestroy_v2(gdu_CUevent e)
{
    free(e);
    return 0;
}
gdu_CUresult cuEventRecord(gdu_CUevent e, gdu_CUstream s)
{
    s->clock_us = start_of(s);
    e->t_us = s->clock_us;
    e->ctx = s->ctx;
    return s->ctx->lost;
}
gdu_CUresult cuEventSynchronize(gdu_CUevent e)
{
    if (e->t_us > host_us)
        host_us = e->t_us;
    return e->ctx != NULL ? e->ctx->lost : 0;
}
gdu_CUresult cuEventElapsedTime(float *ms, gdu_CUevent a, gdu_CUevent b)
{
    *ms = (float)((b->t_us - a->t_us) / 1e3);
    return 0;
}

gdu_CUresult cuModuleLoadDataEx(gdu_CUmodule *mod, const void *image, unsigned n, int *options,
                                void **values)
{
    if (env_int("GDU_FAKE_P2P_JIT_FAIL", 0)) {
        for (unsigned k = 0; k < n; k++)
            if (options[k] == GDU_CU_JIT_ERROR_LOG_BUFFER)
                snprintf(values[k], 64, "ptxas fatal: fake JIT failure\nsecond line");
        return GDU_CUDA_ERROR_INVALID_PTX;
    }
    if (strstr(image, ".entry") == NULL)
        return GDU_CUDA_ERROR_INVALID_PTX;
    *mod = calloc(1, sizeof **mod);
    (*mod)->text = strdup(image);
    return 0;
}
gdu_CUresult cuModuleUnload(gdu_CUmodule mod)
{
    free(mod->text);
    free(mod);
    return 0;
}
gdu_CUresult cuModuleGetFunction(gdu_CUfunction *fn, gdu_CUmodule mod, const char *name)
{
    char head[96];
    snprintf(head, sizeof head, ".entry %s(", name);
    for (size_t k = 0; k < sizeof kernels / sizeof kernels[0]; k++)
        if (strcmp(name, kernel_names[k]) == 0 && strstr(mod->text, head) != NULL) {
            *fn = &kernels[k];
            return 0;
        }
    return GDU_CUDA_ERROR_NOT_FOUND;
}

static int owner_of(uintptr_t p, size_t n);

gdu_CUresult cuMemcpyDtoD_v2(gdu_CUdeviceptr d, gdu_CUdeviceptr s, size_t n)
{
    if (current->lost)
        return current->lost;
    memmove((void *)(uintptr_t)d, (const void *)(uintptr_t)s, n);
    return 0;
}

gdu_CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned flags)
{
    if (!(flags & GDU_CU_MEMHOSTREGISTER_IOMEMORY) || !env_int("GDU_FAKE_P2P_IOMEM_OK", 0))
        return GDU_CUDA_ERROR_INVALID_VALUE;
    struct alloc *a = realloc(allocs, (nallocs + 1) * sizeof *a);
    if (a == NULL)
        return GDU_CUDA_ERROR_OUT_OF_MEMORY;
    allocs = a;
    allocs[nallocs++] = (struct alloc){(uintptr_t)p, n, current->dev};
    return 0;
}
gdu_CUresult cuMemHostUnregister(void *p)
{
    for (size_t k = 0; k < nallocs; k++)
        if (allocs[k].base == (uintptr_t)p) {
            allocs[k] = allocs[--nallocs];
            return 0;
        }
    return GDU_CUDA_ERROR_INVALID_VALUE;
}
gdu_CUresult cuMemHostGetDevicePointer_v2(gdu_CUdeviceptr *d, void *p, unsigned flags)
{
    *d = (gdu_CUdeviceptr)(uintptr_t)p;
    return owner_of((uintptr_t)p, 1) >= 0 ? 0 : GDU_CUDA_ERROR_INVALID_VALUE;
}

/* The GPU owning [p, p+n), or -1 when no device allocation holds it. */
static int owner_of(uintptr_t p, size_t n)
{
    for (size_t k = 0; k < nallocs; k++)
        if (p >= allocs[k].base && p + n <= allocs[k].base + allocs[k].size)
            return allocs[k].dev;
    return -1;
}

/* Whether the current context's kernel may touch [p, p+n); a peer's memory
 * counts as remote in *remote. Otherwise the context is lost. */
static int reach(uintptr_t p, size_t n, int *remote)
{
    int dev = owner_of(p, n);
    *remote = dev >= 0 && dev != current->dev;
    if (dev < 0 || (*remote && (!current->peer[dev] || env_int("GDU_FAKE_P2P_SM_FAULT", 0)))) {
        current->lost = GDU_CUDA_ERROR_ILLEGAL_ADDRESS;
        return 0;
    }
    return 1;
}

gdu_CUresult cuLaunchKernel(gdu_CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                            unsigned by, unsigned bz, unsigned shared, gdu_CUstream st,
                            void **params, void **extra)
{
    static struct CUstream_st legacy[MAX_DEV]; /* stream 0 of each context */
    if (current->lost)
        return current->lost;
    if (st == NULL) {
        st = &legacy[current->dev];
        st->ctx = current;
    }
    if (st->ctx != current || gx == 0 || bx == 0 || params == NULL || extra != NULL)
        return GDU_CUDA_ERROR_INVALID_VALUE;
    double us = LAUNCH_US;
    int rd = 0, rs = 0;
    if (f->kind == K_COPY || f->kind == K_FILL) {
        uintptr_t dst = (uintptr_t) * (gdu_CUdeviceptr *)params[0];
        uint64_t count = *(unsigned long long *)params[f->kind == K_COPY ? 2 : 1];
        size_t bytes = f->kind == K_COPY ? count * 16 : count * 4;
        uintptr_t src = f->kind == K_COPY ? (uintptr_t) * (gdu_CUdeviceptr *)params[1] : 0;
        if (!reach(dst, bytes, &rd) || (src && !reach(src, bytes, &rs)))
            return 0; /* asynchronous: the fault shows at the next synchronisation */
        if (src)
            memmove((void *)dst, (const void *)src, bytes);
        else
            for (uint64_t w = 0; w < count; w++) {
                uint32_t v = gdu_p2p_sm_word(*(unsigned *)params[2], w);
                memcpy((char *)dst + 4 * w, &v, 4);
            }
        if (rd && bytes > 0 && env_int("GDU_FAKE_P2P_SM_CORRUPT", 0))
            ((unsigned char *)dst)[bytes / 2] ^= 0x5a;
        us += (double)bytes / ((rd ? 300 : rs ? 250 : 1500) * 1e3);
    } else {
        uintptr_t state = (uintptr_t) * (gdu_CUdeviceptr *)params[0];
        uint64_t hops = *(unsigned long long *)params[1], at;
        int remote;
        if (!reach(state, 8, &remote) || remote) {
            current->lost = GDU_CUDA_ERROR_ILLEGAL_ADDRESS;
            return 0;
        }
        memcpy(&at, (void *)state, 8);
        for (uint64_t h = 0; h < hops; h++) {
            if (!reach(at, 8, &remote))
                return 0;
            memcpy(&at, (void *)(uintptr_t)at, 8);
            us += remote ? 1.5 : 0.5;
        }
        memcpy((void *)state, &at, 8);
    }
    st->clock_us = start_of(st) + us;
    return 0;
}
