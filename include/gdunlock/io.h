/* gdunlock I/O engine: moves byte ranges between a file and GPU memory (or
 * host memory, with the host backend) at the speed of the storage.
 *
 * An engine owns a pool of worker threads, their pinned staging buffers and
 * CUDA streams. Files are opened on an engine; reads and writes are split into
 * chunks that the workers move in parallel, overlapping storage I/O with PCIe
 * copies. Every call returns 0 or a negative errno and, where it takes one,
 * fills a message buffer with the cause; nothing here prints. A NULL
 * engine, file, request or output pointer is refused with -EINVAL; for a
 * NULL handle the accessors answer NULL, "", 0 or GDU_IO_BACKEND_AUTO.
 *
 * Threads: all calls are thread-safe except that a file must not be closed,
 * nor an engine destroyed, while another thread still uses it.
 */
#ifndef GDUNLOCK_IO_H
#define GDUNLOCK_IO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gdu_io_engine gdu_io_engine;
typedef struct gdu_io_file gdu_io_file;
typedef struct gdu_io_request gdu_io_request;

/* How data moves. AUTO picks cuFile where the direct path really works
 * (nvidia-fs loaded and the file registrable), else PIPELINE; it never picks
 * HOST, whose memory pointers mean host memory. */
typedef enum {
    GDU_IO_BACKEND_AUTO = 0,
    GDU_IO_BACKEND_CUFILE, /* cuFile (GDS or its compat mode); device memory */
    GDU_IO_BACKEND_PIPELINE, /* parallel pread/pwrite + pinned staging + async copies; device memory */
    GDU_IO_BACKEND_HOST,     /* the same pipeline into plain host memory (tests, ceilings) */
} gdu_io_backend;

/* O_DIRECT use. AUTO: reads use O_DIRECT when the file system accepts it and
 * less than half of the file sits in the page cache; writes stay buffered. */
typedef enum {
    GDU_IO_DIRECT_AUTO = 0,
    GDU_IO_DIRECT_ON,  /* O_DIRECT wherever the file system accepts it */
    GDU_IO_DIRECT_OFF, /* always buffered */
} gdu_io_direct;

/* Tunables. Zero means "default" for every numeric field. The environment
 * gives the process's defaults (gdu_io_options_default), never more: a value
 * the caller sets wins. The GDUNLOCK_IO_* variables and what they take:
 * docs/settings.md. */
typedef struct {
    gdu_io_backend backend;
    gdu_io_direct direct;
    int device;                  /* CUDA device ordinal (ignored by HOST) */
    unsigned workers;            /* worker threads; default gdu_io_default_workers() */
    size_t chunk_size;           /* bytes per worker I/O, a multiple of 4096 */
    unsigned staging_per_worker; /* staging buffers per worker (2 = double buffering) */
} gdu_io_options;

/* Defaults, from sweeps on the H200 machines (docs/io-api.md).
 * Workers: three quarters of the online CPUs, at least 2, at most
 * GDU_IO_MAX_DEFAULT_WORKERS. On 16 CPUs, 12 workers against 16 made the
 * first tensor-parallel rank of a process faster for rows (the rest of the
 * CPUs left to the caller's thread, which such ranks are bound by) and
 * whole loads no slower; the 2-way columns lost a little
 * (bench/results/2026-12-02-h200-workers-box.md). 2 staging slots per
 * worker beat 3 on a first load (more staging only adds time to fault in
 * and pin before the first copy;
 * bench/results/2026-12-01-h200-first-load-batch6.md). Warm, 4 MiB chunks
 * beat 1M and 16M; cold, workers and chunk made no difference
 * (bench/results/2026-11-30-h200-io-batch2.md,
 * bench/results/2026-11-30-h200x2-io-batch3.md). */
unsigned gdu_io_default_workers(void);
#define GDU_IO_MAX_DEFAULT_WORKERS 16u
#define GDU_IO_DEFAULT_CHUNK (4u << 20)
/* The chunk when the caller leaves it 0 and asks for O_DIRECT (direct ON):
 * one O_DIRECT read per 16 MiB. On the H200 machine's disk 16 MiB O_DIRECT
 * reads beat 4 MiB ones (bench/results/2026-11-30-h200-io-batch2.md), and
 * the engine with 16 MiB chunks keeps up with the host's reads
 * (bench/results/2026-11-30-h200x2-io-batch3.md). */
#define GDU_IO_DEFAULT_DIRECT_CHUNK (16u << 20)
#define GDU_IO_DEFAULT_STAGING 2u
#define GDU_IO_MAX_WORKERS 256u
#define GDU_IO_MAX_STAGING 16u
#define GDU_IO_MAX_CHUNK (1u << 30)
#define GDU_IO_ALIGN 4096u

/* Fills o with the process's defaults: the built-in ones (backend AUTO,
 * device 0, the values above) with the GDUNLOCK_IO_* variables over them, as
 * they were at the first call (read once per process). Returns 0, or -EINVAL
 * with the invalid variable named in why (o then holds the built-in
 * defaults). Set the fields you mean after it: yours win. */
int gdu_io_options_default(gdu_io_options *o, char *why, size_t why_len);

/* Changes one of the process's defaults at run time, as kvikio's
 * defaults::set does: name is "backend", "workers", "chunk", "staging" or
 * "direct" (or its GDUNLOCK_IO_* variable), value in the variable's form
 * ("4M", "on", ...). Engines created afterwards take it; engines that exist
 * keep theirs. Thread-safe. Returns 0, or -EINVAL with the cause in why
 * (nothing changed). Since GDUNLOCK_LOAD_0.4. */
int gdu_io_defaults_set(const char *name, const char *value, char *why, size_t why_len);

const char *gdu_io_backend_name(gdu_io_backend b); /* "auto", "cufile", "pipeline", "host" */
int gdu_io_backend_parse(const char *name, gdu_io_backend *out); /* 0 or -EINVAL */

/* Creates an engine: loads libcuda (not for HOST) and starts the workers,
 * which create their streams and make the staging memory in the background
 * (one region for every worker's slots, faulted in by the workers and pinned
 * once; the first chunks wait for it, and the caller's own preparation
 * overlaps it). Where the region cannot be pinned, slots are pinned one by
 * one; a chunk that finds no staging fails with -ENOMEM and the cause.
 * Returns 0 or a negative errno (-ENODEV when CUDA or the device is
 * unavailable, -ENOMEM, -EINVAL) with why. An engine serves the process
 * that made it: in a child of fork() the calls that would wait for its
 * workers fail with -ESRCH, and destroying it or closing its files only
 * lets go of the child's copy (docs/io-api.md). */
int gdu_io_engine_create(const gdu_io_options *o, gdu_io_engine **out, char *why, size_t why_len);

/* Waits until every worker has set itself up and its staging is pinned (the
 * engine started that at creation; what could not be had is tried once
 * more): for a caller that times the engine's throughput apart from its
 * start, such as `gdunlock bench`. Call it while no I/O is queued. Returns 0
 * when every slot is pinned, or -ENOMEM (the workers keep the staging they
 * got) or a worker's set-up error, with why. */
int gdu_io_engine_prestage(gdu_io_engine *e, char *why, size_t why_len);

/* Waits for queued work, stops the workers, frees everything. Close the
 * engine's files first. NULL is a no-op. */
void gdu_io_engine_destroy(gdu_io_engine *e);

/* The options in force after defaults were applied. */
const gdu_io_options *gdu_io_engine_options(const gdu_io_engine *e);

/* Engine-level backend and why (e.g. "pipeline: cufile unavailable:
 * libcufile.so.0 not found"). Files may still differ: see gdu_io_file_*. */
gdu_io_backend gdu_io_engine_backend(const gdu_io_engine *e);
const char *gdu_io_engine_reason(const gdu_io_engine *e);
/* 1 when cuFile was opened and nvidia-fs is loaded (true GPUDirect Storage),
 * 0 otherwise (cuFile absent, or compat mode only). */
int gdu_io_engine_direct_storage(const gdu_io_engine *e);

/* gdu_io_open flags */
enum {
    GDU_IO_READ = 1,
    GDU_IO_WRITE = 2,
    GDU_IO_CREATE = 4,   /* create if missing (mode 0644) */
    GDU_IO_TRUNCATE = 8, /* truncate to 0 on open */
};

/* Opens path on the engine. Only a regular file is opened: the open never
 * blocks (a FIFO without a writer would block a plain open forever), and a
 * directory, FIFO, device or socket is refused. Returns 0 or a negative
 * errno (-ENOENT, -EACCES, -EISDIR for a directory, -EINVAL for any other
 * file that is not a regular one or for bad flags, -EMFILE at the
 * process's open-file limit, or the cuFile refusal when the backend is
 * CUFILE explicitly: -ENOTSUP) with why. */
int gdu_io_open(gdu_io_engine *e, const char *path, int flags, gdu_io_file **out, char *why,
                size_t why_len);

/* Opens the file behind descriptor fd on the engine, for a caller that has
 * already checked that file (a header it validated): the engine reads that
 * file and no other, whatever happens to its path. fd is duplicated (the
 * caller keeps and closes its own); the O_DIRECT descriptor and cuFile's
 * registration reopen it through /proc/self/fd/N, so they are the same
 * file too (without /proc, reads stay buffered). flags: READ and/or WRITE,
 * allowed by fd's access mode (no CREATE or TRUNCATE; no WRITE on an
 * O_APPEND descriptor). Returns 0 or a negative errno (-EBADF for a closed
 * descriptor or one not open for that access, -EISDIR / -EINVAL for a file
 * that is not a regular one, -EMFILE) with why. */
int gdu_io_open_fd(gdu_io_engine *e, int fd, int flags, gdu_io_file **out, char *why,
                   size_t why_len);

/* Waits for the file's outstanding requests, then closes it. NULL is a no-op. */
void gdu_io_close(gdu_io_file *f);

/* The backend that serves this file (CUFILE, PIPELINE or HOST), whether
 * O_DIRECT is in use, and the reason for both, e.g. "pipeline, buffered:
 * cufile refused file: CU_FILE_HANDLE_NOT_REGISTERED (5027); O_DIRECT
 * refused by the file system (EINVAL)". */
gdu_io_backend gdu_io_file_backend(const gdu_io_file *f);
int gdu_io_file_direct(const gdu_io_file *f);
const char *gdu_io_file_reason(const gdu_io_file *f);
/* File size now (fstat), or a negative errno. */
int64_t gdu_io_file_size(const gdu_io_file *f);

/* One contiguous transfer: file bytes [offset, offset+length) <-> mem.
 * mem is a device address (CUdeviceptr cast to void *) for CUFILE/PIPELINE,
 * a host address for HOST. The engine copies on its own streams, which wait
 * for work queued earlier on the legacy default stream (cuMemsetD8, ...) but
 * not for other streams' work: synchronize those before submitting. Memory is
 * safe to use on any stream once the request completes. After completion: done = bytes transferred, a
 * prefix of the extent that is exactly right (shorter than length only at
 * end of file for reads, or up to the first failure); status = 0 or a
 * negative errno (-EIO, -ENOSPC, ...). A read that starts at or past the end
 * of the file completes with done = 0 and status 0. */
typedef struct {
    uint64_t offset;
    uint64_t length;
    void *mem;
    uint64_t done;
    int status;
} gdu_io_extent;

typedef enum { GDU_IO_OP_READ = 0, GDU_IO_OP_WRITE = 1 } gdu_io_op;

/* Called once per request from a worker thread when the whole request has
 * completed (status: the first failure, or 0; bytes: sum of extents' done).
 * It runs on an I/O worker: it must not block (no gdu_io_wait, no
 * synchronous gdu_io_read/write); gdu_io_submit is allowed. */
typedef void (*gdu_io_callback)(void *user, int status, uint64_t bytes);

/* Queues n extents (which stay owned by the caller and must stay valid until
 * the request is waited on) and returns at once. The request must be passed
 * to gdu_io_wait exactly once. Returns 0, or -EINVAL (bad arguments, a bad
 * extent, a read on a write-only file, ...) with nothing queued. A read of
 * many extents (a column slice) is split into chunks by a worker, not by the
 * caller's thread: memory short for that fails the request (-ENOMEM from
 * gdu_io_wait). */
int gdu_io_submit(gdu_io_file *f, gdu_io_op op, gdu_io_extent *ext, size_t n, gdu_io_callback cb,
                  void *user, gdu_io_request **out);

/* Fills the n extents of a box of a row-major array (a slice of a tensor):
 * runs of `length` bytes at file offset + sum(i_d * strides[d]) for every
 * i_d < counts[d] of its ndims outer dimensions, in row-major order, read
 * into memory one run after another from mem. n must be the product of the
 * counts (1 for ndims 0). A column of a [32000, 4096] tensor is 32000
 * extents; built here they cost a few nanoseconds each, built one by one
 * in an interpreter 200 ns (issue 21). Returns 0, or -EINVAL (NULL
 * arguments, n not the product, a run past 2^63) with nothing written. */
int gdu_io_extents_box(gdu_io_extent *ext, size_t n, uint64_t offset, const uint64_t *counts,
                       const uint64_t *strides, unsigned ndims, uint64_t length, void *mem);

/* The most outer dimensions a box may have. */
#define GDU_IO_BOX_MAX_DIMS 64u

/* gdu_io_submit of the extents gdu_io_extents_box makes of a box, without
 * the caller making them: the request holds them, and for a read of many
 * runs a worker plans it while the caller goes on (computing the runs of a
 * box whose dimensions merge into one instead of making them). The caller's part
 * costs the same for a column of 4,096 rows as for one run, where making
 * the extents in an interpreter was a measurable part of a rank
 * (bench/results/2026-12-02-h200-workers-box.md). counts and strides
 * are copied: the caller may reuse them at once. The extents' done and
 * status stay inside; gdu_io_wait gives the bytes moved. Returns 0, or
 * -EINVAL (what gdu_io_submit and gdu_io_extents_box refuse) with nothing
 * queued, -ENOMEM. Since GDUNLOCK_LOAD_0.2. */
int gdu_io_submit_box(gdu_io_file *f, gdu_io_op op, uint64_t offset, const uint64_t *counts,
                      const uint64_t *strides, unsigned ndims, uint64_t length, void *mem,
                      gdu_io_callback cb, void *user, gdu_io_request **out);

/* gdu_io_submit_box of a read whose memory comes later (gdu_io_place): the
 * workers read the runs into staging at once and copy each chunk out once
 * the memory is given, so a caller that allocates after submitting has the
 * allocation overlap the reads: a process's first tensors wait for torch's
 * first blocks from the driver, and the engine stood idle meanwhile
 * (bench/results/2026-12-04-h200-deferred-reads.md). The request must be placed or cancelled
 * (gdu_io_place with NULL) before it can complete; gdu_io_wait and
 * gdu_io_close cancel one left unplaced. Returns what gdu_io_submit_box
 * returns for a read. Since GDUNLOCK_LOAD_0.3. */
int gdu_io_submit_box_deferred(gdu_io_file *f, uint64_t offset, const uint64_t *counts,
                               const uint64_t *strides, unsigned ndims, uint64_t length,
                               gdu_io_callback cb, void *user, gdu_io_request **out);

/* Gives a request of gdu_io_submit_box_deferred its memory (what
 * gdu_io_submit_box's mem would have been), or with mem NULL cancels it:
 * nothing is written and it completes with -ECANCELED. Call it before
 * gdu_io_wait and gdu_io_close. Returns 0, -EINVAL (NULL, or a request
 * not deferred), -EALREADY (placed or cancelled before) or -ESRCH (in a
 * child of fork(), as for gdu_io_wait). Since GDUNLOCK_LOAD_0.3. */
int gdu_io_place(gdu_io_request *r, void *mem);

/* Non-blocking: 1 when the request has completed, else 0. */
int gdu_io_poll(const gdu_io_request *r);

/* Waits for the request, frees it, returns its status (0 or the first
 * failure as a negative errno) with the cause in why; *bytes (if not NULL)
 * gets the sum of the extents' done. */
int gdu_io_wait(gdu_io_request *r, uint64_t *bytes, char *why, size_t why_len);

/* Synchronous single-extent forms. Return 0 or a negative errno; *done (if
 * not NULL) gets the bytes moved. A read shortened by end of file returns 0
 * with *done < length. */
int gdu_io_read(gdu_io_file *f, uint64_t offset, uint64_t length, void *mem, uint64_t *done,
                char *why, size_t why_len);
int gdu_io_write(gdu_io_file *f, uint64_t offset, uint64_t length, const void *mem, uint64_t *done,
                 char *why, size_t why_len);

/* Flushes written data to stable storage (fdatasync). 0 or a negative errno. */
int gdu_io_sync(gdu_io_file *f, char *why, size_t why_len);

#ifdef __cplusplus
}
#endif

#endif
