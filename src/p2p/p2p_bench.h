/* GPU-to-GPU copy bandwidth and latency matrices, measured the way
 * p2pBandwidthLatencyTest does: copy-engine copies (cuMemcpyPeerAsync between
 * the GPUs' primary contexts, cuMemcpyDtoDAsync on the diagonal) issued on the
 * source GPU's stream, once with peer access disabled (the driver stages the
 * copies through host memory) and once enabled. Every bandwidth cell's data
 * is checked against the source pattern afterwards.
 *
 * Then, still with peer access enabled, the SM routes the way nvbandwidth
 * measures them: a copy kernel on the source GPU storing into the
 * destination's memory (SM write) and on the destination GPU loading from
 * the source's (SM read), and a pointer chase of dependent loads (latency).
 * Each route is first checked with a small known pattern (SM stores of a
 * pattern, read back through the owner, compared), and every bandwidth
 * cell's data again afterwards. A fault of an SM kernel leaves the CUDA
 * context unusable, so the SM part comes last and stops at the first one,
 * naming it; the copy-engine matrices are complete by then. */
#ifndef GDUNLOCK_P2P_P2P_BENCH_H
#define GDUNLOCK_P2P_P2P_BENCH_H

#include "cuda/cuda_api.h"
#include "p2p/p2p_matrix.h"
#include "p2p/p2p_route.h"

#include <stddef.h>

enum { GDU_P2P_MODE_DISABLED = 0, GDU_P2P_MODE_ENABLED = 1, GDU_P2P_MODES = 2 };

typedef struct gdu_p2p_bench_config {
    size_t bytes;          /* size of each bandwidth copy */
    unsigned iters;        /* timed samples per cell (median and spread over these) */
    unsigned reps;         /* copies per bandwidth sample */
    unsigned latency_reps; /* 4-byte copies per latency sample */
    int sm;                /* also measure and check the SM routes */
    unsigned chase_hops;   /* dependent loads per pointer-chase sample (sm) */
    /* Called before each cell; may be NULL. */
    void (*progress)(void *user, const char *phase, unsigned done, unsigned total);
    void *progress_user;
} gdu_p2p_bench_config;

typedef struct gdu_p2p_results {
    int n;
    int ordinals[GDU_P2P_MAX_GPUS];
    /* Indexed by GDU_P2P_MODE_*. GB/s are 1e9 bytes per second. */
    gdu_p2p_matrix uni_gbps[GDU_P2P_MODES];
    gdu_p2p_matrix bidi_gbps[GDU_P2P_MODES];
    gdu_p2p_matrix lat_gpu_us[GDU_P2P_MODES]; /* timed with events, per copy */
    gdu_p2p_matrix lat_cpu_us[GDU_P2P_MODES]; /* copy + stream synchronize, wall clock */
    int can_access[GDU_P2P_MAX_GPUS][GDU_P2P_MAX_GPUS];
    int peer_enabled[GDU_P2P_MAX_GPUS][GDU_P2P_MAX_GPUS]; /* enable succeeded */
    int enable_failed[GDU_P2P_MAX_GPUS][GDU_P2P_MAX_GPUS];
    char enable_error[160]; /* the first enable failure */
    int corrupt[GDU_P2P_MODES][GDU_P2P_MAX_GPUS][GDU_P2P_MAX_GPUS];
    unsigned buffers_checked, buffers_corrupt;

    /* The SM part (cfg->sm). Rows are source GPUs, columns destinations. */
    int sm_run;                   /* attempted */
    gdu_p2p_matrix sm_write_gbps; /* copy kernel on the source GPU, storing into the destination */
    gdu_p2p_matrix sm_read_gbps;  /* copy kernel on the destination GPU, loading from the source */
    /* Pointer chase, us per dependent 8-byte load: row = the GPU issuing the
     * loads, column = the GPU holding the chain. */
    gdu_p2p_matrix sm_latency_us;
    unsigned long long chase_nodes, chase_hops;
    size_t sm_check_bytes; /* size of each route's pattern check */
    /* Each route's check, [route][source][destination]; the copy engine's
     * is the peer-enabled copies' data check. */
    gdu_p2p_route_state route[GDU_P2P_ROUTES][GDU_P2P_MAX_GPUS][GDU_P2P_MAX_GPUS];
    char route_detail[GDU_P2P_ROUTES][GDU_P2P_MAX_GPUS][GDU_P2P_MAX_GPUS][96];
    char sm_error[256]; /* why the SM part stopped or did not run; "" if it completed */
} gdu_p2p_results;

/* Measures every ordered pair of the given CUDA ordinals (n <= GDU_P2P_MAX_GPUS,
 * n == 1 measures the diagonal only). Returns 0, or -1 with the failing call
 * and its CUDA result in why; a failure to enable peer access, wrong data,
 * an SM fault or SM kernels that do not load are recorded in res, not an
 * error. */
int gdu_p2p_bench_run(const gdu_cuda *cu, const int *ordinals, int n,
                      const gdu_p2p_bench_config *cfg, gdu_p2p_results *res, char *why,
                      size_t why_len);

#endif
