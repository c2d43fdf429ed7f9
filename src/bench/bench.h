/* The bench harness behind gdunlock bench: configuration, results and the
 * helpers of the bench_*.c files. Each path moves the same bytes of the same
 * file with the same I/O size and order; only how they move differs. */
#ifndef GDUNLOCK_BENCH_BENCH_H
#define GDUNLOCK_BENCH_BENCH_H

#include "cuda/cuda_api.h"
#include "cuda/cuda_ctx.h"
#include "util/clock.h"
#include "util/pattern.h"

#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum {
    BENCH_DIRECT,     /* cuFile with nvidia-fs */
    BENCH_COMPAT,     /* cuFile in compat mode */
    BENCH_ENGINE,     /* the gdunlock engine, pipeline backend */
    BENCH_NAIVE,      /* one thread: pread + cuMemcpyHtoD (write: cuMemcpyDtoH + pwrite) */
    BENCH_HOST,       /* the same I/O into pinned host memory at the same parallelism */
    BENCH_H2D,        /* pinned host -> device copies (write: device -> host) */
    BENCH_HOST_URING, /* host's I/O through one io_uring at the same queue depth */
    BENCH_NPATHS
};

extern const char *const bench_path_names[BENCH_NPATHS];

typedef struct {
    const char *file;
    uint64_t total;   /* bytes moved per path */
    uint64_t io_size; /* bytes per I/O */
    unsigned workers;
    uint64_t chunk;         /* engine chunk size (0: engine default) */
    uint64_t default_chunk; /* the chunk when none is given and O_DIRECT is off */
    unsigned staging;       /* engine staging buffers per worker (0: default) */
    bool write, random, cold, create, verify, vmm;
    /* Called with a path's bytes done of total, at most every half second
     * and once more (final) when the path ends; NULL: no progress. */
    void (*progress)(void *user, const char *path, uint64_t done, uint64_t total, bool final);
    void *progress_user;
    bool force; /* may overwrite a file that is not a bench file */
    int device;
    unsigned paths; /* bit per BENCH_* */
    uint32_t seed;
    unsigned rounds;       /* each path measured this many times, paths alternating */
    unsigned seconds;      /* -T: each round of a path passes over the file until this many
                       * seconds have passed (0: one pass) */
    const char *file_note; /* why the file's data is not checked (not a bench file), or NULL */
} bench_config;

/* What c leaves to the engine, from its defaults (GDUNLOCK_IO_* included):
 * workers, staging, the chunk of c's mode; and the I/O size at most the
 * total. -EINVAL with why when a GDUNLOCK_IO_* setting is wrong. */
int bench_config_fill(bench_config *c, char *why, size_t len);

/* At most this many --rounds. */
#define BENCH_MAX_ROUNDS 9

typedef struct {
    bool requested, ran;
    int status; /* 0, or a negative errno when the path failed */
    uint64_t bytes;
    double seconds, cpu_seconds;
    double p50_us, p99_us;
    int verified;    /* 1 checked and right, 0 checked and wrong, -1 not checked */
    unsigned passes; /* over the file (more than 1 with -T) */
    char note[320];
    /* Over the rounds: the fields above are the median round's; these are
     * every round's GB/s in run order, and their extremes. */
    unsigned rounds;
    double round_gbps[BENCH_MAX_ROUNDS];
    double gbps_min, gbps_max;
} bench_result;

/* A path that could not run here (no GPU, no nvidia-fs, cuFile refusing the
 * file) is not a failure: its row says why. */
static inline bool bench_is_host(int path)
{
    return path == BENCH_HOST || path == BENCH_HOST_URING;
}

static inline bool bench_failed(const bench_result *r)
{
    return r->status != 0 && (r->ran || (r->status != -ENODEV && r->status != -ENOTSUP));
}

/* The GPU side shared by the paths: context and one device buffer that
 * mirrors the file range [0, total), so data at file offset x lands at
 * buffer offset x. */
typedef struct {
    const gdu_cuda *cu;
    gdu_CUdevice dev;
    gdu_cuda_ctx primary; /* retained and current */
    char name[128];
    gdu_CUdeviceptr buf;
    size_t buf_size;
    gdu_CUmemGenericAllocationHandle vmm_handle; /* when --mem vmm */
    bool ok;
    char why[256];
} bench_gpu;

/* The order in which the I/Os are issued: offsets of n I/Os. */
typedef struct {
    uint64_t *offset;
    size_t n;
} bench_plan;

/* Per-I/O latencies (microseconds), indexed by I/O number. */
typedef struct {
    double *us;
    size_t n;
} bench_lat;

double bench_cpu_seconds(void);

/* Makes sure the file holds the pattern over [0, total): creates it with
 * --create, else checks its size and a sample. A file that is not empty and
 * not a bench file is never overwritten (--create, -x write) without
 * --force; read, it is read as it is (as gdsio reads any file), its data
 * not checked: BENCH_FILE_FOREIGN, why saying so. 0 or a negative errno
 * (why): -EEXIST refused, -EISDIR, -EINVAL not a regular file or too
 * small, -ENOENT. */
int bench_prepare_file(const bench_config *c, char *why, size_t len);
#define BENCH_FILE_FOREIGN 1

int bench_gpu_open(bench_gpu *g, const bench_config *c);
void bench_gpu_close(bench_gpu *g);
/* Clears the device buffer (reads) or fills it with the pattern (writes). */
int bench_gpu_reset(bench_gpu *g, const bench_config *c, char *why, size_t len);
/* Checks the device buffer against the pattern; 1 right, 0 wrong (why says where), -EIO on error. */
int bench_gpu_verify(bench_gpu *g, const bench_config *c, char *why, size_t len);
/* Reads the file back and checks it (write paths). */
int bench_file_verify(const bench_config *c, char *why, size_t len);

/* Waits until the kernel has written back dirty pages (sync, then Dirty +
 * Writeback in /proc/meminfo below 64 MiB, at most 20 s) and, when asked and
 * root, drops the page cache, so that a path does not pay for an earlier
 * one's writeback. */
void bench_settle(bool drop_caches);

/* Progress through c->progress, when set. */
void bench_progress(const bench_config *c, const char *path, uint64_t done, bool final);

/* The path runners. Each fills r (bytes, note, status) and the latencies. */
void bench_run_h2d(const bench_config *c, bench_gpu *g, const bench_plan *p, bench_lat *lat,
                   bench_result *r);
void bench_run_host(const bench_config *c, bench_gpu *g, const bench_plan *p, bench_lat *lat,
                    bench_result *r);
void bench_run_host_uring(const bench_config *c, bench_gpu *g, const bench_plan *p, bench_lat *lat,
                          bench_result *r);
void bench_run_naive(const bench_config *c, bench_gpu *g, const bench_plan *p, bench_lat *lat,
                     bench_result *r);
/* engine, direct and cufile-compat: the engine with the given path's backend. */
void bench_run_engine(const bench_config *c, bench_gpu *g, const bench_plan *p, bench_lat *lat,
                      int path, bench_result *r);

/* A whole run: the GPU opened, every requested path run c->rounds times
 * (the paths alternating, the order reversed every other round), each
 * path's result its median round. */
typedef struct {
    bench_gpu gpu;
    bench_result res[BENCH_NPATHS];
    bool needed_gpu; /* a GPU path was asked for where there is no GPU */
} bench_run;

/* Runs the paths over the prepared file (bench_prepare_file). 0, or -errno
 * with why: -ENOMEM when the I/O plan does not fit in memory; the error of
 * opening the file where it is gone or no longer a regular file before a
 * path (replaced during the run), as bench_prepare_file's. */
int bench_run_paths(const bench_config *c, bench_run *run, char *why, size_t len);
void bench_run_free(bench_run *run);

/* A path's GB/s (0 when it did not run or failed). */
double bench_gbps(const bench_result *r);
/* The ceiling: min(host, h2d) of those that ran (0 if neither). host-uring
 * is reported beside host, not part of the ceiling. */
double bench_ceiling(const bench_result *r);

/* The run's report (bench_report.c): the table for people on out, and the
 * JSON document; NULL without memory. */
void bench_print_table(FILE *out, const bench_config *c, const bench_gpu *g, const bench_result *r);
json_t *bench_to_json(const bench_config *c, const bench_gpu *g, const bench_result *r);

#endif
