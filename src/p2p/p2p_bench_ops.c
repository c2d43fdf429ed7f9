/* The operations both parts of a measurement (p2p_bench.c's copy engines and
 * p2p_bench_sm.c's SM routes) perform on the run's GPUs. */
#include "p2p/p2p_bench_ops.h"

#include <stdio.h>

int gdu_p2p_bench_fail(struct bench *b, const char *fn, gdu_CUresult r)
{
    snprintf(b->why, b->why_len, "%s: %s", fn, gdu_cuda_result_name(r));
    return -1;
}

uint64_t gdu_p2p_bench_seed(int gpu)
{
    return 0x6764756e6c6f636bull + (uint64_t)gpu; /* "gdunlock" + index */
}

int gdu_p2p_bench_use(struct bench *b, int gpu)
{
    gdu_CUcontext ctx = b->g[gpu].primary.ctx;
    return gdu_cuda_ctx_make_current(b->cu, ctx, NULL, b->why, b->why_len) == GDU_CUDA_SUCCESS ? 0
                                                                                               : -1;
}

void gdu_p2p_bench_progress(struct bench *b, const char *phase)
{
    if (b->cfg->progress != NULL)
        b->cfg->progress(b->cfg->progress_user, phase, b->done, b->total);
    b->done++;
}

int gdu_p2p_bench_clear(struct bench *b, int gpu, gdu_CUdeviceptr p)
{
    TRY(gdu_p2p_bench_use(b, gpu));
    CU(b, cuMemsetD8, (p, 0, b->cfg->bytes));
    CU(b, cuCtxSynchronize, ());
    return 0;
}

int gdu_p2p_bench_elapsed_ms(struct bench *b, gdu_CUevent start, gdu_CUevent stop, double *ms)
{
    float f = 0;
    CU(b, cuEventSynchronize, (stop));
    CU(b, cuEventElapsedTime, (&f, start, stop));
    *ms = f > 0 ? f : 1e-6; /* below the events' resolution */
    return 0;
}
