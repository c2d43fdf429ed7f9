/* HOST backend mover: caller memory is host memory; copies are memcpy and
 * complete at once, so the pipeline logic runs unchanged without a GPU. */
#include "io/io_internal.h"

#include <string.h>

static int host_worker_init(gdu_io_engine *e, unsigned slots, void **wctx, char *why, size_t len)
{
    static char token; /* no per-worker state; non-NULL marks "initialised" */
    *wctx = &token;
    return 0;
}

static void host_worker_fini(gdu_io_engine *e, void *wctx) {}

static int host_thread_enter(gdu_io_engine *e) { return 0; }

/* Host memory needs no pinning. */
static int host_staging_pin(gdu_io_engine *e, void *p, size_t bytes, char *why, size_t len)
{
    return 0;
}

static void host_staging_unpin(gdu_io_engine *e, void *p) {}

static int host_to_mem(void *wctx, unsigned slot, void *mem, const void *staging, size_t n,
                       char *why, size_t len)
{
    memcpy(mem, staging, n);
    return 0;
}

static int host_from_mem(void *wctx, unsigned slot, void *staging, const void *mem, size_t n,
                         char *why, size_t len)
{
    memcpy(staging, mem, n);
    return 0;
}

static int host_wait(void *wctx, unsigned slot, char *why, size_t len) { return 0; }

static bool host_ready(void *wctx, unsigned slot) { return true; }

const gdu_io_mover gdu_io_mover_host = {
    host_worker_init, host_worker_fini, host_thread_enter, host_staging_pin, host_staging_unpin,
    host_to_mem,      host_from_mem,    host_wait,         host_ready,
};
