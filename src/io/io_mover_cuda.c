/* CUDA mover: staging pinned with cuMemHostRegister, one stream per worker and one
 * event per staging slot; copies to and from device memory are asynchronous
 * so the worker's next file transfer overlaps them. */
#include "io/io_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const gdu_cuda *cu;
    gdu_CUstream stream;
    unsigned slots;
    gdu_CUevent events[GDU_IO_MAX_STAGING];
} cuda_worker;

static int cuda_fail(char *why, size_t len, const char *what, gdu_CUresult r)
{
    snprintf(why, len, "%s: %s", what, gdu_cuda_result_name(r));
    return r == GDU_CUDA_ERROR_OUT_OF_MEMORY ? -ENOMEM : -EIO;
}

static void cuda_worker_fini(gdu_io_engine *e, void *wctx)
{
    cuda_worker *w = wctx;
    for (unsigned i = 0; i < w->slots; i++)
        if (w->events[i] != NULL)
            w->cu->cuEventDestroy(w->events[i]);
    if (w->stream != NULL)
        w->cu->cuStreamDestroy(w->stream);
    free(w);
}

static int cuda_worker_init(gdu_io_engine *e, unsigned slots, void **wctx, char *why, size_t len)
{
    cuda_worker *w = calloc(1, sizeof *w);
    if (w == NULL)
        return -ENOMEM;
    w->cu = e->cu;
    /* A blocking stream: its copies start after work the caller queued on the
     * legacy default stream (a cuMemsetD8, synchronous copies), while the
     * workers' streams still overlap one another. */
    gdu_CUresult r = e->cu->cuStreamCreate(&w->stream, 0 /* CU_STREAM_DEFAULT */);
    if (r != GDU_CUDA_SUCCESS) {
        cuda_worker_fini(e, w);
        return cuda_fail(why, len, "cuStreamCreate", r);
    }
    for (unsigned i = 0; i < slots; i++, w->slots++) {
        r = e->cu->cuEventCreate(&w->events[i], GDU_CU_EVENT_DISABLE_TIMING);
        if (r != GDU_CUDA_SUCCESS) {
            cuda_worker_fini(e, w);
            return cuda_fail(why, len, "cuEventCreate", r);
        }
    }
    *wctx = w;
    return 0;
}

static int cuda_thread_enter(gdu_io_engine *e)
{
    char why[GDU_IO_WHY];
    return gdu_io_cuda_enter(e, NULL, why, sizeof why);
}

/* Staging is mapped and faulted in by the engine (io_staging.c), so that
 * the driver only pins pages that already exist: cuMemHostAlloc maps and
 * faults inside the driver and costs several times a registration of the
 * same bytes faulted in (bench/results/2026-12-02-h200-gather-chunk.md,
 * bench/results/2026-12-01-h200-first-load-staging.md). */
static int cuda_staging_pin(gdu_io_engine *e, void *p, size_t bytes, char *why, size_t len)
{
    gdu_CUresult r = e->cu->cuMemHostRegister(p, bytes, GDU_CU_MEMHOSTREGISTER_PORTABLE);
    if (r == GDU_CUDA_SUCCESS)
        return 0;
    snprintf(why, len, "cuMemHostRegister of %zu bytes of staging memory: %s", bytes,
             gdu_cuda_result_name(r));
    return r == GDU_CUDA_ERROR_OUT_OF_MEMORY ? -ENOMEM : -EIO;
}

static void cuda_staging_unpin(gdu_io_engine *e, void *p) { e->cu->cuMemHostUnregister(p); }

static int cuda_to_mem(void *wctx, unsigned slot, void *mem, const void *staging, size_t n,
                       char *why, size_t len)
{
    cuda_worker *w = wctx;
    gdu_CUresult r =
        w->cu->cuMemcpyHtoDAsync((gdu_CUdeviceptr)(uintptr_t)mem, staging, n, w->stream);
    if (r != GDU_CUDA_SUCCESS)
        return cuda_fail(why, len, "cuMemcpyHtoDAsync", r);
    r = w->cu->cuEventRecord(w->events[slot], w->stream);
    return r == GDU_CUDA_SUCCESS ? 0 : cuda_fail(why, len, "cuEventRecord", r);
}

static int cuda_from_mem(void *wctx, unsigned slot, void *staging, const void *mem, size_t n,
                         char *why, size_t len)
{
    cuda_worker *w = wctx;
    gdu_CUresult r =
        w->cu->cuMemcpyDtoHAsync(staging, (gdu_CUdeviceptr)(uintptr_t)mem, n, w->stream);
    if (r != GDU_CUDA_SUCCESS)
        return cuda_fail(why, len, "cuMemcpyDtoHAsync", r);
    r = w->cu->cuEventRecord(w->events[slot], w->stream);
    return r == GDU_CUDA_SUCCESS ? 0 : cuda_fail(why, len, "cuEventRecord", r);
}

static int cuda_wait(void *wctx, unsigned slot, char *why, size_t len)
{
    cuda_worker *w = wctx;
    gdu_CUresult r = w->cu->cuEventSynchronize(w->events[slot]);
    return r == GDU_CUDA_SUCCESS ? 0 : cuda_fail(why, len, "cuEventSynchronize", r);
}

static bool cuda_ready(void *wctx, unsigned slot)
{
    cuda_worker *w = wctx;
    return w->cu->cuEventQuery(w->events[slot]) != GDU_CUDA_ERROR_NOT_READY;
}

const gdu_io_mover gdu_io_mover_cuda = {
    cuda_worker_init, cuda_worker_fini, cuda_thread_enter, cuda_staging_pin, cuda_staging_unpin,
    cuda_to_mem,      cuda_from_mem,    cuda_wait,         cuda_ready,
};
