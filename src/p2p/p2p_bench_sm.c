/* The SM part of gdunlock p2p's measurement (see p2p_bench.h): route checks,
 * copy-kernel bandwidth both ways, pointer-chase latency. Every CUDA error in
 * here is the fault of the route being measured: it is recorded and the part
 * stops, since a context whose kernel faulted refuses all further work. */
#include "p2p/p2p_bench_ops.h"

#include "util/pattern.h"
#include "p2p/p2p_sm_pattern.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    CHECK_BYTES_MAX = 1 << 20, /* each route's pattern check */
    NODE_STRIDE = 256,         /* pointer-chase nodes sit at multiples of this */
    MAX_NODES = 1 << 20,
    STATE_BYTES = 256,
};

/* The pointer chase's one cycle through all nodes: order[k] is the node
 * visited k hops after node order[0]. */
struct chain {
    uint32_t *next, *order;
    size_t nodes;
};

/* Outcome of a step: go on, or stop the SM part (a fault is recorded). */
enum { GO = 0, STOP = 1 };

unsigned gdu_p2p_bench_sm_steps(int n)
{
    return 4u * (unsigned)(n * n); /* checks, write bandwidth, read bandwidth, latency */
}

static uint32_t sm_seed(int gpu) { return 0x67647531u + (uint32_t)gpu; /* "gdu1" + index */ }

/* The GPU whose kernels carry route r from source i to destination j, and
 * the GPU whose memory they reach into. */
static int issuer_of(gdu_p2p_route r, int i, int j) { return r == GDU_P2P_ROUTE_SM_WRITE ? i : j; }

static int target_of(gdu_p2p_route r, int i, int j) { return r == GDU_P2P_ROUTE_SM_WRITE ? j : i; }

static int reachable(const struct bench *b, int issuer, int owner)
{
    return issuer == owner || b->res->peer_enabled[issuer][owner];
}

static int measurable(gdu_p2p_route_state s)
{
    return s == GDU_P2P_ROUTE_OK || s == GDU_P2P_ROUTE_WRONG;
}

__attribute__((format(printf, 5, 6))) static void detail(struct bench *b, gdu_p2p_route r, int i,
                                                         int j, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->res->route_detail[r][i][j], sizeof b->res->route_detail[r][i][j], fmt, ap);
    va_end(ap);
}

/* A CUDA error while route r of i -> j ran (r < 0: while preparing): the
 * route faulted and the SM part stops. */
static int fault(struct bench *b, int r, int i, int j, const char *fn, gdu_CUresult e)
{
    gdu_p2p_results *res = b->res;
    b->context_lost = 1;
    if (r < 0) {
        snprintf(res->sm_error, sizeof res->sm_error, "stopped while preparing the SM part: %s: %s",
                 fn, gdu_cuda_result_name(e));
        return STOP;
    }
    res->route[r][i][j] = GDU_P2P_ROUTE_FAULT;
    snprintf(res->route_detail[r][i][j], sizeof res->route_detail[r][i][j], "%s: %s", fn,
             gdu_cuda_result_name(e));
    snprintf(res->sm_error, sizeof res->sm_error,
             "stopped at the fault of %s %d -> %d (%s: %s); a context whose kernel faulted "
             "refuses all further work, so the SM cells after it were not measured",
             gdu_p2p_route_name((gdu_p2p_route)r), res->ordinals[i], res->ordinals[j], fn,
             gdu_cuda_result_name(e));
    return STOP;
}

#define SM(b, r, i, j, fn, args)                                                                   \
    do {                                                                                           \
        gdu_CUresult e_ = (b)->cu->fn args;                                                        \
        if (e_ != GDU_CUDA_SUCCESS)                                                                \
            return fault((b), (r), (i), (j), #fn, e_);                                             \
    } while (0)

/* Makes a GPU's (retained) context current, a fault of route r if it fails. */
#define USE(b, r, i, j, ctx)                                                                       \
    do {                                                                                           \
        gdu_CUresult e_ = gdu_cuda_ctx_make_current((b)->cu, (ctx), NULL, NULL, 0);                \
        if (e_ != GDU_CUDA_SUCCESS)                                                                \
            return fault((b), (r), (i), (j), "cuCtxSetCurrent", e_);                               \
    } while (0)

#define LAUNCH(b, r, i, j, call)                                                                   \
    do {                                                                                           \
        gdu_CUresult e_ = (call);                                                                  \
        if (e_ != GDU_CUDA_SUCCESS)                                                                \
            return fault((b), (r), (i), (j), "cuLaunchKernel", e_);                                \
    } while (0)

#define STEP(expr)                                                                                 \
    do {                                                                                           \
        int s_ = (expr);                                                                           \
        if (s_ != GO)                                                                              \
            return s_;                                                                             \
    } while (0)

static size_t sm_bytes(const struct bench *b)
{
    return b->cfg->bytes & ~(size_t)15; /* the copy kernel moves 16-byte vectors */
}

/* Offset of the first word of buf[0..bytes) that is not the fill kernel's
 * pattern of seed, in bytes, or UINT64_MAX. */
static uint64_t sm_pattern_check(const void *buf, size_t bytes, uint32_t seed)
{
    const unsigned char *p = buf;
    for (size_t w = 0; w < bytes / 4; w++) {
        uint32_t want = gdu_p2p_sm_word(seed, w), got;
        memcpy(&got, p + 4 * w, 4);
        if (got != want)
            return 4 * w;
    }
    return UINT64_MAX;
}

static int load_kernels(struct bench *b)
{
    for (int i = 0; i < b->n; i++) {
        struct gpu_res *g = &b->g[i];
        int sms = 0;
        USE(b, -1, i, i, g->primary.ctx);
        SM(b, -1, i, i, cuDeviceGetAttribute,
           (&sms, GDU_CU_ATTR_MULTIPROCESSOR_COUNT, g->primary.dev));
        char why[200];
        if (gdu_p2p_kernels_load(b->cu, sms, &g->kernels, why, sizeof why) != GDU_CUDA_SUCCESS) {
            snprintf(b->res->sm_error, sizeof b->res->sm_error, "GPU %d: %s", b->res->ordinals[i],
                     why);
            return STOP; /* the context itself is fine: teardown goes on as usual */
        }
        SM(b, -1, i, i, cuMemAlloc, (&g->chase_state, STATE_BYTES));
    }
    return GO;
}

/* The pattern check of route r from i to j: the issuing GPU's kernel stores
 * the fill pattern into the destination (SM write) or copies the source's
 * copy-engine pattern into its own memory (SM read); the owner of the
 * written memory reads it back and the host compares. */
static int check_route(struct bench *b, gdu_p2p_route r, int i, int j)
{
    gdu_p2p_results *res = b->res;
    int g = issuer_of(r, i, j);
    size_t size = res->sm_check_bytes;
    struct gpu_res *is = &b->g[g];
    gdu_CUdeviceptr out = b->g[j].aux; /* both routes write into the destination */
    USE(b, r, i, j, is->primary.ctx);
    if (r == GDU_P2P_ROUTE_SM_WRITE)
        LAUNCH(b, r, i, j,
               gdu_p2p_launch_fill(b->cu, &is->kernels, is->stream[0], out, size, sm_seed(i)));
    else
        LAUNCH(b, r, i, j,
               gdu_p2p_launch_copy(b->cu, &is->kernels, is->stream[0], out, b->g[i].src, size));
    SM(b, r, i, j, cuStreamSynchronize, (is->stream[0]));
    USE(b, r, i, j, b->g[j].primary.ctx);
    SM(b, r, i, j, cuMemcpyDtoH, (b->host, out, size));
    uint64_t bad = r == GDU_P2P_ROUTE_SM_WRITE
                       ? sm_pattern_check(b->host, size, sm_seed(i))
                       : gdu_pattern_check(b->host, 0, size, gdu_p2p_bench_seed(i));
    res->route[r][i][j] = bad == UINT64_MAX ? GDU_P2P_ROUTE_OK : GDU_P2P_ROUTE_WRONG;
    if (bad != UINT64_MAX)
        detail(b, r, i, j, "pattern check: byte %llu of %zu differs", (unsigned long long)bad,
               size);
    return GO;
}

/* Pass 0 measures within each GPU, pass 1 between GPUs: a peer fault then
 * costs no GPU its own numbers. */
static int in_pass(int pass, int i, int j) { return (i != j) == pass; }

static int checks(struct bench *b, int pass)
{
    gdu_p2p_results *res = b->res;
    for (int i = 0; i < b->n; i++)
        for (int j = 0; j < b->n; j++) {
            if (!in_pass(pass, i, j))
                continue;
            gdu_p2p_bench_progress(b, "SM route checks");
            for (int r = GDU_P2P_ROUTE_SM_WRITE; r <= GDU_P2P_ROUTE_SM_READ; r++) {
                if (!reachable(b, issuer_of(r, i, j), target_of(r, i, j))) {
                    res->route[r][i][j] = GDU_P2P_ROUTE_NO_PEER; /* the kernel would fault */
                    continue;
                }
                STEP(check_route(b, (gdu_p2p_route)r, i, j));
            }
        }
    return GO;
}

/* reps copy kernels per sample on the issuing GPU's stream between its
 * events; afterwards the destination's data is checked like the copy
 * engine's. */
static int bandwidth(struct bench *b, gdu_p2p_route r, int i, int j)
{
    gdu_p2p_results *res = b->res;
    const gdu_p2p_bench_config *cfg = b->cfg;
    struct gpu_res *is = &b->g[issuer_of(r, i, j)];
    gdu_CUdeviceptr dst = b->g[j].dst, src = b->g[i].src;
    size_t bytes = sm_bytes(b);
    gdu_CUstream st = is->stream[0];
    USE(b, r, i, j, b->g[j].primary.ctx);
    SM(b, r, i, j, cuMemsetD8, (dst, 0, bytes));
    SM(b, r, i, j, cuCtxSynchronize, ());
    USE(b, r, i, j, is->primary.ctx);
    LAUNCH(b, r, i, j, gdu_p2p_launch_copy(b->cu, &is->kernels, st, dst, src, bytes));
    SM(b, r, i, j, cuStreamSynchronize, (st));
    for (unsigned it = 0; it < cfg->iters; it++) {
        float ms = 0;
        SM(b, r, i, j, cuEventRecord, (is->start, st));
        for (unsigned k = 0; k < cfg->reps; k++)
            LAUNCH(b, r, i, j, gdu_p2p_launch_copy(b->cu, &is->kernels, st, dst, src, bytes));
        SM(b, r, i, j, cuEventRecord, (is->stop, st));
        SM(b, r, i, j, cuEventSynchronize, (is->stop));
        SM(b, r, i, j, cuEventElapsedTime, (&ms, is->start, is->stop));
        double t = ms > 0 ? ms : 1e-6; /* below the events' resolution */
        b->samples[it] = (double)bytes * cfg->reps / (t * 1e-3) / 1e9;
    }
    gdu_p2p_matrix *m = r == GDU_P2P_ROUTE_SM_WRITE ? &res->sm_write_gbps : &res->sm_read_gbps;
    m->cell[i][j] = gdu_p2p_stat_of(b->samples, cfg->iters);
    USE(b, r, i, j, b->g[j].primary.ctx);
    SM(b, r, i, j, cuMemcpyDtoH, (b->host, dst, bytes));
    uint64_t bad = gdu_pattern_check(b->host, 0, bytes, gdu_p2p_bench_seed(i));
    if (bad != UINT64_MAX && res->route[r][i][j] == GDU_P2P_ROUTE_OK) {
        res->route[r][i][j] = GDU_P2P_ROUTE_WRONG;
        detail(b, r, i, j, "after the bandwidth run: byte %llu of %zu differs",
               (unsigned long long)bad, bytes);
    }
    return GO;
}

static int bandwidths(struct bench *b, int pass)
{
    static const char *const phase[] = {[GDU_P2P_ROUTE_SM_WRITE] = "SM write bandwidth",
                                        [GDU_P2P_ROUTE_SM_READ] = "SM read bandwidth"};
    for (int r = GDU_P2P_ROUTE_SM_WRITE; r <= GDU_P2P_ROUTE_SM_READ; r++)
        for (int i = 0; i < b->n; i++)
            for (int j = 0; j < b->n; j++) {
                if (!in_pass(pass, i, j))
                    continue;
                gdu_p2p_bench_progress(b, phase[r]);
                if (measurable(b->res->route[r][i][j]))
                    STEP(bandwidth(b, (gdu_p2p_route)r, i, j));
            }
    return GO;
}

/* xorshift64*, fixed seed: the chain is the same in every run. */
static uint64_t rng(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545f4914f6cdd1dull;
}

/* One random cycle through nodes nodes (Sattolo's shuffle). */
static int chain_build(struct chain *c, size_t nodes)
{
    c->nodes = nodes;
    c->next = malloc(nodes * sizeof *c->next);
    c->order = malloc(nodes * sizeof *c->order);
    if (c->next == NULL || c->order == NULL)
        return -1;
    for (size_t k = 0; k < nodes; k++)
        c->order[k] = (uint32_t)k;
    uint64_t s = 0x6764756e6c6f636bull;
    for (size_t k = nodes - 1; k > 0; k--) {
        size_t pick = (size_t)(rng(&s) % k);
        uint32_t t = c->order[k];
        c->order[k] = c->order[pick];
        c->order[pick] = t;
    }
    for (size_t k = 0; k < nodes; k++)
        c->next[c->order[k]] = c->order[(k + 1) % nodes];
    return 0;
}

static void chain_free(struct chain *c)
{
    free(c->next);
    free(c->order);
}

/* GPU i follows the chain in GPU j's memory from its own start (issuers start
 * far apart on the cycle, so no issuer finds another's nodes in a cache). */
static int chase(struct bench *b, const struct chain *c, int i, int j)
{
    gdu_p2p_results *res = b->res;
    const gdu_p2p_bench_config *cfg = b->cfg;
    const gdu_p2p_route r = GDU_P2P_ROUTE_SM_READ; /* loads by i from j's memory */
    struct gpu_res *is = &b->g[i];
    gdu_CUdeviceptr base = b->g[j].aux;
    uint64_t total = (uint64_t)(cfg->iters + 1) * cfg->chase_hops;
    size_t start = (size_t)(((uint64_t)i * total) % c->nodes);
    uint64_t at = base + (uint64_t)c->order[start] * NODE_STRIDE;
    USE(b, r, j, i, is->primary.ctx);
    SM(b, r, j, i, cuMemcpyHtoD, (is->chase_state, &at, sizeof at));
    for (unsigned it = 0; it <= cfg->iters; it++) { /* round 0 warms up */
        float ms = 0;
        SM(b, r, j, i, cuEventRecord, (is->start, is->stream[0]));
        LAUNCH(b, r, j, i,
               gdu_p2p_launch_chase(b->cu, &is->kernels, is->stream[0], is->chase_state,
                                    cfg->chase_hops));
        SM(b, r, j, i, cuEventRecord, (is->stop, is->stream[0]));
        SM(b, r, j, i, cuEventSynchronize, (is->stop));
        SM(b, r, j, i, cuEventElapsedTime, (&ms, is->start, is->stop));
        if (it > 0)
            b->samples[it - 1] = (ms > 0 ? ms : 1e-6) * 1e3 / cfg->chase_hops;
    }
    res->sm_latency_us.cell[i][j] = gdu_p2p_stat_of(b->samples, cfg->iters);
    uint64_t end = 0;
    SM(b, r, j, i, cuMemcpyDtoH, (&end, is->chase_state, sizeof end));
    uint64_t want = base + (uint64_t)c->order[(start + total) % c->nodes] * NODE_STRIDE;
    if (end != want && res->route[r][j][i] == GDU_P2P_ROUTE_OK) {
        res->route[r][j][i] = GDU_P2P_ROUTE_WRONG;
        detail(b, r, j, i, "the pointer chase ended at the wrong node");
    }
    return GO;
}

/* The chain of nodes in GPU j's aux buffer, each holding the device address
 * of the next. */
static int upload_chain(struct bench *b, const struct chain *c, int j)
{
    unsigned char *h = b->host;
    gdu_CUdeviceptr base = b->g[j].aux;
    memset(h, 0, c->nodes * NODE_STRIDE);
    for (size_t k = 0; k < c->nodes; k++) {
        uint64_t next = base + (uint64_t)c->next[k] * NODE_STRIDE;
        memcpy(h + k * NODE_STRIDE, &next, sizeof next);
    }
    USE(b, -1, j, j, b->g[j].primary.ctx);
    SM(b, -1, j, j, cuMemcpyHtoD, (base, h, c->nodes * NODE_STRIDE));
    return GO;
}

static int latencies(struct bench *b, const struct chain *c, int pass)
{
    for (int j = 0; j < b->n; j++) {
        int any = 0;
        for (int i = 0; i < b->n; i++)
            any |= in_pass(pass, i, j) && measurable(b->res->route[GDU_P2P_ROUTE_SM_READ][j][i]);
        if (any)
            STEP(upload_chain(b, c, j)); /* the checks of this pass overwrote it */
        for (int i = 0; i < b->n; i++) {
            if (!in_pass(pass, i, j))
                continue;
            gdu_p2p_bench_progress(b, "SM pointer-chase latency");
            if (measurable(b->res->route[GDU_P2P_ROUTE_SM_READ][j][i]))
                STEP(chase(b, c, i, j));
        }
    }
    return GO;
}

int gdu_p2p_bench_sm(struct bench *b)
{
    gdu_p2p_results *res = b->res;
    size_t bytes = sm_bytes(b);
    res->sm_run = 1;
    res->sm_check_bytes = bytes < CHECK_BYTES_MAX ? bytes : CHECK_BYTES_MAX;
    size_t nodes = bytes / NODE_STRIDE;
    res->chase_nodes = nodes < MAX_NODES ? nodes : MAX_NODES;
    res->chase_hops = b->cfg->chase_hops;
    if (load_kernels(b) != GO)
        return 0;
    struct chain c = {0};
    if (chain_build(&c, (size_t)res->chase_nodes) != 0) {
        chain_free(&c);
        snprintf(b->why, b->why_len, "out of memory");
        return -1;
    }
    for (int pass = 0; pass < 2; pass++)
        if (checks(b, pass) != GO || bandwidths(b, pass) != GO || latencies(b, &c, pass) != GO)
            break;
    chain_free(&c);
    return 0;
}

void gdu_p2p_bench_sm_release(struct bench *b, int gpu)
{
    struct gpu_res *g = &b->g[gpu];
    if (g->chase_state)
        b->cu->cuMemFree(g->chase_state);
    g->chase_state = 0;
    gdu_p2p_kernels_unload(b->cu, &g->kernels);
}
