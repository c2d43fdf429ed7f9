/* The bench's verifiable file pattern: creating the test file, and checking
 * memory or the file against it. */
#include "cli/bench.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PIECE ((size_t)16 << 20)

static uint8_t pattern_byte(uint64_t off, uint32_t seed)
{
    uint64_t w = bench_word(off / 8, seed);
    return (uint8_t)(w >> (8 * (off % 8)));
}

void bench_fill(void *buf, uint64_t file_offset, size_t n, uint32_t seed)
{
    uint8_t *b = buf;
    size_t i = 0;
    for (; i < n && (file_offset + i) % 8 != 0; i++)
        b[i] = pattern_byte(file_offset + i, seed);
    for (; i + 8 <= n; i += 8) {
        uint64_t w = bench_word((file_offset + i) / 8, seed);
        memcpy(b + i, &w, 8);
    }
    for (; i < n; i++)
        b[i] = pattern_byte(file_offset + i, seed);
}

uint64_t bench_check(const void *buf, uint64_t file_offset, size_t n, uint32_t seed)
{
    const uint8_t *b = buf;
    size_t i = 0;
    for (; i < n && (file_offset + i) % 8 != 0; i++)
        if (b[i] != pattern_byte(file_offset + i, seed))
            return file_offset + i;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        if (w != bench_word((file_offset + i) / 8, seed))
            for (size_t k = 0; k < 8; k++)
                if (b[i + k] != pattern_byte(file_offset + i + k, seed))
                    return file_offset + i + k;
    }
    for (; i < n; i++)
        if (b[i] != pattern_byte(file_offset + i, seed))
            return file_offset + i;
    return UINT64_MAX;
}

static int write_pattern(const bench_config *c, char *why, size_t len)
{
    int fd = open(c->file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        int err = errno;
        snprintf(why, len, "cannot create %s: %s", c->file, strerror(err));
        return -err;
    }
    uint8_t *buf = malloc(PIECE);
    int r = buf ? 0 : -ENOMEM;
    for (uint64_t off = 0; r == 0 && off < c->total; off += PIECE) {
        size_t n = c->total - off < PIECE ? (size_t)(c->total - off) : PIECE;
        bench_fill(buf, off, n, c->seed);
        for (size_t put = 0; put < n;) {
            ssize_t w = pwrite(fd, buf + put, n - put, (off_t)(off + put));
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                r = w < 0 ? -errno : -EIO;
                snprintf(why, len, "writing %s at offset %" PRIu64 ": %s", c->file, off + put,
                         strerror(-r));
                break;
            }
            put += (size_t)w;
        }
        if (c->progress)
            bench_progress(c, "create", off + n, off + n >= c->total);
    }
    if (r == 0 && fsync(fd) != 0) {
        r = -errno;
        snprintf(why, len, "fsync %s: %s", c->file, strerror(-r));
    }
    free(buf);
    close(fd);
    return r;
}

/* Reads n bytes at off from the file and checks them. 1 right, 0 wrong, <0 error. */
static int check_range(int fd, const bench_config *c, uint8_t *buf, uint64_t off, size_t n,
                       char *why, size_t len)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, buf + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int err = errno;
            snprintf(why, len, "reading %s at %" PRIu64 ": %s", c->file, off + got, strerror(err));
            return -err;
        }
        if (r == 0) {
            snprintf(why, len, "%s ends at %" PRIu64 ", before %" PRIu64, c->file, off + got,
                     c->total);
            return 0;
        }
        got += (size_t)r;
    }
    uint64_t bad = bench_check(buf, off, n, c->seed);
    if (bad != UINT64_MAX) {
        snprintf(why, len, "%s differs from the pattern at offset %" PRIu64, c->file, bad);
        return 0;
    }
    return 1;
}

int bench_prepare_file(const bench_config *c, char *why, size_t len)
{
    struct stat st;
    bool exists = stat(c->file, &st) == 0;
    if (c->create && (!exists || (uint64_t)st.st_size < c->total))
        return write_pattern(c, why, len);
    if (!exists) {
        snprintf(why, len, "%s does not exist (add --create to make it)", c->file);
        return -ENOENT;
    }
    if (c->write)
        return 0; /* every write path rewrites it */
    if ((uint64_t)st.st_size < c->total) {
        snprintf(why, len, "%s has %" PRIu64 " bytes, fewer than -s %" PRIu64 " (add --create)",
                 c->file, (uint64_t)st.st_size, c->total);
        return -EINVAL;
    }
    int fd = open(c->file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        snprintf(why, len, "cannot open %s: %s", c->file, strerror(err));
        return -err;
    }
    uint8_t buf[4096];
    int ok = check_range(fd, c, buf, 0, sizeof buf < c->total ? sizeof buf : (size_t)c->total, why, len);
    if (ok == 1 && c->total > sizeof buf)
        ok = check_range(fd, c, buf, c->total - sizeof buf, sizeof buf, why, len);
    close(fd);
    if (ok == 1)
        return 0;
    if (c->create)
        return write_pattern(c, why, len);
    if (ok == 0)
        snprintf(why + strlen(why), len - strlen(why),
                 " (not a bench file of this seed; add --create to rewrite it)");
    return ok < 0 ? ok : -EINVAL;
}

int bench_file_verify(const bench_config *c, char *why, size_t len)
{
    int fd = open(c->file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        snprintf(why, len, "cannot open %s: %s", c->file, strerror(err));
        return -err;
    }
    uint8_t *buf = malloc(PIECE);
    int ok = buf ? 1 : -ENOMEM;
    for (uint64_t off = 0; ok == 1 && off < c->total; off += PIECE)
        ok = check_range(fd, c, buf, off, c->total - off < PIECE ? (size_t)(c->total - off) : PIECE,
                         why, len);
    free(buf);
    close(fd);
    return ok;
}
