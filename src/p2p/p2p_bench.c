#include "p2p/p2p_bench_ops.h"

#include "util/clock.h"
#include "util/pattern.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { LATENCY_BYTES = 4 };

/* One copy of bytes from GPU s to GPU d on stream st (the current context is s's). */
static int copy(struct bench *b, int s, int d, gdu_CUdeviceptr dst, gdu_CUdeviceptr src,
                size_t bytes, gdu_CUstream st)
{
    if (s == d)
        CU(b, cuMemcpyDtoDAsync, (dst, src, bytes, st));
    else
        CU(b, cuMemcpyPeerAsync, (dst, b->g[d].primary.ctx, src, b->g[s].primary.ctx, bytes, st));
    return 0;
}

static int setup(struct bench *b, const int *ordinals)
{
    size_t bytes = b->cfg->bytes;
    for (int i = 0; i < b->n; i++) {
        struct gpu_res *g = &b->g[i];
        if (gdu_cuda_ctx_retain(b->cu, ordinals[i], &g->primary, b->why, b->why_len) !=
            GDU_CUDA_SUCCESS)
            return -1;
        TRY(gdu_p2p_bench_use(b, i));
        for (int k = 0; k < 2; k++)
            CU(b, cuStreamCreate, (&g->stream[k], GDU_CU_STREAM_NON_BLOCKING));
        CU(b, cuEventCreate, (&g->start, GDU_CU_EVENT_DEFAULT));
        CU(b, cuEventCreate, (&g->stop, GDU_CU_EVENT_DEFAULT));
        CU(b, cuEventCreate, (&g->stop2, GDU_CU_EVENT_DEFAULT));
        CU(b, cuMemAlloc, (&g->src, bytes));
        CU(b, cuMemAlloc, (&g->dst, bytes));
        CU(b, cuMemAlloc, (&g->aux, bytes));
    }
    TRY(gdu_p2p_bench_use(b, 0));
    CU(b, cuMemHostAlloc, (&b->host, bytes, GDU_CU_MEMHOSTALLOC_PORTABLE));
    for (int i = 0; i < b->n; i++) {
        gdu_pattern_fill(b->host, 0, bytes, gdu_p2p_bench_seed(i));
        TRY(gdu_p2p_bench_use(b, i));
        CU(b, cuMemcpyHtoD, (b->g[i].src, b->host, bytes));
    }
    for (int i = 0; i < b->n; i++)
        for (int j = 0; j < b->n; j++)
            if (i != j)
                CU(b, cuDeviceCanAccessPeer,
                   (&b->res->can_access[i][j], b->g[i].primary.dev, b->g[j].primary.dev));
    return 0;
}

/* Best effort: the run's outcome is already decided. */
static void teardown(struct bench *b)
{
    const gdu_cuda *cu = b->cu;
    for (int i = 0; i < b->n; i++) {
        struct gpu_res *g = &b->g[i];
        if (g->primary.ctx == NULL)
            continue;
        gdu_cuda_ctx_make_current(cu, g->primary.ctx, NULL, NULL, 0);
        cu->cuCtxSynchronize();
        gdu_p2p_bench_sm_release(b, i);
        for (int j = 0; j < b->n; j++)
            if (b->res->peer_enabled[i][j])
                cu->cuCtxDisablePeerAccess(b->g[j].primary.ctx);
        gdu_CUdeviceptr *bufs[] = {&g->src, &g->dst, &g->aux};
        for (size_t k = 0; k < 3; k++)
            if (*bufs[k])
                cu->cuMemFree(*bufs[k]);
        gdu_CUevent evs[] = {g->start, g->stop, g->stop2};
        for (size_t k = 0; k < 3; k++)
            if (evs[k])
                cu->cuEventDestroy(evs[k]);
        for (int k = 0; k < 2; k++)
            if (g->stream[k])
                cu->cuStreamDestroy(g->stream[k]);
    }
    if (b->host != NULL) {
        gdu_cuda_ctx_make_current(cu, b->g[0].primary.ctx, NULL, NULL, 0);
        cu->cuMemFreeHost(b->host);
    }
    for (int i = 0; i < b->n; i++)
        gdu_cuda_ctx_release(cu, &b->g[i].primary);
    gdu_cuda_ctx_restore(cu, NULL);
}

/* Reads back a buffer of GPU gpu and compares it with source GPU src's pattern. */
static int check(struct bench *b, int gpu, gdu_CUdeviceptr p, int src, int mode, int row, int col)
{
    TRY(gdu_p2p_bench_use(b, gpu));
    CU(b, cuMemcpyDtoH, (b->host, p, b->cfg->bytes));
    b->res->buffers_checked++;
    if (gdu_pattern_check(b->host, 0, b->cfg->bytes, gdu_p2p_bench_seed(src)) != UINT64_MAX) {
        b->res->buffers_corrupt++;
        b->res->corrupt[mode][row][col] = 1;
    }
    return 0;
}

/* reps copies of bytes from GPU i's src to GPU j's dst on i's first stream
 * between i's events; *ms is the time they took. */
static int timed_copies(struct bench *b, int i, int j, size_t bytes, unsigned reps, double *ms)
{
    struct gpu_res *s = &b->g[i], *d = &b->g[j];
    gdu_CUstream st = s->stream[0];
    TRY(gdu_p2p_bench_use(b, i));
    CU(b, cuEventRecord, (s->start, st));
    for (unsigned r = 0; r < reps; r++)
        TRY(copy(b, i, j, d->dst, s->src, bytes, st));
    CU(b, cuEventRecord, (s->stop, st));
    return gdu_p2p_bench_elapsed_ms(b, s->start, s->stop, ms);
}

static int warm_up(struct bench *b, int i, int j, size_t bytes)
{
    TRY(gdu_p2p_bench_use(b, i));
    TRY(copy(b, i, j, b->g[j].dst, b->g[i].src, bytes, b->g[i].stream[0]));
    CU(b, cuStreamSynchronize, (b->g[i].stream[0]));
    return 0;
}

static int unidirectional(struct bench *b, int mode, int i, int j)
{
    size_t bytes = b->cfg->bytes;
    TRY(gdu_p2p_bench_clear(b, j, b->g[j].dst));
    TRY(warm_up(b, i, j, bytes));
    for (unsigned it = 0; it < b->cfg->iters; it++) {
        double ms;
        TRY(timed_copies(b, i, j, bytes, b->cfg->reps, &ms));
        b->samples[it] = (double)bytes * b->cfg->reps / (ms * 1e-3) / 1e9;
    }
    b->res->uni_gbps[mode].cell[i][j] = gdu_p2p_stat_of(b->samples, b->cfg->iters);
    return check(b, j, b->g[j].dst, i, mode, i, j);
}

/* Copies i->j on i's stream and j->i on j's stream at once (on the diagonal:
 * two copies inside GPU i on its two streams), timed from i's start event to
 * the later of the two ends. */
static int bidirectional(struct bench *b, int mode, int i, int j)
{
    size_t bytes = b->cfg->bytes;
    struct gpu_res *a = &b->g[i], *o = &b->g[j];
    gdu_CUstream sa = a->stream[0], sb = i == j ? a->stream[1] : o->stream[0];
    int gb = i == j ? i : j;                          /* GPU issuing copy B */
    gdu_CUdeviceptr dst_a = o->dst;                   /* copy A: i -> j */
    gdu_CUdeviceptr dst_b = i == j ? a->aux : a->dst; /* copy B: j -> i */
    gdu_CUdeviceptr src_b = o->src;
    TRY(gdu_p2p_bench_clear(b, j, dst_a));
    TRY(gdu_p2p_bench_clear(b, i, dst_b));
    for (unsigned it = 0; it <= b->cfg->iters; it++) { /* round 0 warms up */
        unsigned reps = it == 0 ? 1 : b->cfg->reps;
        TRY(gdu_p2p_bench_use(b, i));
        CU(b, cuEventRecord, (a->start, sa));
        TRY(gdu_p2p_bench_use(b, gb));
        CU(b, cuStreamWaitEvent, (sb, a->start, 0));
        TRY(gdu_p2p_bench_use(b, i));
        for (unsigned r = 0; r < reps; r++)
            TRY(copy(b, i, j, dst_a, a->src, bytes, sa));
        TRY(gdu_p2p_bench_use(b, gb));
        for (unsigned r = 0; r < reps; r++)
            TRY(copy(b, gb, i, dst_b, src_b, bytes, sb));
        CU(b, cuEventRecord, (b->g[gb].stop2, sb));
        TRY(gdu_p2p_bench_use(b, i));
        CU(b, cuStreamWaitEvent, (sa, b->g[gb].stop2, 0));
        CU(b, cuEventRecord, (a->stop, sa));
        double ms;
        TRY(gdu_p2p_bench_elapsed_ms(b, a->start, a->stop, &ms));
        if (it == 0)
            continue;
        b->samples[it - 1] = 2.0 * (double)bytes * reps / (ms * 1e-3) / 1e9;
    }
    b->res->bidi_gbps[mode].cell[i][j] = gdu_p2p_stat_of(b->samples, b->cfg->iters);
    TRY(check(b, j, dst_a, i, mode, i, j));
    return check(b, i, dst_b, j, mode, i, j); /* on the diagonal j == i */
}

static int latency(struct bench *b, int mode, int i, int j)
{
    struct gpu_res *s = &b->g[i], *d = &b->g[j];
    gdu_CUstream st = s->stream[0];
    unsigned reps = b->cfg->latency_reps;
    TRY(warm_up(b, i, j, LATENCY_BYTES));
    double *cpu = b->samples + b->cfg->iters; /* second half of the sample space */
    for (unsigned it = 0; it < b->cfg->iters; it++) {
        double ms;
        TRY(timed_copies(b, i, j, LATENCY_BYTES, reps, &ms));
        b->samples[it] = ms * 1e3 / reps;

        double t0 = gdu_now_seconds();
        for (unsigned r = 0; r < reps; r++) {
            TRY(copy(b, i, j, d->dst, s->src, LATENCY_BYTES, st));
            CU(b, cuStreamSynchronize, (st));
        }
        cpu[it] = (gdu_now_seconds() - t0) * 1e6 / reps;
    }
    b->res->lat_gpu_us[mode].cell[i][j] = gdu_p2p_stat_of(b->samples, b->cfg->iters);
    b->res->lat_cpu_us[mode].cell[i][j] = gdu_p2p_stat_of(cpu, b->cfg->iters);
    return 0;
}

static int set_peer_access(struct bench *b, int enable)
{
    gdu_p2p_results *res = b->res;
    for (int i = 0; i < b->n; i++)
        for (int j = 0; j < b->n; j++) {
            if (i == j || !res->can_access[i][j])
                continue;
            TRY(gdu_p2p_bench_use(b, i));
            if (!enable) {
                if (res->peer_enabled[i][j])
                    CU(b, cuCtxDisablePeerAccess, (b->g[j].primary.ctx));
                res->peer_enabled[i][j] = 0;
                continue;
            }
            gdu_CUresult r = b->cu->cuCtxEnablePeerAccess(b->g[j].primary.ctx, 0);
            if (r == GDU_CUDA_SUCCESS || r == GDU_CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) {
                res->peer_enabled[i][j] = 1;
            } else {
                res->enable_failed[i][j] = 1;
                if (res->enable_error[0] == '\0')
                    snprintf(res->enable_error, sizeof res->enable_error,
                             "cuCtxEnablePeerAccess(%d -> %d): %s", res->ordinals[i],
                             res->ordinals[j], gdu_cuda_result_name(r));
            }
        }
    return 0;
}

static int run_mode(struct bench *b, int mode)
{
    static const char *const phases[GDU_P2P_MODES][3] = {
        {"unidirectional, P2P disabled", "bidirectional, P2P disabled", "latency, P2P disabled"},
        {"unidirectional, P2P enabled", "bidirectional, P2P enabled", "latency, P2P enabled"},
    };
    int (*const steps[3])(struct bench *, int, int, int) = {unidirectional, bidirectional, latency};
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < b->n; i++)
            for (int j = 0; j < b->n; j++) {
                gdu_p2p_bench_progress(b, phases[mode][k]);
                TRY(steps[k](b, mode, i, j));
            }
    return 0;
}

/* The copy engine's route check: the peer-enabled copies' data (within a
 * GPU: its own copies), where peer access was enabled that way. */
static void copy_engine_routes(gdu_p2p_results *res)
{
    for (int i = 0; i < res->n; i++)
        for (int j = 0; j < res->n; j++)
            res->route[GDU_P2P_ROUTE_CE][i][j] =
                i != j && !res->peer_enabled[i][j]         ? GDU_P2P_ROUTE_NO_PEER
                : res->corrupt[GDU_P2P_MODE_ENABLED][i][j] ? GDU_P2P_ROUTE_WRONG
                                                           : GDU_P2P_ROUTE_OK;
}

static void init_matrices(gdu_p2p_results *res, int n)
{
    gdu_p2p_matrix *all[] = {
        &res->uni_gbps[0],   &res->uni_gbps[1],   &res->bidi_gbps[0],  &res->bidi_gbps[1],
        &res->lat_gpu_us[0], &res->lat_gpu_us[1], &res->lat_cpu_us[0], &res->lat_cpu_us[1],
        &res->sm_write_gbps, &res->sm_read_gbps,  &res->sm_latency_us,
    };
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
        all[k]->n = n;
}

int gdu_p2p_bench_run(const gdu_cuda *cu, const int *ordinals, int n,
                      const gdu_p2p_bench_config *cfg, gdu_p2p_results *res, char *why,
                      size_t why_len)
{
    if (n < 1 || n > GDU_P2P_MAX_GPUS || cfg->iters == 0 || cfg->reps == 0 ||
        cfg->latency_reps == 0 || cfg->bytes < LATENCY_BYTES ||
        (cfg->sm && (cfg->chase_hops == 0 || cfg->bytes < 4096))) {
        snprintf(why, why_len, "invalid benchmark configuration");
        return -1;
    }
    memset(res, 0, sizeof *res);
    res->n = n;
    memcpy(res->ordinals, ordinals, sizeof ordinals[0] * (size_t)n);
    init_matrices(res, n);

    struct bench *b = calloc(1, sizeof *b);
    double *samples = calloc(2 * (size_t)cfg->iters, sizeof *samples);
    if (b == NULL || samples == NULL) {
        free(b);
        free(samples);
        snprintf(why, why_len, "out of memory");
        return -1;
    }
    *b = (struct bench){.cu = cu,
                        .cfg = cfg,
                        .res = res,
                        .n = n,
                        .samples = samples,
                        .total = (unsigned)(GDU_P2P_MODES * 3 * n * n) +
                                 (cfg->sm ? gdu_p2p_bench_sm_steps(n) : 0),
                        .why = why,
                        .why_len = why_len};
    int rc = setup(b, ordinals);
    if (rc == 0)
        rc = run_mode(b, GDU_P2P_MODE_DISABLED);
    if (rc == 0)
        rc = set_peer_access(b, 1);
    if (rc == 0)
        rc = run_mode(b, GDU_P2P_MODE_ENABLED);
    if (rc == 0)
        copy_engine_routes(res);
    if (rc == 0 && cfg->sm)
        rc = gdu_p2p_bench_sm(b);
    /* After an SM fault the contexts refuse all work; teardown is best effort. */
    if (rc == 0 && !b->context_lost)
        rc = set_peer_access(b, 0);
    teardown(b);
    free(samples);
    free(b);
    return rc;
}
