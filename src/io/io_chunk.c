/* The file side of one chunk: pread/pwrite through a staging buffer, with
 * O_DIRECT for the 4 KiB-aligned part and the unaligned head and tail
 * bounced (reads) or written through the buffered descriptor (writes).
 * EINTR is retried; partial transfers continue; errors carry the offset. */
#include "io/io_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static uint64_t align_down(uint64_t x) { return x & ~(uint64_t)(GDU_IO_ALIGN - 1); }
static uint64_t align_up(uint64_t x) { return align_down(x + GDU_IO_ALIGN - 1); }

/* Reads up to n bytes; fewer only at end of file. With O_DIRECT a transfer
 * that ends off a 4 KiB boundary is the end of the file. */
static int64_t read_full(const gdu_io_sys *sys, int fd, bool direct, char *buf, uint64_t n,
                         uint64_t off, char *why, size_t len)
{
    uint64_t got = 0;
    while (got < n) {
        ssize_t r = sys->pread(fd, buf + got, (size_t)(n - got), (off_t)(off + got));
        if (r < 0) {
            int err = errno;
            if (err == EINTR)
                continue;
            snprintf(why, len, "read of %" PRIu64 " bytes at offset %" PRIu64 "%s failed: %s",
                     n - got, off + got, direct ? " (O_DIRECT)" : "", strerror(err));
            return err > 0 ? -err : -EIO;
        }
        if (r == 0)
            break;
        got += (uint64_t)r;
        if (direct && r % GDU_IO_ALIGN != 0)
            break;
    }
    return (int64_t)got;
}

/* Writes all n bytes, or fails. A short O_DIRECT write that leaves an
 * unaligned remainder finishes through the buffered descriptor. */
static int write_full(const gdu_io_sys *sys, int fd, int buffered_fd, const char *buf, uint64_t n,
                      uint64_t off, char *why, size_t len)
{
    uint64_t put = 0;
    while (put < n) {
        ssize_t r = sys->pwrite(fd, buf + put, (size_t)(n - put), (off_t)(off + put));
        if (r < 0) {
            int err = errno;
            if (err == EINTR)
                continue;
            snprintf(why, len, "write of %" PRIu64 " bytes at offset %" PRIu64 " failed: %s",
                     n - put, off + put, strerror(err));
            return err > 0 ? -err : -EIO;
        }
        if (r == 0) {
            snprintf(why, len, "write at offset %" PRIu64 " made no progress", off + put);
            return -EIO;
        }
        put += (uint64_t)r;
        if (r % GDU_IO_ALIGN != 0)
            fd = buffered_fd;
    }
    return 0;
}

/* The file system refused an O_DIRECT transfer it had accepted at open
 * (EINVAL): fall back to buffered I/O for this file, once, and say so. */
static void direct_refused(gdu_io_file *f, atomic_bool *flag, const char *what)
{
    bool expected = true;
    if (!atomic_compare_exchange_strong(flag, &expected, false))
        return;
    pthread_mutex_lock(&f->lock);
    size_t used = strlen(f->reason);
    snprintf(f->reason + used, sizeof f->reason - used,
             "; O_DIRECT %s refused by the file system (EINVAL), buffered", what);
    pthread_mutex_unlock(&f->lock);
}

int64_t gdu_io_read_into_staging(gdu_io_file *f, const gdu_io_chunk *c, char *staging, char **data,
                                 char *why, size_t len)
{
    const gdu_io_sys *sys = &f->engine->sys;
    size_t skip = gdu_io_staging_skip(c->offset);
    *data = staging + skip;
    if (atomic_load(&f->direct_reads)) {
        uint64_t base = c->offset - skip;
        int64_t got = read_full(sys, f->dfd, true, staging, align_up(c->offset + c->length) - base,
                                base, why, len);
        if (got != -EINVAL) {
            if (got < 0)
                return got;
            uint64_t avail = (uint64_t)got > skip ? (uint64_t)got - skip : 0;
            return (int64_t)(avail < c->length ? avail : c->length);
        }
        direct_refused(f, &f->direct_reads, "read");
    }
    return read_full(sys, f->fd, false, staging + skip, c->length, c->offset, why, len);
}

int gdu_io_write_from_staging(gdu_io_file *f, const gdu_io_chunk *c, const char *staging, char *why,
                              size_t len)
{
    const gdu_io_sys *sys = &f->engine->sys;
    uint64_t off = c->offset, end = c->offset + c->length;
    uint64_t base = align_down(off);
    const char *data = staging + (off - base);
    uint64_t mid_lo = align_up(off), mid_hi = align_down(end);
    if (atomic_load(&f->direct_writes) && mid_lo < mid_hi) {
        int r = write_full(sys, f->dfd, f->fd, staging + (mid_lo - base), mid_hi - mid_lo, mid_lo,
                           why, len);
        if (r != -EINVAL) {
            if (r == 0 && mid_lo > off)
                r = write_full(sys, f->fd, f->fd, data, mid_lo - off, off, why, len);
            if (r == 0 && end > mid_hi)
                r = write_full(sys, f->fd, f->fd, staging + (mid_hi - base), end - mid_hi, mid_hi,
                               why, len);
            return r;
        }
        direct_refused(f, &f->direct_writes, "write");
    }
    return write_full(sys, f->fd, f->fd, data, c->length, off, why, len);
}

int64_t gdu_io_gather_into_staging(gdu_io_file *f, const gdu_io_chunk *c, uint64_t max_gap,
                                   char *staging, char *why, size_t len)
{
    const gdu_io_sys *sys = &f->engine->sys;
    gdu_io_runs x = gdu_io_runs_of(c->req);
    size_t first = c->ext_index;
    uint64_t placed = 0;
    for (size_t a = 0; a < c->pieces;) {
        /* Runs read with one pread over the short gaps between them; the
         * chunk was cut so that it fits in the slot, gaps of max_gap and
         * all (gather_run in io_request_chunks.c). */
        uint64_t start = gdu_io_run_offset(x, first + a);
        uint64_t end = start + gdu_io_run_length(x, first + a);
        size_t b = a;
        while (b + 1 < c->pieces && gdu_io_run_offset(x, first + b + 1) - end <= max_gap) {
            b++;
            end = gdu_io_run_offset(x, first + b) + gdu_io_run_length(x, first + b);
        }
        char *at = staging + placed;
        int64_t got = read_full(sys, f->fd, false, at, end - start, start, why, len);
        if (got < 0) /* nothing of the chunk has left staging: none of it counts */
            return got;
        /* Squeeze the gaps out, front to back: every piece moves left. */
        for (size_t k = a; k <= b; k++) {
            uint64_t from = gdu_io_run_offset(x, first + k) - start;
            uint64_t length = gdu_io_run_length(x, first + k);
            uint64_t have = (uint64_t)got > from ? (uint64_t)got - from : 0;
            uint64_t n = have < length ? have : length;
            if (n > 0 && at + from != staging + placed)
                memmove(staging + placed, at + from, (size_t)n);
            placed += n;
            if (n < length) /* end of file: the runs after it lie beyond it */
                return (int64_t)placed;
        }
        a = b + 1;
    }
    return (int64_t)placed;
}
