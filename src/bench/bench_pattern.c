/* The bench's verifiable file pattern: creating the test file, and checking
 * memory or the file against it. */
#include "bench/bench.h"
#include "util/open_regular.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PIECE ((size_t)16 << 20)

static int write_pattern(const bench_config *c, char *why, size_t len)
{
    /* A FIFO put there since the check is refused, not blocked on. */
    int fd = gdu_open_regular(c->file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644, why, len);
    if (fd < 0)
        return fd;
    uint8_t *buf = malloc(PIECE);
    int r = buf ? 0 : -ENOMEM;
    for (uint64_t off = 0; r == 0 && off < c->total; off += PIECE) {
        size_t n = c->total - off < PIECE ? (size_t)(c->total - off) : PIECE;
        gdu_pattern_fill(buf, off, n, c->seed);
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

/* The bench file for reading (never blocking, a FIFO put there since the
 * check included). The descriptor, or -errno with why. */
static int open_to_read(const bench_config *c, char *why, size_t len)
{
    return gdu_open_regular(c->file, O_RDONLY | O_CLOEXEC, 0, why, len);
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
    uint64_t bad = gdu_pattern_check(buf, off, n, c->seed);
    if (bad != UINT64_MAX) {
        snprintf(why, len, "%s differs from the pattern at offset %" PRIu64, c->file, bad);
        return 0;
    }
    return 1;
}

/* Whether the file holds the bench pattern of some seed (its first word
 * gives the seed back), so that bench may rewrite it: 1 yes, 0 no, <0 error. */
static int is_bench_file(const bench_config *c, char *why, size_t len)
{
    int fd = open_to_read(c, why, len);
    if (fd < 0)
        return fd;
    uint8_t buf[4096];
    ssize_t n = pread(fd, buf, sizeof buf, 0);
    close(fd);
    if (n < 8)
        return 0;
    uint64_t first;
    memcpy(&first, buf, 8);
    uint64_t seed = gdu_pattern_seed_of(first);
    return seed <= UINT32_MAX && gdu_pattern_check(buf, 0, (size_t)n, seed) == UINT64_MAX;
}

/* Refuses to overwrite a file that is not empty and not a bench file of any
 * seed (someone's data) without --force. 0 allowed, else -EEXIST with why. */
static int may_overwrite(const bench_config *c, const struct stat *st, const char *how, char *why,
                         size_t len)
{
    if (st->st_size == 0 || c->force)
        return 0;
    int bench = is_bench_file(c, why, len);
    if (bench < 0)
        return bench;
    if (bench == 1)
        return 0;
    snprintf(why, len,
             "%s exists and is not a bench file: %s would overwrite it; pass --force to "
             "allow that, or name a new file",
             c->file, how);
    return -EEXIST;
}

static int rewrite(const bench_config *c, const struct stat *st, char *why, size_t len)
{
    int rc = may_overwrite(c, st, "--create", why, len);
    return rc != 0 ? rc : write_pattern(c, why, len);
}

/* Whether the file's first and last pages hold the pattern of c's seed: 1
 * yes, 0 no (why says where it differs), or a negative errno. */
static int holds_pattern(const bench_config *c, char *why, size_t len)
{
    int fd = open_to_read(c, why, len);
    if (fd < 0)
        return fd;
    uint8_t buf[4096];
    int ok =
        check_range(fd, c, buf, 0, sizeof buf < c->total ? sizeof buf : (size_t)c->total, why, len);
    if (ok == 1 && c->total > sizeof buf)
        ok = check_range(fd, c, buf, c->total - sizeof buf, sizeof buf, why, len);
    close(fd);
    return ok;
}

int bench_prepare_file(const bench_config *c, char *why, size_t len)
{
    struct stat st;
    if (stat(c->file, &st) != 0) {
        int err = errno;
        if (err != ENOENT) {
            snprintf(why, len, "cannot use %s: %s", c->file, strerror(err));
            return -err;
        }
        if (!c->create) {
            snprintf(why, len, "%s does not exist (add --create to make it)", c->file);
            return -ENOENT;
        }
        return write_pattern(c, why, len);
    }
    if (S_ISDIR(st.st_mode)) {
        snprintf(why, len,
                 "%s is a directory: name a file with -f, or use -D %s for "
                 "%s/gdunlock-bench.dat",
                 c->file, c->file, c->file);
        return -EISDIR;
    }
    char what[384];
    if (gdu_data_file_check(c->file, -1, &st, what, sizeof what) != 0) {
        snprintf(why, len, "%s: bench uses regular files only", what);
        return -EINVAL;
    }
    if (c->write) { /* every write path truncates and rewrites it */
        int rc = may_overwrite(c, &st, "-x write", why, len);
        if (rc != 0 || !c->create || (uint64_t)st.st_size >= c->total)
            return rc;
        return write_pattern(c, why, len);
    }
    if ((uint64_t)st.st_size < c->total) {
        if (c->create)
            return rewrite(c, &st, why, len);
        snprintf(why, len, "%s has %" PRIu64 " bytes, fewer than -s %" PRIu64 " (add --create)",
                 c->file, (uint64_t)st.st_size, c->total);
        return -EINVAL;
    }
    if (!c->verify && !c->create)
        return 0; /* --no-verify: any file of the size is read as it is */
    int ok = holds_pattern(c, why, len);
    if (ok == 1)
        return 0;
    if (c->create)
        return rewrite(c, &st, why, len);
    if (ok < 0)
        return ok;
    snprintf(why + strlen(why), len - strlen(why),
             ": not a bench file of seed %u, read as it is and its data not checked (--create "
             "rewrites it with the pattern, so that every path's data is checked)",
             c->seed);
    return BENCH_FILE_FOREIGN;
}

int bench_file_verify(const bench_config *c, char *why, size_t len)
{
    int fd = open_to_read(c, why, len);
    if (fd < 0)
        return fd;
    uint8_t *buf = malloc(PIECE);
    int ok = buf ? 1 : -ENOMEM;
    for (uint64_t off = 0; ok == 1 && off < c->total; off += PIECE)
        ok = check_range(fd, c, buf, off, c->total - off < PIECE ? (size_t)(c->total - off) : PIECE,
                         why, len);
    free(buf);
    close(fd);
    return ok;
}
