/* The baseline paths of gdunlock bench: h2d (copy ceiling), host (storage
 * ceiling at the same parallelism) and naive (one thread, pageable buffer,
 * synchronous copy). Each times only its transfer loop. */
#include "bench/bench.h"
#include "util/open_regular.h"
#include "util/units.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t io_len(const bench_config *c, uint64_t off)
{
    return c->total - off < c->io_size ? c->total - off : c->io_size;
}

/* pread/pwrite of exactly n bytes (EINTR retried); 0 or a negative errno. */
static int full_io(bool write, int fd, void *buf, uint64_t n, uint64_t off)
{
    uint64_t done = 0;
    while (done < n) {
        ssize_t r = write ? pwrite(fd, (char *)buf + done, n - done, (off_t)(off + done))
                          : pread(fd, (char *)buf + done, n - done, (off_t)(off + done));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            return -EIO; /* the file is shorter than the plan */
        done += (uint64_t)r;
    }
    return 0;
}

/* Opens the bench file for the path; O_DIRECT when --cold, buffered (noted)
 * where the file system refuses it. */
static int open_file(const bench_config *c, bench_result *r)
{
    int flags = (c->write ? O_WRONLY : O_RDONLY) | O_CLOEXEC;
    char why[sizeof r->note];
    int fd = -1;
    if (c->cold) {
        fd = gdu_open_regular(c->file, flags | O_DIRECT, 0, why, sizeof why);
        if (fd < 0)
            snprintf(r->note, sizeof r->note, "O_DIRECT refused (%s), buffered", strerror(-fd));
    }
    if (fd < 0)
        fd = gdu_open_regular(c->file, flags, 0, why, sizeof why);
    if (fd < 0) {
        r->status = fd;
        snprintf(r->note, sizeof r->note, "%s", why);
    }
    return fd;
}

static void io_failed(bench_result *r, const char *what, int err, uint64_t off)
{
    r->status = err;
    snprintf(r->note, sizeof r->note, "%s at offset %" PRIu64 ": %s", what, off, strerror(-err));
}

static void *pinned_alloc(bench_gpu *g, size_t n)
{
    void *p = NULL;
    if (g->ok)
        return g->cu->cuMemHostAlloc(&p, n, GDU_CU_MEMHOSTALLOC_PORTABLE) == GDU_CUDA_SUCCESS
                   ? p
                   : NULL;
    return aligned_alloc(4096, (n + 4095) / 4096 * 4096);
}

static void pinned_free(bench_gpu *g, void *p)
{
    if (p != NULL && g->ok)
        g->cu->cuMemFreeHost(p);
    else
        free(p);
}

void bench_run_h2d(const bench_config *c, bench_gpu *g, const bench_plan *p, bench_lat *lat,
                   bench_result *r)
{
    void *host = pinned_alloc(g, c->io_size);
    if (host == NULL) {
        r->status = -ENOMEM;
        snprintf(r->note, sizeof r->note, "cannot allocate pinned memory");
        return;
    }
    memset(host, 0x5A, c->io_size);
    r->ran = true;
    double t0 = gdu_now_seconds(), c0 = bench_cpu_seconds();
    for (size_t i = 0; i < p->n; i++) {
        uint64_t off = p->offset[i], n = io_len(c, off);
        double t = gdu_now_seconds();
        gdu_CUresult e = c->write ? g->cu->cuMemcpyDtoH(host, g->buf + off, n)
                                  : g->cu->cuMemcpyHtoD(g->buf + off, host, n);
        lat->us[i] = (gdu_now_seconds() - t) * 1e6;
        if (e != GDU_CUDA_SUCCESS) {
            r->status = -EIO;
            snprintf(r->note, sizeof r->note, "copy failed: %s", gdu_cuda_result_name(e));
            break;
        }
        r->bytes += n;
        bench_progress(c, "h2d", r->bytes, false);
    }
    r->seconds = gdu_now_seconds() - t0;
    r->cpu_seconds = bench_cpu_seconds() - c0;
    bench_progress(c, "h2d", r->bytes, true);
    if (r->status == 0)
        snprintf(r->note, sizeof r->note, "pinned %s copies, one stream",
                 c->write ? "device->host" : "host->device");
    pinned_free(g, host);
}

typedef struct {
    const bench_config *c;
    bench_gpu *g;
    const bench_plan *p;
    bench_lat *lat;
    int fd;
    uint64_t unit;        /* bytes per pread/pwrite; a request of -i bytes is read in units */
    void **bufs;          /* one pinned I/O buffer per thread, allocated before timing */
    double *finished;     /* when each thread ran out of work */
    atomic_uint next_buf; /* which of bufs (and finished) a starting thread takes */
    atomic_size_t next;
    atomic_uint_fast64_t bytes;
    atomic_int status;
    atomic_uint_fast64_t bad_offset;
} host_shared;

static void *host_worker(void *arg)
{
    host_shared *s = arg;
    const bench_config *c = s->c;
    unsigned me = atomic_fetch_add(&s->next_buf, 1);
    void *buf = s->bufs[me];
    for (;;) {
        size_t i = atomic_fetch_add(&s->next, 1);
        if (i >= s->p->n || atomic_load(&s->status) != 0)
            break;
        uint64_t off = s->p->offset[i], n = io_len(c, off);
        double t = gdu_now_seconds();
        int e = 0;
        for (uint64_t at = 0; e == 0 && at < n; at += s->unit)
            e = full_io(c->write, s->fd, (char *)buf + at, n - at < s->unit ? n - at : s->unit,
                        off + at);
        s->lat->us[i] = (gdu_now_seconds() - t) * 1e6;
        if (e != 0) {
            int expected = 0;
            if (atomic_compare_exchange_strong(&s->status, &expected, e))
                atomic_store(&s->bad_offset, off);
            break;
        }
        atomic_fetch_add(&s->bytes, n);
    }
    s->finished[me] = gdu_now_seconds();
    return NULL;
}

static void run_host(const bench_config *c, bench_gpu *g, const bench_plan *p, bench_lat *lat,
                     uint64_t unit, bench_result *r)
{
    host_shared s = {.c = c, .g = g, .p = p, .lat = lat, .unit = unit};
    s.fd = open_file(c, r);
    if (s.fd < 0)
        return;
    pthread_t *th = calloc(c->workers, sizeof *th);
    s.bufs = calloc(c->workers, sizeof *s.bufs);
    s.finished = calloc(c->workers, sizeof *s.finished);
    bool ready = th != NULL && s.bufs != NULL && s.finished != NULL;
    for (unsigned i = 0; ready && i < c->workers; i++) {
        s.bufs[i] = pinned_alloc(g, c->io_size);
        ready = s.bufs[i] != NULL;
        if (ready)
            memset(s.bufs[i], 0x5A, c->io_size);
    }
    r->ran = true;
    double t0 = gdu_now_seconds(), c0 = bench_cpu_seconds();
    unsigned started = 0;
    for (; ready && started < c->workers; started++)
        if (pthread_create(&th[started], NULL, host_worker, &s) != 0)
            break;
    /* Progress from this thread while the workers run. */
    while (started > 0 && c->progress != NULL && atomic_load(&s.next) < p->n &&
           atomic_load(&s.status) == 0) {
        bench_progress(c, "host", atomic_load(&s.bytes), false);
        usleep(100000);
    }
    for (unsigned i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    r->cpu_seconds = bench_cpu_seconds() - c0;
    /* The last thread's finish, not this thread's wake-up from the progress sleep. */
    double end = t0;
    for (unsigned i = 0; i < started; i++)
        end = s.finished[i] > end ? s.finished[i] : end;
    r->seconds = end - t0;
    r->bytes = atomic_load(&s.bytes);
    bench_progress(c, "host", r->bytes, true);
    free(th);
    for (unsigned i = 0; s.bufs != NULL && i < c->workers; i++)
        pinned_free(g, s.bufs[i]);
    free(s.bufs);
    free(s.finished);
    close(s.fd);
    if (started == 0) {
        r->status = -ENOMEM;
        snprintf(r->note, sizeof r->note, "cannot allocate %u pinned buffers or start threads",
                 c->workers);
    } else if (atomic_load(&s.status) != 0) {
        io_failed(r, c->write ? "pwrite" : "pread", atomic_load(&s.status),
                  atomic_load(&s.bad_offset));
    } else if (r->note[0] == '\0') {
        snprintf(r->note, sizeof r->note, "%u threads, %s, %s host memory", c->workers,
                 c->cold ? "O_DIRECT" : "buffered", g->ok ? "pinned" : "pageable (no GPU)");
    }
}

static double gbps(const bench_result *r)
{
    return r->seconds > 0 ? r->bytes / r->seconds / 1e9 : 0;
}

/* The storage ceiling at the engine's parallelism: the same threads and
 * requests, each request read with one pread of -i bytes and, where the
 * engine reads in smaller units (its chunk), also in those units; the
 * better of the two is the ceiling (large reads into pinned buffers can be
 * slower than small ones whose buffers stay in the CPU's caches, and the
 * engine must not be compared with a handicapped ceiling). */
void bench_run_host(const bench_config *c, bench_gpu *g, const bench_plan *p, bench_lat *lat,
                    bench_result *r)
{
    uint64_t unit = c->chunk != 0 && c->chunk < c->io_size ? c->chunk : c->io_size;
    run_host(c, g, p, lat, c->io_size, r);
    if (unit == c->io_size || r->status != 0 || !r->ran)
        return;
    bench_result small = {.requested = r->requested, .verified = r->verified};
    bench_lat small_lat = {malloc(lat->n * sizeof(double)), lat->n};
    if (small_lat.us == NULL)
        return;
    memset(small_lat.us, 0, lat->n * sizeof(double));
    if (c->write) { /* the second writes start, like the first, into an empty file on a quiet disk */
        char why[256];
        int fd = gdu_open_regular(c->file, O_WRONLY | O_TRUNC | O_CLOEXEC, 0, why, sizeof why);
        if (fd >= 0)
            close(fd);
        bench_settle(false);
    }
    run_host(c, g, p, &small_lat, unit, &small);
    double big_gbps = gbps(r), small_gbps = gbps(&small);
    if (small.status == 0 && small_gbps > big_gbps) {
        *r = small;
        memcpy(lat->us, small_lat.us, lat->n * sizeof(double));
    }
    char big_text[32], unit_text[32];
    size_t used = strlen(r->note);
    snprintf(r->note + used, sizeof r->note - used,
             "; best of %s %s %.2f GB/s and %s ones (the engine's chunk) %.2f GB/s",
             gdu_format_bytes(c->io_size, big_text, sizeof big_text), c->write ? "writes" : "reads",
             big_gbps, gdu_format_bytes(unit, unit_text, sizeof unit_text),
             small.status == 0 ? small_gbps : 0.0);
    free(small_lat.us);
}

void bench_run_naive(const bench_config *c, bench_gpu *g, const bench_plan *p, bench_lat *lat,
                     bench_result *r)
{
    int fd = open_file(c, r);
    if (fd < 0)
        return;
    void *buf = aligned_alloc(4096, (c->io_size + 4095) / 4096 * 4096); /* pageable */
    if (buf == NULL) {
        close(fd);
        r->status = -ENOMEM;
        return;
    }
    r->ran = true;
    double t0 = gdu_now_seconds(), c0 = bench_cpu_seconds();
    for (size_t i = 0; i < p->n; i++) {
        uint64_t off = p->offset[i], n = io_len(c, off);
        double t = gdu_now_seconds();
        int e = 0;
        gdu_CUresult ce = GDU_CUDA_SUCCESS;
        if (c->write) {
            ce = g->cu->cuMemcpyDtoH(buf, g->buf + off, n);
            if (ce == GDU_CUDA_SUCCESS)
                e = full_io(true, fd, buf, n, off);
        } else {
            e = full_io(false, fd, buf, n, off);
            if (e == 0)
                ce = g->cu->cuMemcpyHtoD(g->buf + off, buf, n);
        }
        lat->us[i] = (gdu_now_seconds() - t) * 1e6;
        if (e != 0) {
            io_failed(r, c->write ? "pwrite" : "pread", e, off);
            break;
        }
        if (ce != GDU_CUDA_SUCCESS) {
            r->status = -EIO;
            snprintf(r->note, sizeof r->note, "copy failed: %s", gdu_cuda_result_name(ce));
            break;
        }
        r->bytes += n;
        bench_progress(c, "naive", r->bytes, false);
    }
    r->seconds = gdu_now_seconds() - t0;
    r->cpu_seconds = bench_cpu_seconds() - c0;
    bench_progress(c, "naive", r->bytes, true);
    if (r->status == 0 && r->note[0] == '\0')
        snprintf(r->note, sizeof r->note, "one thread, pageable buffer, %s",
                 c->cold ? "O_DIRECT" : "buffered");
    free(buf);
    close(fd);
}
