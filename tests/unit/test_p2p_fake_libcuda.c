/* A fake libcuda.so.1 with several "GPUs" for CPU tests of gdunlock p2p.
 * Device memory is host memory and copies happen at once; each stream keeps
 * a virtual clock that copies advance by bytes / bandwidth (+ a fixed cost),
 * so measured bandwidths are known in advance:
 *   within one GPU 2000 GB/s, peer access enabled 400 GB/s, staged 40 GB/s;
 *   per-copy cost 1 us, 2 us, 10 us.
 * Environment: GDU_FAKE_P2P_GPUS (default 2), GDU_FAKE_P2P_PEER=0 (no peer
 * access), GDU_FAKE_P2P_CORRUPT=1 (peer-enabled copies damage one byte),
 * GDU_FAKE_P2P_ENABLE_FAIL=1 (cuCtxEnablePeerAccess fails).
 * Symbols it lacks come from the weak stubs io.cmake generates. */
#include "cuda/cuda_api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_DEV = 8, ERR_MAP_FAILED = 205 };

struct CUctx_st {
    int dev;
    int peer[MAX_DEV];
};
struct CUstream_st {
    struct CUctx_st *ctx;
    double clock_us;
};
struct CUevent_st {
    double t_us;
};

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
    *name = r == ERR_MAP_FAILED ? "CUDA_ERROR_MAP_FAILED" : "FAKE_CUDA_ERROR";
    return 0;
}
gdu_CUresult cuDeviceGetCount(int *n) { *n = ndev(); return 0; }
gdu_CUresult cuDeviceGet(gdu_CUdevice *d, int o) { *d = o; return o >= 0 && o < ndev() ? 0 : 101; }
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
gdu_CUresult cuDeviceTotalMem_v2(size_t *b, gdu_CUdevice d) { *b = 1ull << 30; return 0; }
gdu_CUresult cuDeviceGetAttribute(int *v, int attr, gdu_CUdevice d)
{
    *v = attr == GDU_CU_ATTR_PCI_BUS_ID ? 0x10 + d
       : attr == GDU_CU_ATTR_PCI_DOMAIN_ID || attr == GDU_CU_ATTR_PCI_DEVICE_ID ? 0
       : attr == GDU_CU_ATTR_COMPUTE_CAPABILITY_MAJOR ? 9
       : attr == GDU_CU_ATTR_COMPUTE_CAPABILITY_MINOR ? 0 : 1;
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
    memset(ctxs[d].peer, 0, sizeof ctxs[d].peer);
    return 0;
}
gdu_CUresult cuCtxSetCurrent(gdu_CUcontext c) { current = c; return 0; }
gdu_CUresult cuCtxGetCurrent(gdu_CUcontext *c) { *c = current; return 0; }
gdu_CUresult cuCtxSynchronize(void) { return 0; }
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
    *p = (gdu_CUdeviceptr)(uintptr_t)m;
    return m ? 0 : GDU_CUDA_ERROR_OUT_OF_MEMORY;
}
gdu_CUresult cuMemFree_v2(gdu_CUdeviceptr p) { free((void *)(uintptr_t)p); return 0; }
gdu_CUresult cuMemHostAlloc(void **p, size_t n, unsigned f)
{
    *p = malloc(n);
    return *p ? 0 : GDU_CUDA_ERROR_OUT_OF_MEMORY;
}
gdu_CUresult cuMemFreeHost(void *p) { free(p); return 0; }
gdu_CUresult cuMemcpyHtoD_v2(gdu_CUdeviceptr d, const void *s, size_t n)
{
    memcpy((void *)(uintptr_t)d, s, n);
    return 0;
}
gdu_CUresult cuMemcpyDtoH_v2(void *d, gdu_CUdeviceptr s, size_t n)
{
    memcpy(d, (const void *)(uintptr_t)s, n);
    return 0;
}
gdu_CUresult cuMemsetD8_v2(gdu_CUdeviceptr d, unsigned char v, size_t n)
{
    memset((void *)(uintptr_t)d, v, n);
    return 0;
}

static double start_of(gdu_CUstream s)
{
    return s->clock_us > host_us ? s->clock_us : host_us;
}

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
gdu_CUresult cuStreamDestroy_v2(gdu_CUstream s) { free(s); return 0; }
gdu_CUresult cuStreamSynchronize(gdu_CUstream s)
{
    if (s->clock_us > host_us)
        host_us = s->clock_us;
    return 0;
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
gdu_CUresult cuEventDestroy_v2(gdu_CUevent e) { free(e); return 0; }
gdu_CUresult cuEventRecord(gdu_CUevent e, gdu_CUstream s)
{
    s->clock_us = start_of(s);
    e->t_us = s->clock_us;
    return 0;
}
gdu_CUresult cuEventSynchronize(gdu_CUevent e)
{
    if (e->t_us > host_us)
        host_us = e->t_us;
    return 0;
}
gdu_CUresult cuEventElapsedTime(float *ms, gdu_CUevent a, gdu_CUevent b)
{
    *ms = (float)((b->t_us - a->t_us) / 1e3);
    return 0;
}
