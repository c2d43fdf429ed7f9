/* The bench's GPU: context, the device buffer mirroring the file range
 * (cuMemAlloc or VMM), and checking that buffer against the pattern. */
#include "bench/bench.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define PIECE ((size_t)256 << 20)

static int fail(bench_gpu *g, const char *what, gdu_CUresult r)
{
    snprintf(g->why, sizeof g->why, "%s: %s", what, gdu_cuda_result_name(r));
    return -ENODEV;
}

/* Reserves, maps and enables access to size bytes of VMM memory. */
static int alloc_vmm(bench_gpu *g, size_t size)
{
    const gdu_cuda *cu = g->cu;
    gdu_CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = GDU_CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = GDU_CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = g->dev;
    size_t gran = 0;
    gdu_CUresult r =
        cu->cuMemGetAllocationGranularity(&gran, &prop, GDU_CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (r != GDU_CUDA_SUCCESS)
        return fail(g, "cuMemGetAllocationGranularity", r);
    size = (size + gran - 1) / gran * gran;
    if ((r = cu->cuMemCreate(&g->vmm_handle, size, &prop, 0)) != GDU_CUDA_SUCCESS)
        return fail(g, "cuMemCreate", r);
    if ((r = cu->cuMemAddressReserve(&g->buf, size, gran, 0, 0)) != GDU_CUDA_SUCCESS) {
        cu->cuMemRelease(g->vmm_handle);
        g->vmm_handle = 0;
        return fail(g, "cuMemAddressReserve", r);
    }
    g->buf_size = size;
    if ((r = cu->cuMemMap(g->buf, size, 0, g->vmm_handle, 0)) != GDU_CUDA_SUCCESS)
        return fail(g, "cuMemMap", r);
    gdu_CUmemAccessDesc access = {{GDU_CU_MEM_LOCATION_TYPE_DEVICE, g->dev},
                                  GDU_CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    if ((r = cu->cuMemSetAccess(g->buf, size, &access, 1)) != GDU_CUDA_SUCCESS)
        return fail(g, "cuMemSetAccess", r);
    return 0;
}

int bench_gpu_open(bench_gpu *g, const bench_config *c)
{
    memset(g, 0, sizeof *g);
    char why[256] = "";
    g->cu = gdu_cuda_load(why, sizeof why);
    if (g->cu == NULL) {
        snprintf(g->why, sizeof g->why, "no GPU: %.240s", why);
        return -ENODEV;
    }
    gdu_CUresult r = g->cu->cuDeviceGet(&g->dev, c->device);
    if (r != GDU_CUDA_SUCCESS)
        return fail(g, "no such GPU (cuDeviceGet)", r);
    g->cu->cuDeviceGetName(g->name, sizeof g->name, g->dev);
    /* Current for good: every path runs on this thread's context. */
    if (gdu_cuda_ctx_enter(g->cu, c->device, &g->primary, NULL, g->why, sizeof g->why) !=
        GDU_CUDA_SUCCESS)
        return -ENODEV;
    int err;
    if (c->vmm) {
        err = alloc_vmm(g, c->total);
    } else {
        r = g->cu->cuMemAlloc(&g->buf, c->total);
        err = r == GDU_CUDA_SUCCESS ? 0 : fail(g, "cuMemAlloc of the device buffer (-s bytes)", r);
        if (err == 0)
            g->buf_size = c->total;
    }
    g->ok = err == 0;
    return err;
}

void bench_gpu_close(bench_gpu *g)
{
    if (g->cu == NULL || g->primary.ctx == NULL)
        return;
    if (g->vmm_handle != 0) {
        if (g->buf != 0) {
            g->cu->cuMemUnmap(g->buf, g->buf_size);
            g->cu->cuMemAddressFree(g->buf, g->buf_size);
        }
        g->cu->cuMemRelease(g->vmm_handle);
    } else if (g->buf != 0) {
        g->cu->cuMemFree(g->buf);
    }
    gdu_cuda_ctx_release(g->cu, &g->primary);
}

int bench_gpu_reset(bench_gpu *g, const bench_config *c, char *why, size_t len)
{
    const gdu_cuda *cu = g->cu;
    gdu_CUresult r;
    if (!c->write) {
        /* The memset runs on the legacy stream, which the engine's
         * non-blocking streams do not wait for: finish it first. */
        r = cu->cuMemsetD8(g->buf, 0, c->total);
        if (r == GDU_CUDA_SUCCESS)
            r = cu->cuCtxSynchronize();
        if (r != GDU_CUDA_SUCCESS) {
            snprintf(why, len, "cuMemsetD8: %s", gdu_cuda_result_name(r));
            return -EIO;
        }
        return 0;
    }
    void *host = NULL;
    if ((r = cu->cuMemHostAlloc(&host, PIECE, 0)) != GDU_CUDA_SUCCESS) {
        snprintf(why, len, "cuMemHostAlloc: %s", gdu_cuda_result_name(r));
        return -ENOMEM;
    }
    for (uint64_t off = 0; r == GDU_CUDA_SUCCESS && off < c->total; off += PIECE) {
        size_t n = c->total - off < PIECE ? (size_t)(c->total - off) : PIECE;
        gdu_pattern_fill(host, off, n, c->seed);
        r = cu->cuMemcpyHtoD(g->buf + off, host, n);
    }
    cu->cuMemFreeHost(host);
    if (r != GDU_CUDA_SUCCESS) {
        snprintf(why, len, "cuMemcpyHtoD: %s", gdu_cuda_result_name(r));
        return -EIO;
    }
    return 0;
}

int bench_gpu_verify(bench_gpu *g, const bench_config *c, char *why, size_t len)
{
    const gdu_cuda *cu = g->cu;
    void *host = NULL;
    gdu_CUresult r = cu->cuMemHostAlloc(&host, PIECE, 0);
    if (r != GDU_CUDA_SUCCESS) {
        snprintf(why, len, "cuMemHostAlloc: %s", gdu_cuda_result_name(r));
        return -ENOMEM;
    }
    int ok = 1;
    for (uint64_t off = 0; ok == 1 && off < c->total; off += PIECE) {
        size_t n = c->total - off < PIECE ? (size_t)(c->total - off) : PIECE;
        if ((r = cu->cuMemcpyDtoH(host, g->buf + off, n)) != GDU_CUDA_SUCCESS) {
            snprintf(why, len, "cuMemcpyDtoH: %s", gdu_cuda_result_name(r));
            ok = -EIO;
            break;
        }
        uint64_t bad = gdu_pattern_check(host, off, n, c->seed);
        if (bad != UINT64_MAX) {
            snprintf(why, len, "GPU data differs from the file at offset %" PRIu64, bad);
            ok = 0;
        }
    }
    cu->cuMemFreeHost(host);
    return ok;
}
