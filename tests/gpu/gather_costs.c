/* What a column slice costs the CPU on this machine: T threads gather
 * `piece` bytes every `stride` bytes of a cached file into private memory,
 * four ways, beside whole 4 MiB reads of the same bytes (the rate a
 * whole-file load gets):
 *   whole   pread of 4 MiB ranges (reference)
 *   pread   one pread per piece (what the engine's gather chunks do)
 *   uring   the same reads through one io_uring per thread, 256 at a time
 *   mmap    memcpy from one shared mapping of the file
 * Prints one JSON line per way: useful GB/s (pieces' bytes only) and the
 * ratio to whole. Decides how the engine reads columns (issue 21).
 *
 *   gather_costs FILE PIECE STRIDE [THREADS] [BYTES]
 */
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

typedef struct {
    const char *way;
    int fd;
    const char *map;
    uint64_t begin, end; /* this thread's part of the file */
    uint64_t piece, stride;
    char *out;
    uint64_t useful;
    int failed;
} job;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *run(void *arg)
{
    job *j = arg;
    uint64_t placed = 0;
    if (strcmp(j->way, "whole") == 0) {
        for (uint64_t off = j->begin; off < j->end; off += 4u << 20) {
            uint64_t n = j->end - off < (4u << 20) ? j->end - off : 4u << 20;
            if (pread(j->fd, j->out, n, (off_t)off) != (ssize_t)n)
                j->failed = 1;
            placed += n;
        }
    } else if (strcmp(j->way, "pread") == 0) {
        for (uint64_t off = j->begin; off + j->piece <= j->end; off += j->stride) {
            if (pread(j->fd, j->out + placed % (64u << 20), j->piece, (off_t)off) !=
                (ssize_t)j->piece)
                j->failed = 1;
            placed += j->piece;
        }
    } else if (strcmp(j->way, "uring") == 0) {
        struct io_uring ring;
        if (io_uring_queue_init(256, &ring, 0) != 0) {
            j->failed = 1;
            return NULL;
        }
        uint64_t off = j->begin;
        while (off + j->piece <= j->end) {
            unsigned k = 0;
            for (; k < 256 && off + j->piece <= j->end; k++, off += j->stride) {
                struct io_uring_sqe *s = io_uring_get_sqe(&ring);
                io_uring_prep_read(s, j->fd, j->out + placed % (64u << 20), (unsigned)j->piece,
                                   off);
                placed += j->piece;
            }
            io_uring_submit_and_wait(&ring, k);
            struct io_uring_cqe *cqe;
            unsigned head, seen = 0;
            io_uring_for_each_cqe(&ring, head, cqe)
            {
                if (cqe->res != (int)j->piece)
                    j->failed = 1;
                seen++;
            }
            io_uring_cq_advance(&ring, seen);
        }
        io_uring_queue_exit(&ring);
    } else {
        for (uint64_t off = j->begin; off + j->piece <= j->end; off += j->stride) {
            memcpy(j->out + placed % (64u << 20), j->map + off, j->piece);
            placed += j->piece;
        }
    }
    j->useful = placed;
    return NULL;
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
    const char *map = mmap(NULL, (size_t)bytes, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        perror("mmap");
        return 70;
    }
    const char *ways[] = {"whole", "pread", "uring", "mmap", "whole", "pread", "uring", "mmap"};
    double whole = 0;
    for (size_t w = 0; w < sizeof ways / sizeof ways[0]; w++) {
        pthread_t tid[256];
        job jobs[256];
        uint64_t part = bytes / threads / stride * stride;
        for (unsigned t = 0; t < threads; t++) {
            jobs[t] = (job){.way = ways[w],
                            .fd = fd,
                            .map = map,
                            .begin = t * part,
                            .end = (t + 1) * part,
                            .piece = piece,
                            .stride = stride,
                            .out = aligned_alloc(4096, 64u << 20)};
        }
        double t0 = now();
        for (unsigned t = 0; t < threads; t++)
            pthread_create(&tid[t], NULL, run, &jobs[t]);
        uint64_t useful = 0;
        int failed = 0;
        for (unsigned t = 0; t < threads; t++) {
            pthread_join(tid[t], NULL);
            useful += jobs[t].useful;
            failed |= jobs[t].failed;
            free(jobs[t].out);
        }
        double s = now() - t0, gbps = (double)useful / s / 1e9;
        if (strcmp(ways[w], "whole") == 0)
            whole = gbps;
        printf("{\"way\": \"%s\", \"piece\": %llu, \"stride\": %llu, \"threads\": %u, "
               "\"useful_bytes\": %llu, \"seconds\": %.4f, \"gbps\": %.2f, \"vs_whole\": %.3f, "
               "\"failed\": %d}\n",
               ways[w], (unsigned long long)piece, (unsigned long long)stride, threads,
               (unsigned long long)useful, s, gbps, whole > 0 ? gbps / whole : 0, failed);
        fflush(stdout);
    }
    return 0;
}
