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

void bench_run_host_uring(const bench_config *c, bench_gpu *g, const bench_plan *p, bench_lat *lat,
                          bench_result *r)
{
    unsigned depth = c->workers < p->n ? c->workers : (unsigned)p->n;
    struct io_uring ring;
    int e = io_uring_queue_init(depth, &ring, 0);
    if (e < 0) {
        r->status = -ENOTSUP;
        snprintf(r->note, sizeof r->note, "io_uring unavailable here: %s", strerror(-e));
        return;
    }
    char why[sizeof r->note] = "";
    int fd = gdu_open_regular(
        c->file, (c->write ? O_WRONLY : O_RDONLY) | O_CLOEXEC | (c->cold ? O_DIRECT : 0), 0, why,
        sizeof why);
    void *mem = NULL;
    size_t bytes = (size_t)depth * c->io_size;
    if (fd >= 0)
        mem = g->ok ? (g->cu->cuMemHostAlloc(&mem, bytes, GDU_CU_MEMHOSTALLOC_PORTABLE) == 0 ? mem
                                                                                             : NULL)
                    : aligned_alloc(4096, bytes);
    ring_slot *slots = calloc(depth, sizeof *slots);
    if (fd < 0 || mem == NULL || slots == NULL) {
        r->status = fd < 0 ? fd : -ENOMEM;
        snprintf(r->note, sizeof r->note, "cannot set up: %.280s", fd < 0 ? why : strerror(ENOMEM));
        goto out;
    }
    memset(mem, 0x5A, bytes);
    size_t next = 0, inflight = 0;
    r->ran = true;
    double t0 = gdu_now_seconds(), c0 = bench_cpu_seconds();
    for (unsigned k = 0; k < depth; k++, next++, inflight++) {
        slots[k] = (ring_slot){next, 0, gdu_now_seconds()};
        prep(&ring, c, p, fd, (char *)mem + (size_t)k * c->io_size, &slots[k], k);
    }
    while (inflight > 0) {
        io_uring_submit(&ring);
        struct io_uring_cqe *cqe;
        e = io_uring_wait_cqe(&ring, &cqe);
        if (e == -EINTR)
            continue;
        if (e < 0) {
            r->status = e;
            break;
        }
        unsigned k = (unsigned)io_uring_cqe_get_data64(cqe);
        int res = cqe->res;
        io_uring_cqe_seen(&ring, cqe);
        ring_slot *s = &slots[k];
        char *buf = (char *)mem + (size_t)k * c->io_size;
        if (res == -EINTR || res == -EAGAIN ||
            (res > 0 && s->done + (uint64_t)res < io_len(c, p->offset[s->io]))) {
            s->done += res > 0 ? (uint64_t)res : 0; /* retry, or continue a partial transfer */
            prep(&ring, c, p, fd, buf, s, k);
            continue;
        }
        if (res <= 0) {
            if (r->status == 0) {
                r->status = res < 0 ? res : -EIO;
                snprintf(r->note, sizeof r->note, "%s at offset %" PRIu64 ": %s",
                         c->write ? "write" : "read", p->offset[s->io] + s->done,
                         strerror(-r->status));
            }
            inflight--;
            continue;
        }
        lat->us[s->io] = (gdu_now_seconds() - s->start) * 1e6;
        r->bytes += io_len(c, p->offset[s->io]);
        bench_progress(c, "host-uring", r->bytes, false);
        if (next < p->n && r->status == 0) {
            *s = (ring_slot){next++, 0, gdu_now_seconds()};
            prep(&ring, c, p, fd, buf, s, k);
        } else {
            inflight--;
        }
    }
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
    free(slots);
    if (mem != NULL && g->ok)
        g->cu->cuMemFreeHost(mem);
    else
        free(mem);
    if (fd >= 0)
        close(fd);
    io_uring_queue_exit(&ring);
}
