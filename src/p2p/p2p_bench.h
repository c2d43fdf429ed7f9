/* GPU-to-GPU copy bandwidth and latency matrices, measured the way
 * p2pBandwidthLatencyTest does: copy-engine copies (cuMemcpyPeerAsync between
 * the GPUs' primary contexts, cuMemcpyDtoDAsync on the diagonal) issued on the
 * source GPU's stream, once with peer access disabled (the driver stages the
 * copies through host memory) and once enabled. Every bandwidth cell's data
 * is checked against the source pattern afterwards. */
#ifndef GDUNLOCK_P2P_P2P_BENCH_H
#define GDUNLOCK_P2P_P2P_BENCH_H

#include "cuda/cuda_api.h"
#include "p2p/p2p_matrix.h"

#include <stddef.h>

enum { GDU_P2P_MODE_DISABLED = 0, GDU_P2P_MODE_ENABLED = 1, GDU_P2P_MODES = 2 };

typedef struct gdu_p2p_bench_config {
    size_t bytes;            /* size of each bandwidth copy */
    unsigned iters;          /* timed samples per cell (median and spread over these) */
    unsigned reps;           /* copies per bandwidth sample */
    unsigned latency_reps;   /* 4-byte copies per latency sample */
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
    gdu_p2p_matrix lat_gpu_us[GDU_P2P_MODES];  /* timed with events, per copy */
    gdu_p2p_matrix lat_cpu_us[GDU_P2P_MODES];  /* copy + stream synchronize, wall clock */
    int can_access[GDU_P2P_MAX_GPUS][GDU_P2P_MAX_GPUS];
    int peer_enabled[GDU_P2P_MAX_GPUS][GDU_P2P_MAX_GPUS];  /* enable succeeded */
    int enable_failed[GDU_P2P_MAX_GPUS][GDU_P2P_MAX_GPUS];
    char enable_error[160];                                /* the first enable failure */
    int corrupt[GDU_P2P_MODES][GDU_P2P_MAX_GPUS][GDU_P2P_MAX_GPUS];
    unsigned buffers_checked, buffers_corrupt;
} gdu_p2p_results;

/* Measures every ordered pair of the given CUDA ordinals (n <= GDU_P2P_MAX_GPUS,
 * n == 1 measures the diagonal only). Returns 0, or -1 with the failing call
 * and its CUDA result in why; a failure to enable peer access or wrong data
 * is recorded in res, not an error. */
int gdu_p2p_bench_run(const gdu_cuda *cu, const int *ordinals, int n,
                      const gdu_p2p_bench_config *cfg, gdu_p2p_results *res, char *why,
                      size_t why_len);

#endif
