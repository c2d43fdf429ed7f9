/* Where a fresh I/O engine's start goes (issue 21: a first rank waits for
 * it). The CUDA mover wrapped in one that stamps each call on each worker:
 * entering the context, the streams and events made, the staging pinned
 * (both parts), the first copies and waits. The program makes torch's part
 * first (the primary context current, the destination allocated), then
 * creates an engine and reads BYTES of FILE (cached) into the GPU at once,
 * as a first load does. One JSON line: milliseconds from the create call.
 *   usage: engine_start_parts FILE BYTES [GPU]
 * Without a GPU it prints a SKIP line and exits 0. */
#include "cuda/cuda_api.h"
#include "cuda/cuda_ctx.h"
#include "io/io_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { ENTER, INIT, PIN, COPY, WAIT, KINDS };
static const char *const kind_names[KINDS] = {"enter", "init", "pin", "copy", "wait"};

typedef struct {
    double start, end;
    int kind;
    size_t bytes;
} stamp;

#define STAMPS 4096
static stamp stamps[STAMPS];
static atomic_uint nstamps;
static struct timespec t0;

static double ms_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0.tv_sec) * 1e3 + (double)(t.tv_nsec - t0.tv_nsec) / 1e6;
}

static void keep(int kind, double start, size_t bytes)
{
    unsigned i = atomic_fetch_add(&nstamps, 1);
    if (i < STAMPS)
        stamps[i] = (stamp){start, ms_now(), kind, bytes};
}

static const gdu_io_mover *inner = &gdu_io_mover_cuda;

static int timed_init(gdu_io_engine *e, unsigned slots, void **w, char *why, size_t len)
{
    double s = ms_now();
    int r = inner->worker_init(e, slots, w, why, len);
    keep(INIT, s, 0);
    return r;
}

static void timed_fini(gdu_io_engine *e, void *w) { inner->worker_fini(e, w); }

static int timed_enter(gdu_io_engine *e)
{
    double s = ms_now();
    int r = inner->thread_enter(e);
    keep(ENTER, s, 0);
    return r;
}

static int timed_pin(gdu_io_engine *e, void *p, size_t bytes, char *why, size_t len)
{
    double s = ms_now();
    int r = inner->staging_pin(e, p, bytes, why, len);
    keep(PIN, s, bytes);
    return r;
}

static void timed_unpin(gdu_io_engine *e, void *p) { inner->staging_unpin(e, p); }

static int timed_to_mem(void *w, unsigned slot, void *mem, const void *staging, size_t n, char *why,
                        size_t len)
{
    double s = ms_now();
    int r = inner->to_mem(w, slot, mem, staging, n, why, len);
    keep(COPY, s, n);
    return r;
}

static int timed_from_mem(void *w, unsigned slot, void *staging, const void *mem, size_t n,
                          char *why, size_t len)
{
    return inner->from_mem(w, slot, staging, mem, n, why, len);
}

static int timed_wait(void *w, unsigned slot, char *why, size_t len)
{
    double s = ms_now();
    int r = inner->wait(w, slot, why, len);
    keep(WAIT, s, 0);
    return r;
}

static bool timed_ready(void *w, unsigned slot) { return inner->ready(w, slot); }

static const gdu_io_mover timed = {
    timed_init,   timed_fini,     timed_enter, timed_pin,   timed_unpin,
    timed_to_mem, timed_from_mem, timed_wait,  timed_ready,
};

/* The first and last start and end of kind's stamps, and their count. */
static void summary(int kind, FILE *out)
{
    double s0 = 1e18, s1 = -1, e0 = 1e18, e1 = -1, busy = 0;
    unsigned n = 0, total = atomic_load(&nstamps);
    for (unsigned i = 0; i < total && i < STAMPS; i++) {
        if (stamps[i].kind != kind)
            continue;
        stamp *s = &stamps[i];
        s0 = s->start < s0 ? s->start : s0;
        s1 = s->start > s1 ? s->start : s1;
        e0 = s->end < e0 ? s->end : e0;
        e1 = s->end > e1 ? s->end : e1;
        busy += s->end - s->start;
        n++;
    }
    if (n == 0)
        return;
    fprintf(out,
            ", \"%s\": {\"n\": %u, \"first_start\": %.3f, \"last_start\": %.3f, "
            "\"first_end\": %.3f, \"last_end\": %.3f, \"busy\": %.3f}",
            kind_names[kind], n, s0, s1, e0, e1, busy);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: engine_start_parts FILE BYTES [GPU]\n");
        return 2;
    }
    int gpu = argc > 3 ? atoi(argv[3]) : 0;
    uint64_t bytes = strtoull(argv[2], NULL, 0);
    char why[512] = "";
    const gdu_cuda *cu = gdu_cuda_load(why, sizeof why);
    gdu_cuda_ctx ctx = {0};
    if (cu == NULL ||
        gdu_cuda_ctx_enter(cu, gpu, &ctx, NULL, why, sizeof why) != GDU_CUDA_SUCCESS) {
        printf("SKIP engine-start-parts: %s\n", why);
        return 0;
    }
    gdu_CUdeviceptr dev = 0;
    if (cu->cuMemAlloc(&dev, bytes) != GDU_CUDA_SUCCESS) {
        printf("FAIL engine-start-parts: cuMemAlloc of %llu bytes\n", (unsigned long long)bytes);
        return 1;
    }
    gdu_io_options o;
    gdu_io_options_default(&o, NULL, 0);
    o.device = gpu;
    o.backend = GDU_IO_BACKEND_PIPELINE;
    gdu_io_engine *e = NULL;
    gdu_io_file *f = NULL;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int r = gdu_io_engine_create_moving(&o, &timed, &e, why, sizeof why);
    double created = ms_now();
    if (r == 0)
        r = gdu_io_open(e, argv[1], GDU_IO_READ, &f, why, sizeof why);
    double opened = ms_now();
    uint64_t done = 0;
    if (r == 0)
        r = gdu_io_read(f, 0, bytes, (void *)(uintptr_t)dev, &done, why, sizeof why);
    double read = ms_now();
    if (r != 0 || done != bytes) {
        printf("FAIL engine-start-parts: %s (read %llu of %llu)\n", why, (unsigned long long)done,
               (unsigned long long)bytes);
        return 1;
    }
    printf("{\"workers\": %u, \"staging\": %u, \"chunk\": %zu, \"bytes\": %llu, "
           "\"create\": %.3f, \"open\": %.3f, \"read\": %.3f, \"gbps\": %.2f",
           o.workers, o.staging_per_worker, o.chunk_size, (unsigned long long)bytes, created,
           opened, read, (double)bytes / (read * 1e6));
    for (int k = 0; k < KINDS; k++)
        summary(k, stdout);
    /* the pins one by one: the two parts of the region */
    printf(", \"pins\": [");
    unsigned total = atomic_load(&nstamps), shown = 0;
    for (unsigned i = 0; i < total && i < STAMPS; i++)
        if (stamps[i].kind == PIN)
            printf("%s[%.3f, %.3f, %zu]", shown++ ? ", " : "", stamps[i].start, stamps[i].end,
                   stamps[i].bytes);
    printf("]}\n");
    gdu_io_close(f);
    gdu_io_engine_destroy(e);
    cu->cuMemFree(dev);
    gdu_cuda_ctx_leave(cu, &ctx, NULL);
    return 0;
}
