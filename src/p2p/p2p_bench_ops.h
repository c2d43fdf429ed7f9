/* One measurement's state and the operations both of its parts, the copy
 * engines (p2p_bench.c) and the SM routes (p2p_bench_sm.c), perform on its
 * GPUs (p2p_bench_ops.c). Not part of the library's interface. */
#ifndef GDUNLOCK_P2P_P2P_BENCH_OPS_H
#define GDUNLOCK_P2P_P2P_BENCH_OPS_H

#include "cuda/cuda_ctx.h"
#include "p2p/p2p_bench.h"
#include "p2p/p2p_kernels.h"

#include <stddef.h>
#include <stdint.h>

/* What one GPU holds during the run, all in its primary context. */
struct gpu_res {
    gdu_cuda_ctx primary; /* retained for the run */
    gdu_CUstream stream[2];
    gdu_CUevent start, stop, stop2;
    gdu_CUdeviceptr src, dst, aux; /* src holds the GPU's pattern; dst/aux receive copies */
    gdu_p2p_kernels kernels;       /* SM part: loaded into this context */
    gdu_CUdeviceptr chase_state;   /* SM part: where this GPU's pointer chase stands */
};

struct bench {
    const gdu_cuda *cu;
    const gdu_p2p_bench_config *cfg;
    gdu_p2p_results *res;
    int n;
    struct gpu_res g[GDU_P2P_MAX_GPUS];
    void *host; /* pinned staging buffer for the pattern upload and the checks */
    double *samples;
    unsigned done, total;
    int context_lost; /* an SM kernel failed: no further CUDA work in this run */
    char *why;
    size_t why_len;
};

/* Records "fn: result" in why; returns -1. */
int gdu_p2p_bench_fail(struct bench *b, const char *fn, gdu_CUresult r);

#define CU(b, fn, args)                                                                            \
    do {                                                                                           \
        gdu_CUresult r_ = (b)->cu->fn args;                                                        \
        if (r_ != GDU_CUDA_SUCCESS)                                                                \
            return gdu_p2p_bench_fail((b), #fn, r_);                                               \
    } while (0)

#define TRY(expr)                                                                                  \
    do {                                                                                           \
        if ((expr) != 0)                                                                           \
            return -1;                                                                             \
    } while (0)

/* Makes GPU gpu's context current. */
int gdu_p2p_bench_use(struct bench *b, int gpu);

/* Reports the next step to the progress callback. */
void gdu_p2p_bench_progress(struct bench *b, const char *phase);

/* Sets bytes of p (on GPU gpu) to zero and waits for it. */
int gdu_p2p_bench_clear(struct bench *b, int gpu, gdu_CUdeviceptr p);

/* Waits for stop and gives the time from start in ms (never 0). */
int gdu_p2p_bench_elapsed_ms(struct bench *b, gdu_CUevent start, gdu_CUevent stop, double *ms);

/* The seed of source GPU gpu's copy-engine pattern (util/pattern.h). */
uint64_t gdu_p2p_bench_seed(int gpu);

/* Steps of the SM part (progress total). */
unsigned gdu_p2p_bench_sm_steps(int n);

/* The SM part: kernels, routes, matrices (p2p_bench_sm.c). Returns -1 only
 * for a failure that is not the measured route's own (out of memory). */
int gdu_p2p_bench_sm(struct bench *b);

/* Releases GPU gpu's SM resources (its context is current). */
void gdu_p2p_bench_sm_release(struct bench *b, int gpu);

#endif
