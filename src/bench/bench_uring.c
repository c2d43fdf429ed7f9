/* host-uring: the host path's reads (or writes) issued through one io_uring
 * at the same parallelism (queue depth = workers) instead of one thread per
 * outstanding I/O, to measure which of the two an engine should use. */
#include "bench/bench.h"
#include "util/open_regular.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    size_t io;     /* plan index */
    uint64_t done; /* bytes of this I/O already transferred */
    double start;
} ring_slot;

static uint64_t io_len(const bench_config *c, uint64_t off)
{
    return c->total - off < c->io_size ? c->total - off : c->io_size;
}

static void prep(struct io_uring *ring, const bench_config *c, const bench_plan *p, int fd,
                 char *buf, ring_slot *s, unsigned k)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
    uint64_t off = p->offset[s->io] + s->done;
    unsigned n = (unsigned)(io_len(c, p->offset[s->io]) - s->done);
    if (c->write)
        io_uring_prep_write(sqe, fd, buf + s->done, n, off);
    else
        io_uring_prep_read(sqe, fd, buf + s->done, n, off);
    io_uring_sqe_set_data64(sqe, k);
}

/* One run of the ring over the plan. */
typedef struct {
    struct io_uring ring;
    const bench_config *c;
    const bench_plan *p;
    int fd;
    char *mem; /* one I/O's buffer per slot */
    ring_slot *slots;
    size_t next, inflight; /* the plan's next I/O; slots in flight */
} uring_run;

static char *slot_buf(const uring_run *u, unsigned k) { return u->mem + (size_t)k * u->c->io_size; }

/* Slot k completed with res: retried or continued (a partial transfer),
 * failed (the first failure noted in r), or done and given the plan's next
 * I/O while no I/O failed. */
static void complete(uring_run *u, unsigned k, int res, bench_lat *lat, bench_result *r)
{
    const bench_config *c = u->c;
    ring_slot *s = &u->slots[k];
    uint64_t len = io_len(c, u->p->offset[s->io]);
    if (res == -EINTR || res == -EAGAIN || (res > 0 && s->done + (uint64_t)res < len)) {
        s->done += res > 0 ? (uint64_t)res : 0;
        prep(&u->ring, c, u->p, u->fd, slot_buf(u, k), s, k);
        return;
    }
    if (res <= 0) {
        if (r->status == 0) {
            r->status = res < 0 ? res : -EIO;
            snprintf(r->note, sizeof r->note, "%s at offset %" PRIu64 ": %s",
                     c->write ? "write" : "read", u->p->offset[s->io] + s->done,
                     strerror(-r->status));
        }
        u->inflight--;
        return;
    }
    lat->us[s->io] = (gdu_now_seconds() - s->start) * 1e6;
    r->bytes += len;
    bench_progress(c, "host-uring", r->bytes, false);
    if (u->next < u->p->n && r->status == 0) {
        *s = (ring_slot){u->next++, 0, gdu_now_seconds()};
        prep(&u->ring, c, u->p, u->fd, slot_buf(u, k), s, k);
    } else {
        u->inflight--;
    }
}

/* Keeps depth I/Os in flight until the plan is done or the ring failed. */
static void pump(uring_run *u, unsigned depth, bench_lat *lat, bench_result *r)
{
    for (unsigned k = 0; k < depth; k++, u->next++, u->inflight++) {
        u->slots[k] = (ring_slot){u->next, 0, gdu_now_seconds()};
        prep(&u->ring, u->c, u->p, u->fd, slot_buf(u, k), &u->slots[k], k);
    }
    while (u->inflight > 0) {
        io_uring_submit(&u->ring);
        struct io_uring_cqe *cqe;
        int e = io_uring_wait_cqe(&u->ring, &cqe);
        if (e == -EINTR)
            continue;
        if (e < 0) {
            r->status = e;
            break;
        }
        unsigned k = (unsigned)io_uring_cqe_get_data64(cqe);
        int res = cqe->res;
        io_uring_cqe_seen(&u->ring, cqe);
        complete(u, k, res, lat, r);
    }
}

void bench_run_host_uring(const bench_config *c, bench_gpu *g, const bench_plan *p, bench_lat *lat,
                          bench_result *r)
{
    unsigned depth = c->workers < p->n ? c->workers : (unsigned)p->n;
    uring_run u = {.c = c, .p = p};
    int e = io_uring_queue_init(depth, &u.ring, 0);
    if (e < 0) {
        r->status = -ENOTSUP;
        snprintf(r->note, sizeof r->note, "io_uring unavailable here: %s", strerror(-e));
        return;
    }
    char why[sizeof r->note] = "";
    u.fd = gdu_open_regular(c->file,
                            (c->write ? O_WRONLY : O_RDONLY) | O_CLOEXEC | (c->cold ? O_DIRECT : 0),
                            0, why, sizeof why);
    void *mem = NULL;
    size_t bytes = (size_t)depth * c->io_size;
    if (u.fd >= 0)
        mem = g->ok ? (g->cu->cuMemHostAlloc(&mem, bytes, GDU_CU_MEMHOSTALLOC_PORTABLE) == 0 ? mem
                                                                                             : NULL)
                    : aligned_alloc(4096, bytes);
    u.mem = mem;
    u.slots = calloc(depth, sizeof *u.slots);
    if (u.fd < 0 || mem == NULL || u.slots == NULL) {
        r->status = u.fd < 0 ? u.fd : -ENOMEM;
        snprintf(r->note, sizeof r->note, "cannot set up: %.280s",
                 u.fd < 0 ? why : strerror(ENOMEM));
        goto out;
    }
    memset(mem, 0x5A, bytes);
    r->ran = true;
    double t0 = gdu_now_seconds(), c0 = bench_cpu_seconds();
    pump(&u, depth, lat, r);
    r->seconds = gdu_now_seconds() - t0;
    r->cpu_seconds = bench_cpu_seconds() - c0;
    bench_progress(c, "host-uring", r->bytes, true);
    if (r->status == 0)
        snprintf(r->note, sizeof r->note,
                 "one thread, io_uring queue depth %u, %s, %s host memory%s", depth,
                 c->cold ? "O_DIRECT" : "buffered", g->ok ? "pinned" : "pageable (no GPU)",
                 c->cold ? ""
                         : "; a reference row, not the engine: buffered io_uring reads of cached "
                           "pages are copied inline in the submitting thread, so this is one "
                           "CPU's copy speed, not queue depth");
out:
    free(u.slots);
    if (mem != NULL && g->ok)
        g->cu->cuMemFreeHost(mem);
    else
        free(mem);
    if (u.fd >= 0)
        close(u.fd);
    io_uring_queue_exit(&u.ring);
}
