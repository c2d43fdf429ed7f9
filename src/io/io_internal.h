/* Internals of the I/O engine, shared by the src/io sources (and by unit tests that
 * inject system-call failures). Not part of the public API. */
#ifndef GDUNLOCK_IO_INTERNAL_H
#define GDUNLOCK_IO_INTERNAL_H

#include "cuda/cuda_ctx.h"
#include "cuda/cufile_api.h"
#include "gdunlock/io.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/types.h>

#define GDU_IO_WHY 256

typedef struct gdu_io_box gdu_io_box;

/* The system calls the engine moves file data with, and the one it asks the
 * page cache with; tests replace them to inject EINTR, EIO, ENOSPC or short
 * transfers, and to say which pages are cached (the real page cache is
 * shared with every process on the machine, and POSIX_FADV_DONTNEED is only
 * advice). pread/pwrite: their libc contract. resident: mincore(2) over the
 * file's bytes [offset, offset + len), which the caller mapped at
 * map + offset. map: a read-only shared mapping of the file's first len
 * bytes, or MAP_FAILED (tests refuse it to keep gathers on pread). */
typedef struct {
    ssize_t (*pread)(int fd, void *buf, size_t n, off_t off);
    ssize_t (*pwrite)(int fd, const void *buf, size_t n, off_t off);
    int (*resident)(void *map, uint64_t offset, size_t len, unsigned char *vec);
    void *(*map)(int fd, size_t len);
} gdu_io_sys;

/* Replaces the engine's system calls (NULL, or a NULL member, restores
 * libc's). Call before opening files or submitting any work. */
void gdu_io_engine_set_sys(gdu_io_engine *e, const gdu_io_sys *sys);

/* Buffered reads move a chunk in pieces of at most this many bytes, each
 * piece's copy queued as soon as it is in staging (see read_chunk in
 * io_engine.c). 4 MiB: the chunk size that gave the most GB/s at 8 and 16
 * workers in the warm workers x chunk sweep on the H200 machine (docs/io-api.md). */
#define GDU_IO_READ_PIECE ((size_t)4 << 20)

/* Sets the read piece size (a multiple of GDU_IO_ALIGN; tests use small ones).
 * Call before submitting any work. */
void gdu_io_engine_set_read_piece(gdu_io_engine *e, size_t bytes);

/* The only part of the pipeline that differs between the HOST backend and
 * CUDA: copying between a worker's staging slot and the caller's memory, and
 * waiting for that copy. Copies may complete asynchronously; wait/ready
 * refer to the last copy started on a slot. */
typedef struct {
    /* Per-worker state (streams, events), created on the engine's thread. */
    int (*worker_init)(gdu_io_engine *e, unsigned slots, void **wctx, char *why, size_t len);
    void (*worker_fini)(gdu_io_engine *e, void *wctx);
    /* Called once on each worker thread before it moves data. */
    int (*thread_enter)(gdu_io_engine *e);
    /* Page-locks staging memory the engine mapped and faulted in (where that
     * matters), and releases it before the engine unmaps it. */
    int (*staging_pin)(gdu_io_engine *e, void *p, size_t bytes, char *why, size_t len);
    void (*staging_unpin)(gdu_io_engine *e, void *p);
    int (*to_mem)(void *wctx, unsigned slot, void *mem, const void *staging, size_t n, char *why,
                  size_t len);
    int (*from_mem)(void *wctx, unsigned slot, void *staging, const void *mem, size_t n, char *why,
                    size_t len);
    int (*wait)(void *wctx, unsigned slot, char *why, size_t len);
    bool (*ready)(void *wctx, unsigned slot);
} gdu_io_mover;

/* Applies the GDUNLOCK_IO_* variables as they are now to o: 0, or -EINVAL
 * naming the variable in why (o unchanged). gdu_io_options_default calls it
 * once per process; tests and the fuzzer call it directly. */
int gdu_io_options_parse_env(gdu_io_options *o, char *why, size_t why_len);

/* Staging (workers x staging_per_worker x chunk_size, all of it mapped at
 * engine start, faulted in and pinned) may take at most this share of the
 * machine's memory: a quarter, which leaves the process its own data and
 * the page cache the files it reads. */
#define GDU_IO_STAGING_MEMORY_SHARE 4

/* Holds o's staging within a share of memory (bytes of it; 0: unknown, no
 * bound): the built-in defaults shrink to fit (fewer slots per worker,
 * then fewer workers), anything set is refused: -EINVAL with why naming
 * the settings (the GDUNLOCK_IO_* variables where they are set). */
int gdu_io_options_bound_staging(gdu_io_options *o, uint64_t memory, char *why, size_t len);

/* Staging up to this many bytes is faulted in and pinned as the engine
 * starts, so that its first copies wait for none of it. 1 GiB: twice the
 * largest built-in staging (16 workers x 2 slots x the 16 MiB O_DIRECT
 * chunk), so that every default and every setting the GPU tests use keep
 * their pinned staging. Larger staging (a chunk size set far above the
 * default, say) is neither faulted in nor pinned: its pages come as reads
 * fill them, so the memory it takes follows the loads, not the settings,
 * and its copies to the GPU go through the driver's own pinned buffers. */
#define GDU_IO_PRESTAGE_MAX ((size_t)1 << 30)

/* The default worker count on a machine with cpus online CPUs
 * (gdu_io_default_workers asks sysconf). */
unsigned gdu_io_workers_for_cpus(long cpus);

extern const gdu_io_mover gdu_io_mover_host;
extern const gdu_io_mover gdu_io_mover_cuda;

typedef struct gdu_io_chunk {
    struct gdu_io_chunk *next; /* engine queue link */
    gdu_io_request *req;
    size_t ext_index;
    /* 1, or a gather chunk's number of extents: ext_index and the ones after
     * it, small reads whose memory follows one another from mem (a column
     * of a tensor, one short range per row), moved through one staging slot
     * with one copy. offset is then the first extent's, length their sum. */
    size_t pieces;
    uint64_t offset; /* file offset */
    uint64_t length;
    char *mem; /* caller memory for this chunk (device or host address) */
} gdu_io_chunk;

/* Read extents shorter than this are gathered: consecutive ones whose
 * memory follows one another (and whose file ranges ascend) share a chunk,
 * up to the dispatch unit of bytes. A copy and a queue round per extent cost
 * more than the read of a few KiB itself: a column slice of a [4096, 4096]
 * bf16 tensor is 4096 such extents. */
#define GDU_IO_GATHER_PIECE ((uint64_t)256 << 10)

/* A gather chunk holds at most this many bytes: with the gaps it reads
 * over when it preads, only its extents' bytes when it copies from the
 * file's mapping (io_map.c). Fewer when the dispatch unit is smaller. Each
 * chunk is one copy to the GPU, and small copies cost the copy engine more
 * than their bytes: a column gather in chunks below 1 MiB takes several
 * times as long (bench/results/2026-12-02-h200-first-rank-and-chunks.md).
 * Against 1 and 4 MiB, 2 MiB keeps the 8-way first rank where 1 MiB had it
 * and the wider splits as fast as 4 MiB
 * (bench/results/2026-12-02-h200-gather-chunk.md); measured again once a
 * short queue moved in parts, 1 MiB made every column split slower and
 * 4 MiB the 8-way first rank of columns longer
 * (bench/results/2026-12-04-h200-full-run-and-gather-units.md). */
#define GDU_IO_GATHER_CHUNK ((uint64_t)2 << 20)

/* Within a gather chunk, extents whose file ranges lie at most this far
 * apart are read with one pread over the gap, which is then squeezed out in
 * staging. Measured with bench/gpu/gather_costs.c, a pread per piece of a
 * few KiB moves a small fraction of what whole 4 MiB reads do: one more read
 * call costs about what copying a gap of the order of this bound does
 * (bench/results/2026-12-01-h200-loader-patterns.md). */
#define GDU_IO_GATHER_GAP ((uint64_t)32 << 10)

/* While fewer chunks are queued than there are workers, a worker takes a
 * buffered read chunk a part at a time, cut so that the idle workers share
 * it: workers / queued parts of its dispatch unit, at most this many.
 * Otherwise a caller waiting for a request of a few chunks, or for the last
 * chunks of a load, waits for a whole chunk's time while most workers stand
 * idle. Each part costs a read and a copy of its own, and parts taken in
 * more than one round cost more than they save: get_tensor without
 * read-ahead of a tensor of 2 chunks was faster in parts of a quarter, but a
 * tensor of many chunks slower when every chunk of a queue shorter than the
 * workers was cut in four (bench/results/2026-12-04-h200-parts.md). */
#define GDU_IO_MAX_PARTS 4

/* Under e->qlock, for the worker that found c at the head of the queue:
 * true when it takes a part of c (into *part, whose next the caller clears;
 * c keeps the rest at the head and its request one chunk more to complete),
 * false when it takes all of c. */
bool gdu_io_take_part(gdu_io_engine *e, gdu_io_chunk *c, gdu_io_chunk *part);

struct gdu_io_request {
    gdu_io_file *file;
    gdu_io_op op;
    gdu_io_extent *ext;
    size_t n_ext;
    gdu_io_callback cb;
    void *user;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    size_t pending; /* chunks not yet completed */
    bool completed;
    int status;
    char why[GDU_IO_WHY];
    uint64_t *good_end; /* per extent: lowest file offset where good data stops */
    uint64_t bytes;     /* the extents' done, summed when the request finished */
    bool mapped;        /* its gather chunks copy from the file's mapping (io_map.c) */
    size_t n_chunks;
    gdu_io_chunk *chunks;
    /* A read of GDU_IO_PLAN_ON_WORKER extents or more is planned by a
     * worker: `planning` is queued in its chunks' place, and the chunks and
     * good_end live in `plan` (NULL otherwise: they follow the request). */
    gdu_io_chunk planning;
    void *plan;
    /* A request of a box (gdu_io_submit_box) owns its extents (`ext`, freed
     * with it). For a box of many runs `box` points into the request's
     * tail: the planning worker makes the extents from it, or, with none
     * (gdu_io_runs), the runs are computed from it where they are needed. */
    bool owns_ext;
    const gdu_io_box *box;
    /* A read submitted before its memory (gdu_io_submit_box_deferred): its
     * chunks' mem count from GDU_IO_UNPLACED until gdu_io_place gives the
     * memory, which moves them by `shift`; a worker holds a chunk read
     * into staging until then (gdu_io_chunk_mem). placement: 0 while
     * unplaced (the request is then on its file's unplaced list, under the
     * file's lock, for gdu_io_close to cancel), 1 placed, -1 cancelled. */
    bool deferred;
    _Atomic int placement;
    uintptr_t shift;
    struct gdu_io_request *unplaced_prev, *unplaced_next;
};

/* Where a deferred request's memory counts from until it is placed: a
 * stand-in address, never written through, 2 MiB-aligned as device
 * allocations are, so that nothing in planning sees memory at address 0. */
#define GDU_IO_UNPLACED ((uintptr_t)2 << 20)

/* Worker side: the memory chunk c copies to, in *mem: c->mem, or for a
 * deferred request its placed address, waited for. -ECANCELED, with why,
 * when the request was cancelled instead. */
int gdu_io_chunk_mem(const gdu_io_chunk *c, char **mem, char *why, size_t len);

/* Cancels f's deferred requests not placed yet (gdu_io_close, before it
 * waits for them). */
void gdu_io_cancel_unplaced(gdu_io_file *f);

/* The box of a gdu_io_submit_box request, as the caller gave it. */
struct gdu_io_box {
    uint64_t offset, length;
    void *mem;
    unsigned ndims;
    uint64_t counts[GDU_IO_BOX_MAX_DIMS], strides[GDU_IO_BOX_MAX_DIMS];
};

/* The runs a request moves, one per extent: the extents', or, for a box
 * kept whole (ext NULL, box of one dimension), computed from the box. A
 * box read on a worker is kept whole once its dimensions merge into one: a
 * rank's column slice is one run per row, and 40 bytes of extent a row were
 * memory a process's first rank of columns faulted in anew, thousands of
 * page faults a later rank does not take
 * (bench/results/2026-12-04-h200-first-rank-faults.md). */
typedef struct {
    const gdu_io_extent *ext;
    const gdu_io_box *box;
} gdu_io_runs;

static inline gdu_io_runs gdu_io_runs_of(const gdu_io_request *r)
{
    return (gdu_io_runs){r->ext, r->box};
}

static inline uint64_t gdu_io_run_offset(gdu_io_runs s, size_t k)
{
    return s.ext != NULL ? s.ext[k].offset : s.box->offset + (uint64_t)k * s.box->strides[0];
}

static inline uint64_t gdu_io_run_length(gdu_io_runs s, size_t k)
{
    return s.ext != NULL ? s.ext[k].length : s.box->length;
}

static inline char *gdu_io_run_mem(gdu_io_runs s, size_t k)
{
    return s.ext != NULL ? (char *)s.ext[k].mem : (char *)s.box->mem + (uint64_t)k * s.box->length;
}

/* From this many extents on, a read's chunks are planned on a worker
 * (gdu_io_request_plan) and the submitting thread only checks the extents.
 * Planning walks every extent several times: a rank's column of a [4096,
 * N] tensor is 4,096 extents. Where the caller's thread bounds the 8-way
 * column splits, a rank's submits took a fraction of the time with the
 * planning on the workers, and the later ranks were shorter
 * (bench/results/2026-12-02-h200-first-rank-prepare.md). */
#define GDU_IO_PLAN_ON_WORKER 256

/* Worker side: plans request r (its chunks, queued ahead of everything
 * queued after r), then completes the planning step of r. */
void gdu_io_request_plan(gdu_io_request *r);

/* The file a gather mapping shows. A kept mapping holds its inode, so no
 * other file can take its number while it is kept; the mapping is shared,
 * so it shows what the file holds now; only its length can be stale. */
typedef struct {
    uint64_t dev, ino, size;
} gdu_io_map_key;

/* A closed file's gather mapping is kept this long for the next open of the
 * same file: each open mapped its file afresh, and faulting the file in
 * again and unmapping the last mappings was a measurable part of an 8-way
 * rank of columns (bench/results/2026-12-04-h200-kept-mappings.md). At most
 * GDU_IO_MAX_KEPT_MAPS are kept, the oldest unmapped first. Meanwhile a
 * deleted file's blocks stay allocated. */
#define GDU_IO_KEEP_MAP_SECONDS 2.0
#define GDU_IO_MAX_KEPT_MAPS 64

/* An open file is mapped at most this many times: a file that keeps
 * growing while it is read gathers with pread after that. */
#define GDU_IO_MAX_MAPS_PER_OPEN 4

/* A file's gather mapping: an open file's, one a closed file left for the
 * workers to unmap when idle, or one kept for the next open of the same
 * file (key) until its time is up. */
typedef struct gdu_io_mapping {
    struct gdu_io_mapping *next;
    void *addr;
    size_t len;
    gdu_io_map_key key;
    double until; /* gdu_now_seconds() */
} gdu_io_mapping;

struct gdu_io_file {
    gdu_io_engine *engine;
    int fd;  /* buffered descriptor, always open */
    int dfd; /* O_DIRECT descriptor, or -1 */
    int flags;
    gdu_io_backend backend;
    atomic_bool direct_reads; /* cleared if the file system rejects an O_DIRECT transfer */
    atomic_bool direct_writes;
    gdu_CUfileHandle cf_handle;
    pthread_mutex_t lock;
    pthread_cond_t idle;
    size_t inflight;          /* requests submitted and not yet completed */
    gdu_io_request *unplaced; /* deferred requests not placed yet (under lock) */
    char reason[2 * GDU_IO_WHY];
    /* Gathers of a buffered file copy from a read-only mapping of it
     * (io_map.c), made at the first gather request (under lock) and made
     * anew when a request finds the file grown past it; the ones it
     * replaced stay mapped (workers may still copy from them) until close,
     * which hands them all to the engine to unmap. */
    bool gather_map_tried;
    gdu_io_mapping *_Atomic gather_map; /* NULL: gathers use pread */
    gdu_io_mapping *gather_replaced;    /* earlier mappings of it (under lock) */
    unsigned gather_maps;               /* mappings made for this open */
};

/* Whether reads of f may be gathered (and planned on a worker): cuFile
 * reads each extent straight into device memory, so it gathers nothing, and
 * writes move on their own. Inline: a worker asks it for every chunk it
 * takes. */
static inline bool gdu_io_may_gather(const gdu_io_file *f, gdu_io_op op)
{
    return op == GDU_IO_OP_READ && f->backend != GDU_IO_BACKEND_CUFILE;
}

typedef enum {
    GDU_IO_STAGING_FAULTING, /* mapped, workers faulting their first slots in */
    GDU_IO_STAGING_GROWING,  /* first slots pinned and in use; the others being pinned */
    GDU_IO_STAGING_PINNED,   /* the slots point into it (those it could not pin: on their own) */
    GDU_IO_STAGING_BY_SLOT,  /* no region (it failed, or cuFile needs none): slots on their own */
} gdu_io_staging_state;

typedef struct {
    void *buf;           /* chunk_size bytes, 4096-aligned */
    gdu_io_chunk *chunk; /* chunk whose copy is in flight, or NULL */
    uint64_t good;       /* reads: bytes being copied to caller memory */
    gdu_io_chunk part;   /* a part of a queued chunk moving here (gdu_io_take_part) */
} gdu_io_slot;

/* A worker creates its own streams and events on its own thread, and faults
 * in its part of the engine's staging (io_staging.c), so that an engine is
 * ready at once and its staging is pinned while the caller prepares its
 * first request. */
typedef struct {
    gdu_io_engine *engine;
    pthread_t thread;
    bool started;
    void *mctx;
    int init_status; /* worker_init's result, 0 once it succeeded */
    char init_why[GDU_IO_WHY];
    unsigned slots;     /* slots in use: staging_per_worker, fewer if pinning ran short */
    bool growing;       /* on its first slot until the region's others are pinned (under qlock) */
    unsigned prestaged; /* the engine's prestage round this worker has done */
    unsigned next_slot;
    gdu_io_slot slots_of[GDU_IO_MAX_STAGING];
} gdu_io_worker;

struct gdu_io_engine {
    gdu_io_options opt;
    gdu_io_backend backend;
    char reason[2 * GDU_IO_WHY];
    const gdu_io_mover *mover;
    gdu_io_sys sys;
    size_t read_piece; /* buffered reads: bytes per piece of a chunk */
    /* CUDA (not for HOST) */
    const gdu_cuda *cu;
    gdu_cuda_ctx primary; /* the GPU's primary context, retained while the engine lives */
    /* cuFile, when open */
    const gdu_cufile *cf;
    bool cufile_open;
    bool nvfs_loaded;
    char cufile_why[GDU_IO_WHY];
    struct gdu_io_ring *ring; /* the CUFILE backend's registered buffers (io_cufile.c) */
    /* work queue */
    pthread_mutex_t qlock;
    pthread_cond_t qcond;
    gdu_io_chunk *qhead, *qtail;
    size_t queued; /* chunks in the queue (a chunk parts are taken of counts once) */
    bool stopping;
    gdu_io_mapping *unmaps; /* closed files' gather mappings (io_map.c), under qlock */
    gdu_io_mapping *kept;   /* closed files' mappings kept for their next open, newest first */
    unsigned kept_count;
    double keep_map_seconds; /* GDU_IO_KEEP_MAP_SECONDS; tests change it */
    /* Staging (io_staging.c): one mapping for every worker's slots, its
     * state, the workers yet to fault their first slot and their others in,
     * and whether its second part is pinned (the first is once the state is
     * GROWING or PINNED; under qlock). */
    char *staging;
    size_t staging_bytes;
    bool staging_by_use; /* over GDU_IO_PRESTAGE_MAX: not faulted in, not pinned */
    gdu_io_staging_state staging_state;
    unsigned staging_faulting, staging_faulting_rest;
    bool staging_rest_pinned;
    /* Prestage rounds (the first starts with the engine): its round, the
     * workers yet to do it, the first failure (under qlock) */
    unsigned prestage_round, prestage_left;
    int prestage_status;
    char prestage_why[GDU_IO_WHY];
    pthread_cond_t prestage_cond;
    gdu_io_worker *workers;
    struct gdu_io_engine *tracked_next; /* the fork handler's list (io_map.c) */
    /* The process that made it. In a child of fork() its worker threads do
     * not exist and its locks may be held for ever (gdu_io_engine_foreign). */
    pid_t pid;
};

/* Whether e was made by another process: this one is a child of fork()
 * from it. Such an engine serves nothing here: every call that would wait
 * for its workers fails with -ESRCH (gdu_io_foreign_fail's why), and
 * destroying it, or closing a file of it, only lets go of this process's
 * copy. */
bool gdu_io_engine_foreign(const gdu_io_engine *e);
int gdu_io_foreign_fail(const gdu_io_engine *e, char *why, size_t len);

/* Staging (io_staging.c). gdu_io_staging_map maps one region for every
 * worker's slots (state FAULTING, or BY_SLOT where it cannot), in two parts:
 * the first slot of every worker, then their other slots. Each worker faults
 * its first slot in (gdu_io_staging_fault, on its thread), and the last one
 * pins the first part (gdu_io_staging_pin_first: 0 or a negative errno) and
 * settles it under qlock (gdu_io_staging_settle_first): the workers start on
 * their first slot (GROWING, or PINNED when they have one slot) or the region
 * is given up (BY_SLOT). Meanwhile each faults its other slots in, and the
 * last to finish pins the second part (gdu_io_staging_pin_rest, without
 * qlock: the other slots point into it; 0, or the pin's failure with why,
 * and the part unmapped) and then, under qlock, settles it
 * (gdu_io_staging_settle_rest: PINNED, or the region given up is unmapped).
 * Slots the second part could not provide are allocated on their own like
 * any other missing slot: by prestage's next round, or at first use. Without the region a slot is allocated on its own:
 * mapped, faulted in, pinned (NULL with why). gdu_io_staging_free releases
 * both kinds; the workers must have stopped. */
void gdu_io_staging_map(gdu_io_engine *e);
void gdu_io_staging_fault(gdu_io_engine *e, unsigned worker, bool first);
int gdu_io_staging_pin_first(gdu_io_engine *e);
void gdu_io_staging_settle_first(gdu_io_engine *e, int pinned);
int gdu_io_staging_pin_rest(gdu_io_engine *e, char *why, size_t len);
void gdu_io_staging_settle_rest(gdu_io_engine *e);
void *gdu_io_staging_slot_alloc(gdu_io_engine *e, char *why, size_t len);
void gdu_io_staging_free(gdu_io_engine *e);

/* gdu_io_engine_create with the mover replaced (mover NULL: the backend's);
 * tests count and fail staging with it. */
int gdu_io_engine_create_moving(const gdu_io_options *o, const gdu_io_mover *mover,
                                gdu_io_engine **out, char *why, size_t why_len);

/* Queues the n chunks of a request (already linked through ->next), after
 * what is queued or, with front, before it; and wakes as many idle workers
 * as there are chunks: a slice of a tensor is one or two chunks, and waking
 * all 16 workers for it had them contend for the queue's lock while the
 * caller queued the next. A worker that is not waiting looks at the queue
 * before it waits, so no chunk is left behind. Here rather than in
 * io_engine.c, so that the request files need nothing of it. */
static inline void gdu_io_engine_enqueue(gdu_io_engine *e, gdu_io_chunk *first, gdu_io_chunk *last,
                                         size_t n, bool front)
{
    pthread_mutex_lock(&e->qlock);
    e->queued += n;
    if (front) {
        last->next = e->qhead;
        e->qhead = first;
        if (e->qtail == NULL)
            e->qtail = last;
    } else {
        if (e->qtail != NULL)
            e->qtail->next = first;
        else
            e->qhead = first;
        e->qtail = last;
    }
    if (n >= e->opt.workers)
        pthread_cond_broadcast(&e->qcond);
    else
        for (size_t i = 0; i < n; i++)
            pthread_cond_signal(&e->qcond);
    pthread_mutex_unlock(&e->qlock);
}

/* How a request's extents split into chunks, before the chunks are made
 * (io_request_chunks.c). */
typedef struct {
    uint64_t unit;   /* the dispatch unit: the chunk size, or the read piece */
    bool mapped;     /* gathers copy from the file's mapping */
    size_t n_chunks; /* gather runs one each, others one per unit they touch */
} gdu_io_chunk_plan;

/* The plan of the n runs (checked) of an op on f, mapping the file when
 * they gather; -EINVAL when the chunk count overflows. */
int gdu_io_plan_chunks(gdu_io_file *f, gdu_io_op op, gdu_io_runs s, size_t n, gdu_io_chunk_plan *p);
/* The bytes gdu_io_build_chunks lays a plan out in, for n extents. */
size_t gdu_io_plan_bytes(const gdu_io_chunk_plan *p, size_t n);
/* Lays r's chunks and good_end out at room (gdu_io_plan_bytes of them),
 * fills the chunks (linked in order) and resets its extents' results, if it
 * has extents. */
void gdu_io_build_chunks(gdu_io_request *r, void *room, const gdu_io_chunk_plan *p);
/* The n runs of a sound box (its count checked), in row-major order. */
void gdu_io_box_fill(gdu_io_extent *ext, size_t n, uint64_t offset, const uint64_t *counts,
                     const uint64_t *strides, unsigned ndims, uint64_t length, void *mem);
/* Completes r: its extents' done, its callback, its waiters. */
void gdu_io_request_finish(gdu_io_request *r);

/* Worker side: records one chunk's outcome (good bytes from its start, 0 or
 * a negative errno with why) and completes the request after its last chunk. */
void gdu_io_chunk_done(gdu_io_chunk *c, uint64_t good, int status, const char *why);

/* File-side transfer of one chunk through a staging buffer. The chunk's data
 * sits at staging + (offset % GDU_IO_ALIGN) so that O_DIRECT sees aligned
 * memory; *data gets that address. read_into_staging returns the good bytes
 * (short only at end of file) or a negative errno. */
int64_t gdu_io_read_into_staging(gdu_io_file *f, const gdu_io_chunk *c, char *staging, char **data,
                                 char *why, size_t len);
int gdu_io_write_from_staging(gdu_io_file *f, const gdu_io_chunk *c, const char *staging, char *why,
                              size_t len);
/* File side of a gather chunk: its extents' bytes, one after another, into
 * staging, through the buffered descriptor, extents at most max_gap bytes
 * apart with one pread over the gap (0 for a chunk planned for the
 * mapping, whose gaps need not fit in the slot). Returns the good bytes (a
 * prefix: short only at end of file) or a negative errno. */
int64_t gdu_io_gather_into_staging(gdu_io_file *f, const gdu_io_chunk *c, uint64_t max_gap,
                                   char *staging, char *why, size_t len);
/* Gathers from the file's mapping (io_map.c). gdu_io_gather_mapped says
 * whether a read request's gather chunks copy from the mapping, making it
 * (or taking the one kept from the file's last close) at the first call
 * for a buffered file: not for O_DIRECT reads (a cold
 * file: faulting pages in one by one reads the disk in small pieces) nor
 * where it cannot be mapped (pread over the gaps then). Page faults on a
 * warm file cost little, and nothing is read over the gaps: measured with
 * bench/gpu/gather_costs.c, pieces of a column came out of a fresh mapping
 * faster than out of whole rows read, of whose bytes the pieces are only a
 * quarter or an eighth (bench/results/2026-12-02-h200-column-routes.md). */
bool gdu_io_gather_mapped(gdu_io_file *f);
/* Copies gather chunk c's extents from the mapping into staging, one after
 * another. The file's size now bounds it: a file cut short since it was
 * mapped gives a short chunk, as a pread would. A file cut while the copy
 * runs (SIGBUS, caught by gdu_io_map_guard), or grown past the mapping the
 * request was planned with, is read with pread instead, which gives what
 * a pread gives: the bytes up to the new end, or the storage's error.
 * Returns the good bytes or a negative errno. */
int64_t gdu_io_gather_from_map(gdu_io_file *f, const gdu_io_chunk *c, char *staging, char *why,
                               size_t len);
/* At close: hands the file's mapping to the engine, which keeps it for the
 * file's next open (GDU_IO_KEEP_MAP_SECONDS) and then has its workers unmap it
 * when idle (tearing down a mapping of every page of a shard is slow, and a
 * caller closing files need not wait for it;
 * bench/results/2026-12-04-h200-kept-mappings.md). */
void gdu_io_gather_unmap_later(gdu_io_file *f);
/* Unmaps the file's mappings at once: a child of fork() closing its copy
 * of a parent's file. */
void gdu_io_gather_unmap_now(gdu_io_file *f);
/* Runs copy(arg), which reads only from [lo, lo + len) of a mapping, and
 * returns 0; or -EFAULT when a read there faulted (SIGBUS: the file was
 * cut, or its storage failed), copy left where it was; or -ENOTSUP,
 * without running it, where the guard's SIGBUS handler is not the one in
 * place (io_map_guard.c). */
int gdu_io_map_guard(const void *lo, size_t len, void (*copy)(void *arg), void *arg);
/* Puts the guard's SIGBUS handler in front of the one in place, which must
 * not pass signals on to the guard's (the first guarded copy does it once;
 * tests, after their framework set its own for the test). */
void gdu_io_map_guard_take_over(void);
/* Every engine is known to a fork handler, so that a child of fork()
 * unmaps the mappings its engines kept for closed files: they would hold
 * deleted files' blocks for the child's whole life. track at create,
 * untrack at destroy. */
void gdu_io_maps_track(gdu_io_engine *e);
void gdu_io_maps_untrack(gdu_io_engine *e);
/* Under e->qlock: unmaps one handed-over mapping (dropping the lock
 * meanwhile); false when there was none. */
bool gdu_io_unmap_one(gdu_io_engine *e);
/* Under e->qlock, for an idle worker: hands the kept mappings whose time is
 * up (all of them when the engine stops) over to be unmapped and returns
 * true if there were any; otherwise sets *wake (CLOCK_MONOTONIC, the clock
 * of gdu_now_seconds) to when the next one is due and returns false (*wake
 * untouched if none is kept). */
bool gdu_io_expire_kept(gdu_io_engine *e, struct timespec *wake, bool *has_wake);

/* Where the chunk's data starts in a staging slot. */
static inline size_t gdu_io_staging_skip(uint64_t offset)
{
    return (size_t)(offset % GDU_IO_ALIGN);
}

/* cuFile: engine setup (driver open, nvidia-fs detection), per-file handle
 * registration, and a chunk moved straight to/from caller memory. */
int gdu_io_cufile_engine_init(gdu_io_engine *e, char *why, size_t len);
/* Whether the nvidia-fs kernel module is loaded: its procfs folder exists
 * (/proc/driver/nvidia-fs, or $GDUNLOCK_NVFS_PROC where tests fake one). A
 * cheap check AUTO makes before it opens cuFile's driver, which costs
 * hundreds of milliseconds and without nvidia-fs could only give compat mode. */
bool gdu_io_nvfs_present(void);
void gdu_io_cufile_engine_fini(gdu_io_engine *e);
/* Registers the CUFILE backend's ring of device buffers, at most the BAR1
 * budget of the kernel's pin (pin_model.h) for this GPU: the BAR1 size from
 * sysfs or $GDUNLOCK_TEST_BAR1 (a test setting that simulates a small BAR1,
 * e.g. 256M). Writes what it registered into note. -ENOSPC when not even
 * one buffer fits. */
int gdu_io_cufile_ring_init(gdu_io_engine *e, char *note, size_t len);
/* The ring's description for reasons ("" without a ring). */
const char *gdu_io_cufile_ring_note(const gdu_io_engine *e);
/* Bytes the ring registered with cuFileBufRegister (0 without a ring). */
uint64_t gdu_io_cufile_ring_registered(const gdu_io_engine *e);
int gdu_io_cufile_register(gdu_io_file *f, const char *path, char *why, size_t len);
void gdu_io_cufile_deregister(gdu_io_file *f);
int gdu_io_cufile_chunk(gdu_io_file *f, gdu_io_op op, const gdu_io_chunk *c, uint64_t *good,
                        char *why, size_t len);

/* Makes the engine's CUDA context current on the calling thread; returns the
 * previous one through *prev (may be NULL). Here rather than in io_engine.c,
 * so that io_cufile.c needs nothing of it. */
static inline int gdu_io_cuda_enter(gdu_io_engine *e, gdu_CUcontext *prev, char *why, size_t len)
{
    return gdu_cuda_ctx_make_current(e->cu, e->primary.ctx, prev, why, len) == GDU_CUDA_SUCCESS
               ? 0
               : -EIO;
}

#endif
