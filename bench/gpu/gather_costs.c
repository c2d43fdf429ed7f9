/* What a column slice costs on this machine: T threads gather `piece`
 * bytes every `stride` bytes of a cached file, by every route a loader
 * could take, beside whole 4 MiB reads of the same bytes (the rate a
 * whole-file load gets):
 *   whole      pread of 4 MiB ranges into host memory (reference)
 *   pread      one pread per piece (reads over gaps cost the whole rows)
 *   uring      the same reads through one io_uring per thread, 256 at a time
 *   mmap       memcpy from a fresh shared mapping (page faults on the way)
 *   mmap-pf    the same, touching the piece 4 ahead before each copy
 *   window     each thread maps 8 MiB of its part at a time, copies, unmaps
 *              (a mapping per gather chunk; the unmapping inside the clock)
 *   window-pf  the same with the touch ahead
 *   populate   a fresh mapping, MADV_POPULATE_READ of the thread's part, memcpy
 *   mapped     memcpy again from a mapping already populated (the copy alone)
 *   reg-whole  a fresh mapping registered with CUDA read-only (page cache
 *              pinned in place), one copy of the thread's whole part to the GPU
 *   reg-2d     the same registration, one strided copy (cuMemcpy2DAsync) of
 *              just the pieces to the GPU: the page cache read by the copy engine
 *   mapped-pf  the populated mapping, prefetching the piece 4 ahead into cache
 *   vmreadv    process_vm_readv of the pieces from the populated mapping, 1024
 *              at a time: the kernel copies through its own (huge) mapping
 *   huge       a fresh mapping at a 2 MiB boundary with MADV_HUGEPAGE
 *   collapse   a fresh mapping at a 2 MiB boundary, MADV_COLLAPSE of the
 *              thread's part first (asks for page-cache folios mapped by PMD)
 *   anon-huge  the pieces from an anonymous copy of the file in transparent
 *              huge pages: what the copy costs without 4 KiB page walks
 *   anon-4k    the same copy in 4 KiB pages (MADV_NOHUGEPAGE)
 *   mapped-nt  the populated mapping, each piece stored with non-temporal
 *              stores (no read for ownership of the destination's lines)
 *   mapped-nt-pf  the same, prefetching the piece 4 ahead
 *   mapped-movsb  the populated mapping, each piece copied by rep movsb
 * Host destinations are touched before the clock. One JSON line per route:
 * useful GB/s (pieces' bytes, or the whole part for whole and reg-whole),
 * the ratio of the pieces' time to whole's, and for the mapped routes the
 * seconds spent mapping, pinning and unmapping, the minor faults taken and
 * the file bytes the process had mapped by PMD afterwards. Decides how the
 * engine reads columns (issue 21). GDU_GATHER_WAYS (a comma list) picks
 * routes; the default is the list in main.
 *
 *   gather_costs FILE PIECE STRIDE [THREADS] [BYTES]
 */
#include "cuda/cuda_api.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14 */
#endif
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25 /* Linux 6.1 */
#endif
#define HUGE_2M ((uint64_t)2 << 20)

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

/* Each thread's destination, cycled through: GDU_GATHER_OUT_MIB (default 64;
 * the engine's staging is 8 MiB a worker). */
static uint64_t HOST_OUT = (uint64_t)64 << 20;

typedef gdu_CUresult (*memcpy2d_fn)(const gdu_CUDA_MEMCPY2D *copy, gdu_CUstream s);

static const gdu_cuda *cu;
static gdu_CUcontext ctx;
static memcpy2d_fn memcpy2d;

typedef struct {
    const char *way;
    int fd;
    const char *map;
    uint64_t begin, end; /* this thread's part of the file */
    uint64_t piece, stride;
    char *out;
    gdu_CUdeviceptr dev; /* device destination of the reg routes */
    uint64_t useful;
    double prepare_s; /* populate or register */
    double release_s; /* unregister */
    char failed[160];
} job;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void fail(job *j, const char *what, long code)
{
    if (j->failed[0] == '\0')
        snprintf(j->failed, sizeof j->failed, "%s: %ld", what, code);
}

/* Touches the cache lines of the piece `ahead` pieces on, so that its page
 * walk and memory reads overlap the copy of this one. */
static void prefetch_piece(const char *map, uint64_t off, uint64_t piece)
{
    for (uint64_t b = 0; b < piece && b < 4096; b += 64)
        __builtin_prefetch(map + off + b, 0, 3);
}

/* The pieces through the kernel: process_vm_readv of this process's own
 * mapping, up to 1024 pieces a call, into one contiguous destination. */
static void vm_readv(job *j)
{
    static __thread struct iovec from[1024];
    uint64_t placed = 0, off = j->begin;
    pid_t self = getpid();
    while (off + j->piece <= j->end) {
        unsigned k = 0;
        uint64_t at = placed % HOST_OUT;
        if (at + 1024 * j->piece > HOST_OUT)
            at = 0;
        for (; k < 1024 && off + j->piece <= j->end; k++, off += j->stride)
            from[k] = (struct iovec){.iov_base = (void *)(j->map + off), .iov_len = j->piece};
        struct iovec to = {.iov_base = j->out + at, .iov_len = k * j->piece};
        ssize_t got = process_vm_readv(self, &to, 1, from, k, 0);
        if (got != (ssize_t)(k * j->piece))
            return fail(j, "process_vm_readv", got < 0 ? errno : got);
        placed += k * j->piece;
    }
    j->useful = placed;
}

/* n bytes with 16-byte non-temporal stores where the destination allows
 * (x86-64; memcpy elsewhere). */
static void copy_nt(char *to, const char *from, uint64_t n)
{
#if defined(__x86_64__)
    uint64_t head = (16 - ((uintptr_t)to & 15)) & 15;
    if (head > n)
        head = n;
    memcpy(to, from, head);
    to += head, from += head, n -= head;
    for (; n >= 64; n -= 64, to += 64, from += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)from);
        __m128i b = _mm_loadu_si128((const __m128i *)(from + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(from + 32));
        __m128i d = _mm_loadu_si128((const __m128i *)(from + 48));
        _mm_stream_si128((__m128i *)to, a);
        _mm_stream_si128((__m128i *)(to + 16), b);
        _mm_stream_si128((__m128i *)(to + 32), c);
        _mm_stream_si128((__m128i *)(to + 48), d);
    }
#endif
    memcpy(to, from, n);
}

/* rep movsb on x86-64, memcpy elsewhere. */
static void copy_movsb(char *to, const char *from, uint64_t n)
{
#if defined(__x86_64__)
    __asm__ volatile("rep movsb" : "+D"(to), "+S"(from), "+c"(n) : : "memory");
#else
    memcpy(to, from, n);
#endif
}

typedef void (*copy_fn)(char *to, const char *from, uint64_t n);

static void copy_libc(char *to, const char *from, uint64_t n) { memcpy(to, from, n); }

static void copy_range_with(job *j, const char *base, uint64_t from, uint64_t to, int ahead,
                            uint64_t *placed, copy_fn copy)
{
    for (uint64_t off = from; off + j->piece <= to; off += j->stride) {
        if (ahead > 0 && off + (uint64_t)ahead * j->stride + j->piece <= to)
            prefetch_piece(base, off + (uint64_t)ahead * j->stride, j->piece);
        copy(j->out + *placed % HOST_OUT, base + off, j->piece);
        *placed += j->piece;
    }
#if defined(__x86_64__)
    _mm_sfence(); /* copy_nt's stores done before the clock stops */
#endif
}

static void copy_range(job *j, const char *base, uint64_t from, uint64_t to, int ahead,
                       uint64_t *placed)
{
    copy_range_with(j, base, from, to, ahead, placed, copy_libc);
}

static void copy_pieces_with(job *j, int ahead, copy_fn copy)
{
    uint64_t placed = 0;
    copy_range_with(j, j->map, j->begin, j->end, ahead, &placed, copy);
    j->useful = placed;
}

static void copy_pieces(job *j, int ahead) { copy_pieces_with(j, ahead, copy_libc); }

/* The thread maps windows of its part one at a time (8 MiB each), copies
 * their pieces and unmaps them: a mapping per gather chunk. */
static void copy_windows(job *j, int ahead)
{
    uint64_t placed = 0, window = (uint64_t)8 << 20;
    window = window / j->stride * j->stride;
    if (window == 0)
        window = j->stride;
    for (uint64_t at = j->begin; at < j->end; at += window) {
        uint64_t end = at + window < j->end ? at + window : j->end;
        uint64_t lo = at & ~(uint64_t)4095;
        const char *w = mmap(NULL, end - lo, PROT_READ, MAP_SHARED, j->fd, (off_t)lo);
        if (w == MAP_FAILED)
            return fail(j, "mmap window", errno);
        copy_range(j, w - lo, at, end, ahead, &placed);
        munmap((void *)w, end - lo);
    }
    j->useful = placed;
}

/* Registers the thread's part of the mapping (page-aligned) read-only, then
 * one copy to the GPU: whole, or the pieces as a 2-D copy. */
static void registered(job *j, int strided)
{
    if (cu->cuCtxSetCurrent(ctx) != GDU_CUDA_SUCCESS)
        return fail(j, "cuCtxSetCurrent", 0);
    uint64_t lo = j->begin & ~(uint64_t)4095, hi = (j->end + 4095) & ~(uint64_t)4095;
    double t0 = now();
    gdu_CUresult r =
        cu->cuMemHostRegister((void *)(j->map + lo), hi - lo, GDU_CU_MEMHOSTREGISTER_READ_ONLY);
    j->prepare_s = now() - t0;
    if (r != GDU_CUDA_SUCCESS)
        return fail(j, "cuMemHostRegister(READ_ONLY)", r);
    gdu_CUstream s = NULL;
    cu->cuStreamCreate(&s, GDU_CU_STREAM_NON_BLOCKING);
    uint64_t rows = (j->end - j->begin) / j->stride;
    if (strided) {
        gdu_CUDA_MEMCPY2D c = {.srcMemoryType = GDU_CU_MEMORYTYPE_HOST,
                               .srcHost = j->map + j->begin,
                               .srcPitch = j->stride,
                               .dstMemoryType = GDU_CU_MEMORYTYPE_DEVICE,
                               .dstDevice = j->dev,
                               .dstPitch = j->piece,
                               .WidthInBytes = j->piece,
                               .Height = rows};
        r = memcpy2d(&c, s);
        j->useful = rows * j->piece;
    } else {
        r = cu->cuMemcpyHtoDAsync(j->dev, j->map + j->begin, j->end - j->begin, s);
        j->useful = j->end - j->begin;
    }
    if (r == GDU_CUDA_SUCCESS)
        r = cu->cuStreamSynchronize(s);
    if (r != GDU_CUDA_SUCCESS)
        fail(j, strided ? "cuMemcpy2DAsync" : "cuMemcpyHtoDAsync", r);
    cu->cuStreamDestroy(s);
    t0 = now();
    cu->cuMemHostUnregister((void *)(j->map + lo));
    j->release_s = now() - t0;
}

static void *run(void *arg)
{
    job *j = arg;
    uint64_t placed = 0;
    if (strcmp(j->way, "whole") == 0) {
        for (uint64_t off = j->begin; off < j->end; off += 4u << 20) {
            uint64_t n = j->end - off < (4u << 20) ? j->end - off : 4u << 20;
            if (pread(j->fd, j->out, n, (off_t)off) != (ssize_t)n)
                fail(j, "pread", errno);
            placed += n;
        }
        j->useful = placed;
    } else if (strcmp(j->way, "pread") == 0) {
        for (uint64_t off = j->begin; off + j->piece <= j->end; off += j->stride) {
            if (pread(j->fd, j->out + placed % HOST_OUT, j->piece, (off_t)off) != (ssize_t)j->piece)
                fail(j, "pread", errno);
            placed += j->piece;
        }
        j->useful = placed;
    } else if (strcmp(j->way, "uring") == 0) {
        struct io_uring ring;
        if (io_uring_queue_init(256, &ring, 0) != 0) {
            fail(j, "io_uring_queue_init", errno);
            return NULL;
        }
        uint64_t off = j->begin;
        while (off + j->piece <= j->end) {
            unsigned k = 0;
            for (; k < 256 && off + j->piece <= j->end; k++, off += j->stride) {
                struct io_uring_sqe *s = io_uring_get_sqe(&ring);
                io_uring_prep_read(s, j->fd, j->out + placed % HOST_OUT, (unsigned)j->piece, off);
                placed += j->piece;
            }
            io_uring_submit_and_wait(&ring, k);
            struct io_uring_cqe *cqe;
            unsigned head, seen = 0;
            io_uring_for_each_cqe(&ring, head, cqe)
            {
                if (cqe->res != (int)j->piece)
                    fail(j, "io_uring read", cqe->res);
                seen++;
            }
            io_uring_cq_advance(&ring, seen);
        }
        io_uring_queue_exit(&ring);
        j->useful = placed;
    } else if (strcmp(j->way, "populate") == 0) {
        uint64_t lo = j->begin & ~(uint64_t)4095;
        double t0 = now();
        if (madvise((void *)(j->map + lo), j->end - lo, MADV_POPULATE_READ) != 0)
            fail(j, "madvise(MADV_POPULATE_READ)", errno);
        j->prepare_s = now() - t0;
        copy_pieces(j, 0);
    } else if (strcmp(j->way, "collapse") == 0) {
        uint64_t lo = j->begin & ~(HUGE_2M - 1), hi = (j->end + HUGE_2M - 1) & ~(HUGE_2M - 1);
        double t0 = now();
        if (madvise((void *)(j->map + lo), hi - lo, MADV_COLLAPSE) != 0)
            fail(j, "madvise(MADV_COLLAPSE)", errno);
        j->prepare_s = now() - t0;
        copy_pieces(j, 0);
    } else if (strcmp(j->way, "mmap") == 0 || strcmp(j->way, "mapped") == 0 ||
               strcmp(j->way, "huge") == 0 || strncmp(j->way, "anon", 4) == 0) {
        copy_pieces(j, 0);
    } else if (strcmp(j->way, "mapped-pf") == 0) {
        copy_pieces(j, 4);
    } else if (strcmp(j->way, "mapped-nt") == 0) {
        copy_pieces_with(j, 0, copy_nt);
    } else if (strcmp(j->way, "mapped-nt-pf") == 0) {
        copy_pieces_with(j, 4, copy_nt);
    } else if (strcmp(j->way, "mapped-movsb") == 0) {
        copy_pieces_with(j, 0, copy_movsb);
    } else if (strcmp(j->way, "vmreadv") == 0) {
        vm_readv(j);
    } else if (strcmp(j->way, "mmap-pf") == 0) {
        copy_pieces(j, 4);
    } else if (strcmp(j->way, "window") == 0) {
        copy_windows(j, 0);
    } else if (strcmp(j->way, "window-pf") == 0) {
        copy_windows(j, 4);
    } else {
        registered(j, strcmp(j->way, "reg-2d") == 0);
    }
    return NULL;
}

static int load_cuda(void)
{
    char why[256] = "";
    cu = gdu_cuda_load(why, sizeof why);
    gdu_CUdevice d;
    if (cu == NULL || cu->cuDeviceGet(&d, 0) != GDU_CUDA_SUCCESS ||
        cu->cuDevicePrimaryCtxRetain(&ctx, d) != GDU_CUDA_SUCCESS ||
        cu->cuCtxSetCurrent(ctx) != GDU_CUDA_SUCCESS) {
        fprintf(stderr, "gather_costs: no CUDA, the reg routes are left out: %s\n", why);
        return -1;
    }
    *(void **)&memcpy2d = dlsym(cu->handle, "cuMemcpy2DAsync_v2");
    return memcpy2d != NULL ? 0 : -1;
}

/* A read-only shared mapping of the file's first `bytes` at a 2 MiB
 * boundary (file offset 0 too), so that page-cache folios of 2 MiB could be
 * mapped by PMD; *span receives what to unmap. */
static const char *map_aligned(int fd, uint64_t bytes, int advice, uint64_t *span)
{
    *span = bytes + HUGE_2M;
    char *room = mmap(NULL, (size_t)*span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (room == MAP_FAILED)
        return NULL;
    char *at = (char *)(((uintptr_t)room + HUGE_2M - 1) & ~(uintptr_t)(HUGE_2M - 1));
    if (at > room)
        munmap(room, (size_t)(at - room));
    uint64_t tail = (uint64_t)(room + *span - (at + bytes));
    if (tail > 0)
        munmap(at + bytes, (size_t)tail);
    *span = bytes;
    if (mmap(at, (size_t)bytes, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED)
        return NULL;
    if (advice >= 0)
        madvise(at, (size_t)bytes, advice);
    return at;
}

/* An anonymous copy of the file's first `bytes`, in huge pages or not. */
static const char *anon_copy(int fd, uint64_t bytes, int advice)
{
    uint64_t span;
    char *at = mmap(NULL, (size_t)(bytes + HUGE_2M), PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (at == MAP_FAILED)
        return NULL;
    at = (char *)(((uintptr_t)at + HUGE_2M - 1) & ~(uintptr_t)(HUGE_2M - 1));
    madvise(at, (size_t)bytes, advice);
    for (uint64_t off = 0; off < bytes; off += span) {
        span = bytes - off < (16u << 20) ? bytes - off : 16u << 20;
        if (pread(fd, at + off, span, (off_t)off) != (ssize_t)span)
            return NULL;
    }
    return at;
}

/* A line of /proc/self/smaps_rollup or /proc/meminfo, in kB; -1 when absent. */
static long kb_of(const char *path, const char *key)
{
    FILE *f = fopen(path, "r");
    char line[256];
    long kb = -1;
    size_t n = strlen(key);
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, key, n) == 0 && line[n] == ':')
            kb = strtol(line + n + 1, NULL, 10);
    if (f != NULL)
        fclose(f);
    return kb;
}

static long minor_faults(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: gather_costs FILE PIECE STRIDE [THREADS] [BYTES]\n");
        return 64;
    }
    int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        perror(argv[1]);
        return 66;
    }
    uint64_t piece = strtoull(argv[2], NULL, 0), stride = strtoull(argv[3], NULL, 0);
    unsigned threads = argc > 4 ? (unsigned)atoi(argv[4]) : 16;
    uint64_t bytes = argc > 5 ? strtoull(argv[5], NULL, 0) : (uint64_t)st.st_size;
    if (bytes > (uint64_t)st.st_size)
        bytes = (uint64_t)st.st_size;
    if (piece == 0 || stride < piece || threads == 0 || threads > 256 || bytes < stride * threads) {
        fprintf(stderr, "gather_costs: need 0 < PIECE <= STRIDE, 1-256 threads, BYTES >= "
                        "STRIDE x THREADS\n");
        return 64;
    }
    const char *default_ways[] = {"whole",     "pread",     "mmap",  "mmap-pf",  "window",
                                  "window-pf", "mapped",    "whole", "mmap",     "mmap-pf",
                                  "window",    "window-pf", "uring", "populate", "mapped",
                                  "reg-whole", "reg-2d"};
    const char *ways[64];
    size_t n_ways = 0;
    char *picked = getenv("GDU_GATHER_WAYS") != NULL ? strdup(getenv("GDU_GATHER_WAYS")) : NULL;
    if (picked != NULL) {
        for (char *w = strtok(picked, ","); w != NULL && n_ways < 64; w = strtok(NULL, ","))
            ways[n_ways++] = w;
    } else {
        n_ways = sizeof default_ways / sizeof default_ways[0];
        memcpy(ways, default_ways, sizeof default_ways);
    }
    if (getenv("GDU_GATHER_OUT_MIB") != NULL)
        HOST_OUT = strtoull(getenv("GDU_GATHER_OUT_MIB"), NULL, 0) << 20;
    int have_cuda = load_cuda() == 0;
    uint64_t part = bytes / threads / stride * stride;
    char *out[256];
    gdu_CUdeviceptr dev[256] = {0};
    for (unsigned t = 0; t < threads; t++) {
        out[t] = aligned_alloc(4096, HOST_OUT);
        memset(out[t], 1, HOST_OUT); /* no first-touch faults inside the clock */
        if (have_cuda && cu->cuMemAlloc(&dev[t], part) != GDU_CUDA_SUCCESS)
            have_cuda = 0;
    }
    const char *map = NULL; /* the last fresh mapping, which mapped* copy from again */
    uint64_t map_span = 0;
    const char *anon = NULL;
    int anon_advice = -1;
    double whole = 0;
    for (size_t w = 0; w < n_ways; w++) {
        const char *way = ways[w];
        if (strncmp(way, "reg", 3) == 0 && !have_cuda)
            continue;
        int fresh = strncmp(way, "mmap", 4) == 0 || strcmp(way, "populate") == 0 ||
                    strncmp(way, "reg", 3) == 0 || strcmp(way, "huge") == 0 ||
                    strcmp(way, "collapse") == 0;
        int from_anon = strncmp(way, "anon", 4) == 0;
        if (fresh && map != NULL) {
            munmap((void *)map, (size_t)map_span);
            map = NULL;
        }
        if (from_anon) {
            int advice = strcmp(way, "anon-huge") == 0 ? MADV_HUGEPAGE : MADV_NOHUGEPAGE;
            if (anon == NULL || anon_advice != advice) {
                if (anon != NULL)
                    munmap((void *)anon, (size_t)bytes);
                anon = anon_copy(fd, bytes, advice);
                anon_advice = advice;
                if (anon == NULL) {
                    perror("anonymous copy");
                    return 70;
                }
            }
        }
        int reuses_map = strncmp(way, "mapped", 6) == 0 || strcmp(way, "vmreadv") == 0;
        if (reuses_map && map == NULL) { /* populated before the clock */
            map = map_aligned(fd, bytes, -1, &map_span);
            if (map == NULL || madvise((void *)map, (size_t)bytes, MADV_POPULATE_READ) != 0) {
                perror("mmap and MADV_POPULATE_READ");
                return 70;
            }
        }
        long faults0 = minor_faults();
        double t0 = now();
        if (fresh) {
            int advice =
                strcmp(way, "huge") == 0 || strcmp(way, "collapse") == 0 ? MADV_HUGEPAGE : -1;
            map = map_aligned(fd, bytes, advice, &map_span);
            if (map == NULL) {
                perror("mmap");
                return 70;
            }
        }
        pthread_t tid[256];
        job jobs[256];
        for (unsigned t = 0; t < threads; t++)
            jobs[t] = (job){.way = way,
                            .fd = fd,
                            .map = from_anon ? anon : map,
                            .begin = t * part,
                            .end = (t + 1) * part,
                            .piece = piece,
                            .stride = stride,
                            .out = out[t],
                            .dev = dev[t]};
        for (unsigned t = 0; t < threads; t++)
            pthread_create(&tid[t], NULL, run, &jobs[t]);
        uint64_t useful = 0;
        double prepare = 0, release = 0;
        const char *failed = "";
        for (unsigned t = 0; t < threads; t++) {
            pthread_join(tid[t], NULL);
            useful += jobs[t].useful;
            prepare = jobs[t].prepare_s > prepare ? jobs[t].prepare_s : prepare;
            release = jobs[t].release_s > release ? jobs[t].release_s : release;
            if (failed[0] == '\0' && jobs[t].failed[0] != '\0')
                failed = jobs[t].failed;
        }
        double s = now() - t0;
        long faults = minor_faults() - faults0;
        long pmd_kb = kb_of("/proc/self/smaps_rollup", "FilePmdMapped");
        double unmap = 0;
        /* mmap-pf, populate, huge and collapse leave their mapping, populated,
         * to the mapped routes after them */
        if (fresh && strcmp(way, "mmap") == 0) {
            double u0 = now();
            munmap((void *)map, (size_t)map_span);
            unmap = now() - u0;
            map = NULL;
        }
        double gbps = (double)useful / s / 1e9;
        if (strcmp(way, "whole") == 0)
            whole = s * (double)piece / (double)stride; /* whole's time for the pieces' share */
        printf("{\"way\": \"%s\", \"piece\": %llu, \"stride\": %llu, \"threads\": %u, "
               "\"useful_bytes\": %llu, \"seconds\": %.4f, \"gbps\": %.2f, "
               "\"vs_whole_share\": %.3f, \"prepare_s\": %.4f, \"release_s\": %.4f, "
               "\"unmap_s\": %.4f, \"minor_faults\": %ld, \"file_pmd_mapped_kb\": %ld, "
               "\"file_huge_pages_kb\": %ld, \"failed\": \"%s\"}\n",
               way, (unsigned long long)piece, (unsigned long long)stride, threads,
               (unsigned long long)useful, s, gbps,
               whole > 0 && strstr(way, "whole") == NULL ? whole / s : 0, prepare, release, unmap,
               faults, pmd_kb, kb_of("/proc/meminfo", "FileHugePages"), failed);
        fflush(stdout);
    }
    free(picked);
    return 0;
}
