/* Opening a file on an engine: which backend serves it (cuFile only if it
 * registers the file) and whether O_DIRECT is used, each with its reason. */
#include "io/io_internal.h"
#include "util/open_regular.h"
#include "util/text.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Fraction (0..1) of the file's pages resident in the page cache, sampled
 * with mincore over up to 64 windows of 64 KiB spread across the file, in
 * one mapping of the whole file; -1 if it cannot be measured. It runs in
 * every open, before the first read, so it stays small: one mapping, not
 * one per window, and 1024 pages, not 65536 (64 windows of 4 MiB, each
 * mapped on its own, kept a cached load several times longer outside its
 * transfer:
 * bench/results/2026-12-01-h200-first-load-batch6.md). */
static double cached_fraction(const gdu_io_sys *sys, int fd, uint64_t size)
{
    const uint64_t window = 64u << 10;
    long page = sysconf(_SC_PAGESIZE);
    if (size == 0 || page <= 0 || size > SIZE_MAX)
        return -1;
    uint64_t windows = (size + window - 1) / window;
    if (windows > 64)
        windows = 64;
    uint64_t stride = windows > 1 ? (size - window) / (windows - 1) : 0;
    unsigned char *map = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED)
        return -1;
    unsigned char vec[(64u << 10) / 4096];
    uint64_t resident = 0, total = 0;
    int r = 0;
    for (uint64_t i = 0; r == 0 && i < windows; i++) {
        uint64_t off = (i * stride) & ~(uint64_t)(page - 1);
        uint64_t len = size - off < window ? size - off : window;
        size_t pages = (size_t)((len + (uint64_t)page - 1) / (uint64_t)page);
        if (pages > sizeof vec) /* pages larger than 4 KiB: fewer; smaller: not on Linux */
            pages = sizeof vec;
        r = sys->resident(map, off, (size_t)len, vec);
        for (size_t p = 0; r == 0 && p < pages; p++)
            resident += vec[p] & 1;
        total += pages;
    }
    munmap(map, (size_t)size);
    return r == 0 && total ? (double)resident / (double)total : -1;
}

static int open_flags(int flags)
{
    int o = O_CLOEXEC;
    if ((flags & GDU_IO_READ) && (flags & GDU_IO_WRITE))
        o |= O_RDWR;
    else if (flags & GDU_IO_WRITE)
        o |= O_WRONLY;
    else
        o |= O_RDONLY;
    return o;
}

/* Opens f's file again with other flags (O_DIRECT) through
 * /proc/self/fd/N, which names the open file itself whatever now lies at
 * the path it was opened by. Returns the descriptor or -errno. */
static int reopen(const gdu_io_file *f, int oflags)
{
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", f->fd);
    int fd = open(proc, oflags | O_CLOEXEC | O_NOCTTY);
    return fd >= 0 ? fd : -errno;
}

/* Decides O_DIRECT for reads and writes, opens the direct descriptor (the
 * same file as f->fd, or none), and writes the reason into note. */
static void choose_direct(gdu_io_file *f, char *note, size_t len)
{
    gdu_io_direct mode = f->engine->opt.direct;
    bool reads = false, writes = mode == GDU_IO_DIRECT_ON && (f->flags & GDU_IO_WRITE);
    if (mode == GDU_IO_DIRECT_OFF) {
        snprintf(note, len, "buffered (O_DIRECT off)");
        return;
    }
    char cache_note[64] = "";
    if (f->flags & GDU_IO_READ) {
        if (mode == GDU_IO_DIRECT_ON) {
            reads = true;
        } else {
            struct stat st;
            double frac = fstat(f->fd, &st) == 0
                              ? cached_fraction(&f->engine->sys, f->fd, (uint64_t)st.st_size)
                              : -1;
            reads = frac >= 0 && frac < 0.5;
            if (frac >= 0)
                snprintf(cache_note, sizeof cache_note, "%.0f%% of the file in page cache",
                         frac * 100);
            else
                snprintf(cache_note, sizeof cache_note, "page-cache residency unknown");
        }
    }
    if (!reads && !writes) {
        snprintf(note, len, "buffered (%s)",
                 cache_note[0] ? cache_note : "O_DIRECT auto: writes buffered");
        return;
    }
    f->dfd = reopen(f, open_flags(f->flags) | O_DIRECT);
    if (f->dfd < 0) {
        snprintf(note, len, "buffered (O_DIRECT refused by the file system: %s%s)",
                 strerror(-f->dfd), f->dfd == -ENOENT ? ": no /proc/self/fd to reopen it" : "");
        f->dfd = -1;
        return;
    }
    atomic_store(&f->direct_reads, reads);
    atomic_store(&f->direct_writes, writes);
    snprintf(note, len, "O_DIRECT %s%s%s%s",
             reads && writes ? "reads and writes"
             : reads         ? "reads"
                             : "writes",
             cache_note[0] ? " (" : "", cache_note, cache_note[0] ? ")" : "");
}

/* 0 when fd is a data file; else -EISDIR or -EINVAL (a FIFO, a device, a
 * socket: reading them could block forever or never end; a file of /proc
 * or /sys: its size is not its content) with why (gdu_data_file_check). */
static int check_regular(int fd, const char *name, char *why, size_t why_len)
{
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        snprintf(why, why_len, "cannot stat %s: %s", name, strerror(err));
        return -err;
    }
    return gdu_data_file_check(name, fd, &st, why, why_len);
}

/* Puts the checked regular-file descriptor fd (owned from here on) on the
 * engine: the backend, and O_DIRECT through a descriptor of the same file. */
static int adopt(gdu_io_engine *e, int fd, int flags, const char *name, gdu_io_file **out,
                 char *why, size_t why_len)
{
    gdu_io_file *f = calloc(1, sizeof *f);
    if (f == NULL) {
        close(fd);
        snprintf(why, why_len, "out of memory");
        return -ENOMEM;
    }
    f->engine = e;
    f->fd = fd;
    f->dfd = -1;
    f->flags = flags;
    pthread_mutex_init(&f->lock, NULL);
    pthread_cond_init(&f->idle, NULL);
    char note[2 * GDU_IO_WHY] = "";
    if (e->backend == GDU_IO_BACKEND_CUFILE) {
        char cwhy[GDU_IO_WHY] = "", proc[64];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd); /* this file, not the path's */
        int r = gdu_io_cufile_register(f, proc, cwhy, sizeof cwhy);
        if (r == 0) {
            f->backend = GDU_IO_BACKEND_CUFILE;
            snprintf(f->reason, sizeof f->reason, "cufile: file registered (%s); %s",
                     f->dfd >= 0 ? "O_DIRECT" : "buffered descriptor", gdu_io_cufile_ring_note(e));
            *out = f;
            return 0;
        }
        if (e->opt.backend == GDU_IO_BACKEND_CUFILE) {
            char shown[128];
            snprintf(why, why_len, "cufile refused %s: %s",
                     gdu_text_shorten(name, 100, shown, sizeof shown), cwhy);
            gdu_io_close(f);
            return r;
        }
        snprintf(note, sizeof note, "cufile refused file: %s", cwhy);
    }
    f->backend = e->backend == GDU_IO_BACKEND_HOST ? GDU_IO_BACKEND_HOST : GDU_IO_BACKEND_PIPELINE;
    char dnote[GDU_IO_WHY / 2] = "";
    choose_direct(f, dnote, sizeof dnote);
    snprintf(f->reason, sizeof f->reason, "%.10s, %s%s%.300s", gdu_io_backend_name(f->backend),
             dnote, note[0] ? "; " : "", note);
    *out = f;
    return 0;
}

/* The why buffer to write into: the caller's, or scratch when it gave none. */
static char *why_buffer(char *why, size_t *why_len, char *scratch, size_t scratch_len)
{
    if (why == NULL || *why_len == 0) {
        *why_len = scratch_len;
        why = scratch;
    }
    why[0] = '\0';
    return why;
}

/* The open flags are READ and/or WRITE, CREATE and TRUNCATE only with WRITE. */
static int check_flags(int flags, char *why, size_t why_len)
{
    if (!(flags & (GDU_IO_READ | GDU_IO_WRITE)) ||
        (flags & ~(GDU_IO_READ | GDU_IO_WRITE | GDU_IO_CREATE | GDU_IO_TRUNCATE)) ||
        ((flags & (GDU_IO_CREATE | GDU_IO_TRUNCATE)) && !(flags & GDU_IO_WRITE))) {
        snprintf(why, why_len,
                 "invalid open flags 0x%x (need READ and/or WRITE; CREATE and "
                 "TRUNCATE need WRITE)",
                 flags);
        return -EINVAL;
    }
    return 0;
}

int gdu_io_open(gdu_io_engine *e, const char *path, int flags, gdu_io_file **out, char *why,
                size_t why_len)
{
    char scratch[GDU_IO_WHY];
    why = why_buffer(why, &why_len, scratch, sizeof scratch);
    if (out != NULL)
        *out = NULL;
    if (e == NULL || path == NULL || out == NULL) {
        snprintf(why, why_len, "NULL %s", e == NULL ? "engine" : path == NULL ? "path" : "out");
        return -EINVAL;
    }
    if (gdu_io_engine_foreign(e))
        return gdu_io_foreign_fail(e, why, why_len);
    int r = check_flags(flags, why, why_len);
    if (r != 0)
        return r;
    int oflags = open_flags(flags) | (flags & GDU_IO_CREATE ? O_CREAT : 0) |
                 (flags & GDU_IO_TRUNCATE ? O_TRUNC : 0);
    int fd = gdu_open_regular(path, oflags, 0644, why, why_len);
    if (fd < 0)
        return fd;
    return adopt(e, fd, flags, path, out, why, why_len);
}

int gdu_io_open_fd(gdu_io_engine *e, int fd, int flags, gdu_io_file **out, char *why,
                   size_t why_len)
{
    char scratch[GDU_IO_WHY];
    why = why_buffer(why, &why_len, scratch, sizeof scratch);
    if (out != NULL)
        *out = NULL;
    if (e == NULL || out == NULL) {
        snprintf(why, why_len, "NULL %s", e == NULL ? "engine" : "out");
        return -EINVAL;
    }
    if (gdu_io_engine_foreign(e))
        return gdu_io_foreign_fail(e, why, why_len);
    int r = check_flags(flags, why, why_len);
    if (r != 0)
        return r;
    if (flags & (GDU_IO_CREATE | GDU_IO_TRUNCATE)) {
        snprintf(why, why_len, "CREATE and TRUNCATE need a path (gdu_io_open)");
        return -EINVAL;
    }
    char name[48];
    snprintf(name, sizeof name, "descriptor %d", fd);
    int status = fd >= 0 ? fcntl(fd, F_GETFL) : -1;
    if (status < 0) {
        snprintf(why, why_len, "%s: %s", name, strerror(EBADF));
        return -EBADF;
    }
    int mode = status & O_ACCMODE;
    if (((flags & GDU_IO_READ) && mode == O_WRONLY) ||
        ((flags & GDU_IO_WRITE) && mode == O_RDONLY)) {
        snprintf(why, why_len, "%s is open %s, not for %s", name,
                 mode == O_WRONLY ? "write-only" : "read-only",
                 flags & GDU_IO_WRITE ? "writing" : "reading");
        return -EBADF;
    }
    if ((flags & GDU_IO_WRITE) && (status & O_APPEND)) {
        snprintf(why, why_len, "%s is open with O_APPEND: writes would not land at their offsets",
                 name);
        return -EINVAL;
    }
    int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (own < 0) {
        int err = errno;
        snprintf(why, why_len, "%s: dup: %s%s", name, strerror(err),
                 err == EMFILE ? " (the process's open-file limit: raise it with ulimit -n)" : "");
        return -err;
    }
    r = check_regular(own, name, why, why_len);
    if (r != 0) {
        close(own);
        return r;
    }
    return adopt(e, own, flags, name, out, why, why_len);
}

void gdu_io_close(gdu_io_file *f)
{
    if (f == NULL)
        return;
    if (gdu_io_engine_foreign(f->engine)) {
        /* reads the parent had out never complete here, and its locks may
         * be held: only this process's descriptors and mapping go */
        gdu_io_gather_unmap_now(f);
        if (f->dfd >= 0)
            close(f->dfd);
        close(f->fd);
        free(f);
        return;
    }
    gdu_io_cancel_unplaced(f); /* they would hold the wait below forever */
    pthread_mutex_lock(&f->lock);
    while (f->inflight > 0)
        pthread_cond_wait(&f->idle, &f->lock);
    pthread_mutex_unlock(&f->lock);
    gdu_io_gather_unmap_later(f);
    gdu_io_cufile_deregister(f);
    if (f->dfd >= 0)
        close(f->dfd);
    close(f->fd);
    pthread_cond_destroy(&f->idle);
    pthread_mutex_destroy(&f->lock);
    free(f);
}

gdu_io_backend gdu_io_file_backend(const gdu_io_file *f)
{
    return f ? f->backend : GDU_IO_BACKEND_AUTO;
}

int gdu_io_file_direct(const gdu_io_file *f)
{
    return f && (atomic_load(&f->direct_reads) || atomic_load(&f->direct_writes));
}

const char *gdu_io_file_reason(const gdu_io_file *f) { return f ? f->reason : ""; }

int64_t gdu_io_file_size(const gdu_io_file *f)
{
    struct stat st;
    if (f == NULL)
        return -EINVAL;
    if (fstat(f->fd, &st) != 0)
        return -errno;
    return (int64_t)st.st_size;
}
