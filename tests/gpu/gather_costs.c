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
 * Host destinations are touched before the clock. One JSON line per route:
 * useful GB/s (pieces' bytes, or the whole part for whole and reg-whole),
 * the ratio of the pieces' time to whole's, and for the mapped routes the
 * seconds spent mapping, pinning and unmapping. Decides how the engine reads
 * columns (issue 21).
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
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14 */
#endif

#define HOST_OUT ((uint64_t)64 << 20)

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
        __builtin_prefetch(map + off + b, 0, 0);
}

static void copy_range(job *j, const char *base, uint64_t from, uint64_t to, int ahead,
                       uint64_t *placed)
{
    for (uint64_t off = from; off + j->piece <= to; off += j->stride) {
        if (ahead > 0 && off + (uint64_t)ahead * j->stride + j->piece <= to)
            prefetch_piece(base, off + (uint64_t)ahead * j->stride, j->piece);
        memcpy(j->out + *placed % HOST_OUT, base + off, j->piece);
        *placed += j->piece;
    }
}

static void copy_pieces(job *j, int ahead)
{
    uint64_t placed = 0;
    copy_range(j, j->map, j->begin, j->end, ahead, &placed);
    j->useful = placed;
}

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
    } else if (strcmp(j->way, "mmap") == 0 || strcmp(j->way, "mapped") == 0) {
        copy_pieces(j, 0);
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
    int have_cuda = load_cuda() == 0;
    const char *ways[] = {"whole",  "pread",    "mmap",   "mmap-pf",   "window", "window-pf",
                          "mapped", "whole",    "mmap",   "mmap-pf",   "window", "window-pf",
                          "uring",  "populate", "mapped", "reg-whole", "reg-2d"};
    uint64_t part = bytes / threads / stride * stride;
    char *out[256];
    gdu_CUdeviceptr dev[256] = {0};
    for (unsigned t = 0; t < threads; t++) {
        out[t] = aligned_alloc(4096, HOST_OUT);
        memset(out[t], 1, HOST_OUT); /* no first-touch faults inside the clock */
        if (have_cuda && cu->cuMemAlloc(&dev[t], part) != GDU_CUDA_SUCCESS)
            have_cuda = 0;
    }
    const char *map = NULL; /* populate's mapping, which mapped copies from again */
    double whole = 0;
    for (size_t w = 0; w < sizeof ways / sizeof ways[0]; w++) {
        const char *way = ways[w];
        if (strncmp(way, "reg", 3) == 0 && !have_cuda)
            continue;
        int fresh = strncmp(way, "mmap", 4) == 0 || strcmp(way, "populate") == 0 ||
                    strncmp(way, "reg", 3) == 0;
        if (fresh && map != NULL) {
            munmap((void *)map, (size_t)bytes);
            map = NULL;
        }
        double t0 = now();
        if (fresh) {
            map = mmap(NULL, (size_t)bytes, PROT_READ, MAP_SHARED, fd, 0);
            if (map == MAP_FAILED) {
                perror("mmap");
                return 70;
            }
        }
        pthread_t tid[256];
        job jobs[256];
        for (unsigned t = 0; t < threads; t++)
            jobs[t] = (job){.way = way,
                            .fd = fd,
                            .map = map,
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
        double unmap = 0;
        if (fresh && strcmp(way, "mmap-pf") != 0 && strcmp(way, "populate") != 0) {
            double u0 = now();
            munmap((void *)map, (size_t)bytes);
            unmap = now() - u0;
            map = NULL;
        }
        double gbps = (double)useful / s / 1e9;
        if (strcmp(way, "whole") == 0)
            whole = s * (double)piece / (double)stride; /* whole's time for the pieces' share */
        printf("{\"way\": \"%s\", \"piece\": %llu, \"stride\": %llu, \"threads\": %u, "
               "\"useful_bytes\": %llu, \"seconds\": %.4f, \"gbps\": %.2f, "
               "\"vs_whole_share\": %.3f, \"prepare_s\": %.4f, \"release_s\": %.4f, "
               "\"unmap_s\": %.4f, \"failed\": \"%s\"}\n",
               way, (unsigned long long)piece, (unsigned long long)stride, threads,
               (unsigned long long)useful, s, gbps,
               whole > 0 && strstr(way, "whole") == NULL ? whole / s : 0, prepare, release, unmap,
               failed);
        fflush(stdout);
    }
    return 0;
}
