/* The engine paths of gdunlock bench: engine (pipeline backend), direct
 * (cuFile with nvidia-fs) and cufile-compat (cuFile without it). Requests of
 * -i bytes are kept in flight; a request's latency runs from submission to
 * its completion callback. */
#include "bench/bench.h"
#include "gdunlock/io.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    gdu_io_extent x;
    gdu_io_request *req;
    double submitted, completed;
} slot;

static void on_complete(void *user, int status, uint64_t bytes)
{
    ((slot *)user)->completed = gdu_now_seconds();
}

/* Makes an engine for the path, or says in r why this path cannot run here. */
static gdu_io_engine *make_engine(const bench_config *c, int path, bench_result *r)
{
    gdu_io_options o = {0}; /* every field set here: the bench's plan, not the environment */
    o.backend = path == BENCH_ENGINE ? GDU_IO_BACKEND_PIPELINE : GDU_IO_BACKEND_CUFILE;
    o.device = c->device;
    o.workers = c->workers;
    o.chunk_size = (size_t)c->chunk;
    o.staging_per_worker = c->staging;
    o.direct = c->cold ? GDU_IO_DIRECT_ON : GDU_IO_DIRECT_OFF;
    gdu_io_engine *e = NULL;
    char why[256] = "";
    int s = gdu_io_engine_create(&o, &e, why, sizeof why);
    if (s != 0) {
        r->status = s;
        snprintf(r->note, sizeof r->note, "%s", why);
        return NULL;
    }
    /* The engine row is the engine's throughput: its staging is pinned
     * before the clock starts (a load pays for that once, hidden behind its
     * first reads). */
    s = gdu_io_engine_prestage(e, why, sizeof why);
    if (s != 0) {
        r->status = s;
        snprintf(r->note, sizeof r->note, "%s", why);
        gdu_io_engine_destroy(e);
        return NULL;
    }
    int direct = gdu_io_engine_direct_storage(e);
    if (path == BENCH_DIRECT && !direct) {
        snprintf(r->note, sizeof r->note,
                 "not possible here: nvidia-fs not loaded (cuFile only in compat mode)");
        gdu_io_engine_destroy(e);
        return NULL;
    }
    if (path == BENCH_COMPAT && direct) {
        snprintf(r->note, sizeof r->note, "not applicable: nvidia-fs is loaded (see direct)");
        gdu_io_engine_destroy(e);
        return NULL;
    }
    return e;
}

/* Twice as many requests in flight as the workers' staging slots hold:
 * while one slot-full is being read and copied, the next is already
 * queued, so no worker waits for the bench to retire a request (with
 * exactly one slot-full in flight the workers starved between requests
 * and the engine row lost a third of its throughput). A request's
 * latency therefore includes its time in the queue. */
static size_t queue_depth(const gdu_io_options *o, const bench_config *c, const bench_plan *p)
{
    uint64_t slots_bytes = (uint64_t)o->workers * o->staging_per_worker * o->chunk_size;
    size_t depth = (size_t)(2 * ((slots_bytes + c->io_size - 1) / c->io_size));
    if (depth < 2)
        depth = 2;
    return depth > p->n ? p->n : depth;
}

/* The requests of one engine path's pass: how far it got and why it stopped. */
typedef struct {
    slot *slots;
    size_t depth;
    uint64_t expected; /* bytes submitted */
    int status;        /* the first failure */
    char why[256];
} engine_pass;

/* Waits for I/O k's request (if it was submitted) and counts it. */
static void retire(engine_pass *q, size_t k, const bench_config *c, const char *name,
                   bench_lat *lat, bench_result *r)
{
    slot *sl = &q->slots[k % q->depth];
    if (sl->req == NULL) /* never submitted (an earlier failure stopped the run) */
        return;
    uint64_t done = 0;
    char why[256] = "";
    int w = gdu_io_wait(sl->req, &done, why, sizeof why);
    sl->req = NULL;
    lat->us[k] = (sl->completed - sl->submitted) * 1e6;
    r->bytes += done;
    if (w != 0 && q->status == 0) {
        q->status = w;
        snprintf(q->why, sizeof q->why, "%s", why);
    }
    bench_progress(c, name, r->bytes, false);
}

/* Submits I/O i of the plan in its slot; a refusal stops the pass. */
static void submit(engine_pass *q, size_t i, gdu_io_file *f, const bench_config *c,
                   const bench_gpu *g, const bench_plan *p)
{
    slot *sl = &q->slots[i % q->depth];
    uint64_t off = p->offset[i];
    sl->x.offset = off;
    sl->x.length = c->total - off < c->io_size ? c->total - off : c->io_size;
    sl->x.mem = (void *)(uintptr_t)(g->buf + off);
    q->expected += sl->x.length;
    sl->submitted = gdu_now_seconds();
    int s = gdu_io_submit(f, c->write ? GDU_IO_OP_WRITE : GDU_IO_OP_READ, &sl->x, 1, on_complete,
                          sl, &sl->req);
    if (s != 0) { /* nothing queued: account it as retired with an error */
        q->status = s;
        snprintf(q->why, sizeof q->why, "submit refused: %s", strerror(-s));
        sl->req = NULL;
    }
}

void bench_run_engine(const bench_config *c, bench_gpu *g, const bench_plan *p, bench_lat *lat,
                      int path, bench_result *r)
{
    gdu_io_engine *e = make_engine(c, path, r);
    if (e == NULL)
        return;
    const char *name = bench_path_names[path];
    gdu_io_file *f = NULL;
    char why[256] = "";
    int s = gdu_io_open(e, c->file, c->write ? GDU_IO_WRITE : GDU_IO_READ, &f, why, sizeof why);
    if (s != 0) {
        r->status = s;
        snprintf(r->note, sizeof r->note, "%s", why);
        gdu_io_engine_destroy(e);
        return;
    }
    const gdu_io_options *o = gdu_io_engine_options(e);
    engine_pass q = {.depth = queue_depth(o, c, p)};
    q.slots = calloc(q.depth ? q.depth : 1, sizeof *q.slots);
    r->ran = true;
    double t0 = gdu_now_seconds(), c0 = bench_cpu_seconds();
    for (size_t i = 0; i < p->n + q.depth && q.slots != NULL; i++) {
        if (i >= q.depth) /* retire I/O i - depth, whose slot I/O i reuses */
            retire(&q, i - q.depth, c, name, lat, r);
        if (i < p->n && q.status == 0) /* retiring goes on until every request is waited on */
            submit(&q, i, f, c, g, p);
    }
    r->seconds = gdu_now_seconds() - t0;
    r->cpu_seconds = bench_cpu_seconds() - c0;
    bench_progress(c, name, r->bytes, true);
    if (q.slots == NULL)
        q.status = -ENOMEM;
    r->status = q.status;
    if (q.status != 0)
        snprintf(r->note, sizeof r->note, "%s", q.why[0] ? q.why : strerror(-q.status));
    else if (r->bytes != q.expected) {
        r->status = -EIO;
        snprintf(r->note, sizeof r->note, "moved %llu of %llu bytes (file shorter than -s?)",
                 (unsigned long long)r->bytes, (unsigned long long)q.expected);
    } else
        snprintf(r->note, sizeof r->note, "%.200s; %u workers x %zu KiB chunks x %u staging",
                 gdu_io_file_reason(f), o->workers, o->chunk_size >> 10, o->staging_per_worker);
    free(q.slots);
    gdu_io_close(f);
    gdu_io_engine_destroy(e);
}
