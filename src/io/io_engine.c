/* The engine: options, CUDA context, staging memory and the worker pool that
 * moves queued chunks. Each worker cycles through its staging slots so that
 * the file I/O of one chunk overlaps the memory copies of the previous ones. */
#include "io/io_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static ssize_t sys_pread(int fd, void *buf, size_t n, off_t off) { return pread(fd, buf, n, off); }
static ssize_t sys_pwrite(int fd, const void *buf, size_t n, off_t off)
{
    return pwrite(fd, buf, n, off);
}
static int sys_resident(void *map, uint64_t offset, size_t len, unsigned char *vec)
{
    return mincore((char *)map + offset, len, vec);
}
static void *sys_map(int fd, size_t len) { return mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0); }
static const gdu_io_sys default_sys = {sys_pread, sys_pwrite, sys_resident, sys_map};

void gdu_io_engine_set_sys(gdu_io_engine *e, const gdu_io_sys *sys)
{
    e->sys = sys != NULL ? *sys : default_sys;
    if (e->sys.pread == NULL)
        e->sys.pread = sys_pread;
    if (e->sys.pwrite == NULL)
        e->sys.pwrite = sys_pwrite;
    if (e->sys.resident == NULL)
        e->sys.resident = sys_resident;
    if (e->sys.map == NULL)
        e->sys.map = sys_map;
}

void gdu_io_engine_set_read_piece(gdu_io_engine *e, size_t bytes) { e->read_piece = bytes; }

bool gdu_io_engine_foreign(const gdu_io_engine *e) { return e->pid != getpid(); }

int gdu_io_foreign_fail(const gdu_io_engine *e, char *why, size_t len)
{
    if (why != NULL && len > 0)
        snprintf(why, len,
                 "the I/O engine was made by process %ld, before this process was forked from "
                 "it: its worker threads are not in this process; make an engine here",
                 (long)e->pid);
    return -ESRCH;
}

const gdu_io_options *gdu_io_engine_options(const gdu_io_engine *e) { return e ? &e->opt : NULL; }
gdu_io_backend gdu_io_engine_backend(const gdu_io_engine *e)
{
    return e ? e->backend : GDU_IO_BACKEND_AUTO;
}
const char *gdu_io_engine_reason(const gdu_io_engine *e) { return e ? e->reason : ""; }
int gdu_io_engine_direct_storage(const gdu_io_engine *e)
{
    return e && e->cufile_open && e->nvfs_loaded;
}

/* Under e->qlock: starts a prestage round. Every worker makes the staging it
 * lacks (its part of the region in the first round, slots on their own
 * where the region did not provide them) before it takes another chunk, and
 * none takes one until all have (may_take). */
static void start_prestage(gdu_io_engine *e)
{
    e->prestage_round++;
    e->prestage_left = e->opt.workers;
    e->prestage_status = 0;
    pthread_cond_broadcast(&e->qcond);
}

/* Completes the chunk whose copy is in flight in slot i (waiting for the
 * copy; for writes, then writing the staged data to the file). */
static void slot_finish(gdu_io_worker *w, unsigned i)
{
    gdu_io_engine *e = w->engine;
    gdu_io_slot *s = &w->slots_of[i];
    gdu_io_chunk *c = s->chunk;
    if (c == NULL)
        return;
    s->chunk = NULL;
    char why[GDU_IO_WHY] = "";
    int r = e->mover->wait(w->mctx, i, why, sizeof why);
    if (r != 0) {
        gdu_io_chunk_done(c, 0, r, why);
    } else if (c->req->op == GDU_IO_OP_READ) {
        gdu_io_chunk_done(c, s->good, 0, NULL);
    } else {
        r = gdu_io_write_from_staging(c->req->file, c, s->buf, why, sizeof why);
        gdu_io_chunk_done(c, r == 0 ? c->length : 0, r, why);
    }
}

/* Reads chunk c into slot i and queues its copy to caller memory. A
 * buffered read goes in pieces, each piece's copy queued as soon as the
 * piece is in staging: the copy engine then reads bytes the CPU has just
 * written (still in its caches), and the first copy starts sooner. Requests
 * already hand buffered reads to the workers piece by piece (dispatch_unit
 * in io_request_chunks.c); a whole chunk arrives here buffered only when the file
 * system refused O_DIRECT after the request was split. Piece
 * boundaries fall on multiples of the piece size, so every piece after the
 * first starts 4 KiB-aligned in the slot, as O_DIRECT needs. On success the
 * slot holds the chunk (its last copy in flight); on failure the copies
 * already queued are waited for and the chunk completes with the good
 * prefix and the error. */
static void read_chunk(gdu_io_worker *w, unsigned i, gdu_io_chunk *c)
{
    gdu_io_engine *e = w->engine;
    gdu_io_file *f = c->req->file;
    gdu_io_slot *s = &w->slots_of[i];
    char why[GDU_IO_WHY] = "";
    bool whole = atomic_load(&f->direct_reads); /* O_DIRECT: one read per chunk */
    uint64_t piece = e->read_piece, end = c->offset + c->length;
    uint64_t base = c->offset - gdu_io_staging_skip(c->offset), done = 0;
    char *mem = NULL; /* known once the first piece is in staging (gdu_io_chunk_mem) */
    int r = 0;
    while (done < c->length) {
        gdu_io_chunk p = *c;
        p.offset = c->offset + done;
        uint64_t stop = whole ? end : (p.offset / piece + 1) * piece;
        p.length = (stop < end ? stop : end) - p.offset;
        char *at = (char *)s->buf + (p.offset - gdu_io_staging_skip(p.offset) - base);
        char *data = NULL;
        int64_t got = gdu_io_read_into_staging(f, &p, at, &data, why, sizeof why);
        if (got < 0) {
            r = (int)got;
            break;
        }
        if (got > 0 && mem == NULL && (r = gdu_io_chunk_mem(c, &mem, why, sizeof why)) != 0)
            break;
        if (got > 0 &&
            (r = e->mover->to_mem(w->mctx, i, mem + done, data, (size_t)got, why, sizeof why)) != 0)
            break;
        done += (uint64_t)got;
        if ((uint64_t)got < p.length) /* end of file */
            break;
    }
    if (r == 0 && done > 0) {
        s->good = done;
        s->chunk = c;
        return;
    }
    char wwhy[GDU_IO_WHY] = "";
    if (done > 0 && e->mover->wait(w->mctx, i, wwhy, sizeof wwhy) != 0)
        done = 0; /* the copies of the good prefix failed too */
    gdu_io_chunk_done(c, done, r, why);
}

/* Reads gather chunk c (its extents one after another) into slot i, from
 * the file's mapping or with preads, and queues one copy of them all to
 * caller memory. */
static void read_gather(gdu_io_worker *w, unsigned i, gdu_io_chunk *c, bool mapped)
{
    gdu_io_engine *e = w->engine;
    gdu_io_slot *s = &w->slots_of[i];
    char why[GDU_IO_WHY] = "";
    int64_t got = mapped ? gdu_io_gather_from_map(c->req->file, c, s->buf, why, sizeof why)
                         : gdu_io_gather_into_staging(c->req->file, c, GDU_IO_GATHER_GAP, s->buf,
                                                      why, sizeof why);
    int r = got < 0 ? (int)got : 0;
    char *mem = NULL;
    if (got > 0 && (r = gdu_io_chunk_mem(c, &mem, why, sizeof why)) == 0 &&
        (r = e->mover->to_mem(w->mctx, i, mem, s->buf, (size_t)got, why, sizeof why)) == 0) {
        s->good = (uint64_t)got;
        s->chunk = c;
        return;
    }
    gdu_io_chunk_done(c, 0, r, why);
}

/* Allocates slot i's staging buffer if the worker's prestage could not. A
 * slot after the first that cannot be allocated leaves the worker with the
 * slots before it (and *i moves to slot 0); slot 0 failing fails the chunk
 * (why), and is tried again with the next one. */
static int slot_ready(gdu_io_worker *w, unsigned *i, char *why, size_t len)
{
    gdu_io_engine *e = w->engine;
    gdu_io_slot *s = &w->slots_of[*i];
    if (s->buf == NULL)
        s->buf = gdu_io_staging_slot_alloc(e, why, len);
    if (s->buf != NULL)
        return 0;
    if (*i == 0)
        return -ENOMEM;
    w->slots = *i;
    *i = 0;
    w->next_slot = 1 % w->slots;
    slot_finish(w, 0);
    return slot_ready(w, i, why, len);
}

/* Starts one chunk: file read into a staging slot then asynchronous copies
 * to caller memory, or (writes) an asynchronous copy into the slot. A part
 * of a chunk (gdu_io_take_part) is kept in its slot while it moves. */
static void slot_start(gdu_io_worker *w, gdu_io_chunk *c, bool part)
{
    gdu_io_engine *e = w->engine;
    gdu_io_file *f = c->req->file;
    char why[GDU_IO_WHY] = "";
    if (w->init_status != 0) {
        gdu_io_chunk_done(c, 0, w->init_status, w->init_why);
        return;
    }
    if (f->backend == GDU_IO_BACKEND_CUFILE) { /* straight into the memory: it must be there */
        uint64_t good = 0;
        gdu_io_chunk placed = *c;
        int r = gdu_io_chunk_mem(c, &placed.mem, why, sizeof why);
        if (r == 0)
            r = gdu_io_cufile_chunk(f, c->req->op, &placed, &good, why, sizeof why);
        gdu_io_chunk_done(c, good, r, why);
        return;
    }
    unsigned i = w->next_slot;
    w->next_slot = (i + 1) % w->slots;
    slot_finish(w, i);
    int r = slot_ready(w, &i, why, sizeof why);
    if (r != 0) {
        gdu_io_chunk_done(c, 0, r, why);
        return;
    }
    if (part) {
        w->slots_of[i].part = *c;
        c = &w->slots_of[i].part;
    }
    if (c->req->op == GDU_IO_OP_READ) {
        if (c->pieces > 1)
            read_gather(w, i, c, c->req->mapped);
        else
            read_chunk(w, i, c);
        return;
    }
    gdu_io_slot *s = &w->slots_of[i];
    r = e->mover->from_mem(w->mctx, i, (char *)s->buf + gdu_io_staging_skip(c->offset), c->mem,
                           (size_t)c->length, why, sizeof why);
    if (r != 0)
        gdu_io_chunk_done(c, 0, r, why);
    else
        s->chunk = c;
}

static bool has_inflight(const gdu_io_worker *w)
{
    for (unsigned i = 0; i < w->slots; i++)
        if (w->slots_of[i].chunk != NULL)
            return true;
    return false;
}

/* Completes every in-flight slot, oldest first. */
static void drain(gdu_io_worker *w)
{
    unsigned k = w->slots;
    for (unsigned j = 0; j < k; j++)
        slot_finish(w, (w->next_slot + j) % k);
}

/* Completes the slots whose copies have already finished, without blocking,
 * so that requests complete promptly while the queue stays busy. */
static void reap_ready(gdu_io_worker *w)
{
    gdu_io_engine *e = w->engine;
    unsigned k = w->slots;
    for (unsigned j = 0; j < k; j++) {
        unsigned i = (w->next_slot + j) % k;
        if (w->slots_of[i].chunk != NULL && e->mover->ready(w->mctx, i))
            slot_finish(w, i);
    }
}

/* Under e->qlock: worker w's part in the engine's staging region. It faults
 * its first slot in (dropping the lock meanwhile), and the last worker to do
 * so pins the region's first part; then it faults its other slots in. It
 * returns once the first part is settled (or the engine stops): the workers
 * start on their first slot while the rest is pinned. True for the last
 * worker to fault its other slots in, which settles the second part once
 * its own round is done (settle_rest). */
static bool stage_region(gdu_io_worker *w)
{
    gdu_io_engine *e = w->engine;
    if (e->staging_state != GDU_IO_STAGING_FAULTING)
        return false;
    unsigned self = (unsigned)(w - e->workers);
    pthread_mutex_unlock(&e->qlock);
    gdu_io_staging_fault(e, self, true);
    pthread_mutex_lock(&e->qlock);
    if (--e->staging_faulting == 0) {
        pthread_mutex_unlock(&e->qlock);
        int pinned = gdu_io_staging_pin_first(e);
        pthread_mutex_lock(&e->qlock);
        gdu_io_staging_settle_first(e, pinned); /* on failure, slots are pinned one by one */
        pthread_cond_broadcast(&e->qcond);
    }
    bool last = false;
    if (e->opt.staging_per_worker > 1) {
        pthread_mutex_unlock(&e->qlock);
        gdu_io_staging_fault(e, self, false);
        pthread_mutex_lock(&e->qlock);
        /* The last is after the first part's settling: its pinner faults its
         * own other slots only then. */
        last = --e->staging_faulting_rest == 0;
    }
    while (e->staging_state == GDU_IO_STAGING_FAULTING && !e->stopping)
        pthread_cond_wait(&e->qcond, &e->qlock);
    return last;
}

/* Under e->qlock, which it drops while it pins: the region's second part
 * pinned and settled, or the region given up by the first part unmapped.
 * Outside the prestage round that made it, so that no chunk waits for it. A
 * second part that cannot be pinned is the round's failure: prestage() runs
 * another, in which each worker allocates the slots it lacks on their own
 * (and without prestage(), slot_ready does at their first use). */
static void settle_rest(gdu_io_engine *e)
{
    char why[GDU_IO_WHY] = "";
    int status = 0;
    if (e->staging_state == GDU_IO_STAGING_GROWING) {
        pthread_mutex_unlock(&e->qlock);
        status = gdu_io_staging_pin_rest(e, why, sizeof why);
        pthread_mutex_lock(&e->qlock);
    }
    gdu_io_staging_settle_rest(e);
    if (status != 0 && e->prestage_status == 0) {
        e->prestage_status = status;
        snprintf(e->prestage_why, sizeof e->prestage_why, "%s", why);
    }
    pthread_cond_broadcast(&e->qcond);
    pthread_cond_broadcast(&e->prestage_cond);
}

/* Under e->qlock: a worker on its first slot takes up the others once the
 * region's second part is settled (those it could not pin are allocated on
 * their own when first used). */
static void grow(gdu_io_worker *w)
{
    if (w->growing && w->engine->staging_state != GDU_IO_STAGING_GROWING) {
        w->slots = w->engine->opt.staging_per_worker;
        w->growing = false;
    }
}

/* On the worker's thread: its part of a prestage round. Under e->qlock,
 * which it drops while it works: the staging region, then every slot the
 * region did not provide, allocated on its own. */
static void prestage_worker(gdu_io_worker *w)
{
    gdu_io_engine *e = w->engine;
    unsigned round = e->prestage_round;
    bool pins_rest = stage_region(w);
    /* Stopped before the region was settled: no slots of its own either
     * (settling may still point them into the region). */
    bool settled = e->staging_state != GDU_IO_STAGING_FAULTING;
    /* While the region's second part is pinned, its pinner points the slots
     * after the first into it without the lock (gdu_io_staging_pin_rest):
     * they are looked at once it is settled (grow). A worker that left the
     * wait as the engine stopped still has all its slots counted. */
    unsigned slots = e->staging_state == GDU_IO_STAGING_GROWING ? 1 : w->slots;
    pthread_mutex_unlock(&e->qlock);
    char why[GDU_IO_WHY] = "";
    int status = w->init_status;
    if (status != 0)
        snprintf(why, sizeof why, "%s", w->init_why);
    for (unsigned j = 0; settled && status == 0 && e->backend != GDU_IO_BACKEND_CUFILE && j < slots;
         j++) {
        if (w->slots_of[j].buf == NULL)
            w->slots_of[j].buf = gdu_io_staging_slot_alloc(e, why, sizeof why);
        if (w->slots_of[j].buf == NULL) {
            status = -ENOMEM;
            if (j > 0) /* the worker goes on with the slots it has */
                w->slots = j;
        }
    }
    pthread_mutex_lock(&e->qlock);
    w->prestaged = round;
    if (status != 0 && e->prestage_status == 0) {
        e->prestage_status = status;
        snprintf(e->prestage_why, sizeof e->prestage_why, "%s", why);
    }
    if (--e->prestage_left == 0) {
        pthread_cond_broadcast(&e->prestage_cond);
        pthread_cond_broadcast(&e->qcond); /* workers waiting to take chunks */
    }
    if (pins_rest)
        settle_rest(e);
}

/* Under e->qlock: whether worker w may take the next chunk (false: wait).
 * Does its part of a prestage round and drains its own copies meanwhile. No
 * chunk starts during a round: in the first, the slots exist only once the
 * region's first part is pinned. */
static bool may_take(gdu_io_worker *w)
{
    gdu_io_engine *e = w->engine;
    if (e->stopping && e->qhead == NULL)
        return true; /* and finds nothing: the worker ends */
    grow(w);
    if (w->prestaged != e->prestage_round) {
        prestage_worker(w);
        return false;
    }
    if (e->qhead != NULL && e->prestage_left == 0)
        return true;
    if (has_inflight(w)) {
        pthread_mutex_unlock(&e->qlock);
        drain(w);
        pthread_mutex_lock(&e->qlock);
        return false;
    }
    if (gdu_io_unmap_one(e)) /* idle: a closed file's mapping */
        return false;
    struct timespec wake;
    bool has_wake = false;
    if (gdu_io_expire_kept(e, &wake, &has_wake)) /* kept mappings whose time is up */
        return false;
    if (has_wake)
        pthread_cond_timedwait(&e->qcond, &e->qlock, &wake);
    else
        pthread_cond_wait(&e->qcond, &e->qlock);
    return false;
}

static void *worker_main(void *arg)
{
    gdu_io_worker *w = arg;
    gdu_io_engine *e = w->engine;
    int enter = e->mover->thread_enter(e);
    if (enter == 0)
        w->init_status = e->mover->worker_init(e, e->opt.staging_per_worker, &w->mctx, w->init_why,
                                               sizeof w->init_why);
    else
        snprintf(w->init_why, sizeof w->init_why,
                 "worker thread could not make the CUDA context current");
    for (;;) {
        pthread_mutex_lock(&e->qlock);
        while (!may_take(w))
            ;
        gdu_io_chunk *c = e->qhead;
        if (c == NULL) { /* stopping and nothing left */
            pthread_mutex_unlock(&e->qlock);
            break;
        }
        gdu_io_chunk part;
        bool split = gdu_io_take_part(e, c, &part);
        if (split) {
            c = &part;
            pthread_cond_broadcast(&e->qcond); /* the idle workers take the other parts */
        } else {
            e->qhead = c->next;
            if (e->qhead == NULL)
                e->qtail = NULL;
            e->queued--;
        }
        pthread_mutex_unlock(&e->qlock);
        c->next = NULL;
        if (c == &c->req->planning)
            gdu_io_request_plan(c->req);
        else if (enter != 0)
            gdu_io_chunk_done(c, 0, enter, "worker thread could not make the CUDA context current");
        else
            slot_start(w, c, split);
        reap_ready(w);
    }
    drain(w);
    return NULL;
}

/* Zero fields take the process's defaults; what the caller set stays. */
static int fill_options(gdu_io_options *o, char *why, size_t len)
{
    gdu_io_options d;
    int r = gdu_io_options_default(&d, why, len);
    if (r != 0)
        return r;
    if (o->workers == 0)
        o->workers = d.workers;
    if (o->staging_per_worker == 0)
        o->staging_per_worker = d.staging_per_worker;
    if (o->chunk_size == 0) /* the direct mode in force picks it */
        o->chunk_size = o->direct == GDU_IO_DIRECT_ON ? GDU_IO_DEFAULT_DIRECT_CHUNK : d.chunk_size;
    if (o->workers > GDU_IO_MAX_WORKERS || o->staging_per_worker > GDU_IO_MAX_STAGING ||
        o->chunk_size % GDU_IO_ALIGN != 0 || o->chunk_size > GDU_IO_MAX_CHUNK ||
        (unsigned)o->backend > GDU_IO_BACKEND_HOST || (unsigned)o->direct > GDU_IO_DIRECT_OFF) {
        snprintf(why, len,
                 "invalid I/O options: workers 1..%u, staging 1..%u, chunk a multiple of 4 KiB "
                 "up to 1 GiB (got workers %u, staging %u, chunk %zu)",
                 GDU_IO_MAX_WORKERS, GDU_IO_MAX_STAGING, o->workers, o->staging_per_worker,
                 o->chunk_size);
        return -EINVAL;
    }
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t memory = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
    return gdu_io_options_bound_staging(o, memory, why, len);
}

static int setup_cuda(gdu_io_engine *e, char *why, size_t len)
{
    char cwhy[GDU_IO_WHY] = "";
    e->cu = gdu_cuda_load(cwhy, sizeof cwhy);
    if (e->cu == NULL) {
        snprintf(why, len, "CUDA unavailable: %s", cwhy);
        return -ENODEV;
    }
    gdu_CUdevice dev;
    gdu_CUresult r = e->cu->cuDeviceGet(&dev, e->opt.device);
    if (r != GDU_CUDA_SUCCESS) {
        snprintf(why, len, "GPU %d unavailable: %s", e->opt.device, gdu_cuda_result_name(r));
        return -ENODEV;
    }
    char retain_why[GDU_IO_WHY];
    if (gdu_cuda_ctx_retain(e->cu, e->opt.device, &e->primary, retain_why, sizeof retain_why) !=
        GDU_CUDA_SUCCESS) {
        snprintf(why, len, "GPU %d: %s", e->opt.device, retain_why);
        return -ENODEV;
    }
    return 0;
}

/* Chooses the engine-level backend and records why. */
static int choose_backend(gdu_io_engine *e, char *why, size_t len)
{
    gdu_io_backend want = e->opt.backend;
    if (want == GDU_IO_BACKEND_HOST) {
        e->backend = GDU_IO_BACKEND_HOST;
        e->mover = &gdu_io_mover_host;
        snprintf(e->reason, sizeof e->reason, "host: host memory requested");
        return 0;
    }
    int r = setup_cuda(e, why, len);
    if (r != 0)
        return r;
    e->mover = &gdu_io_mover_cuda;
    if (want == GDU_IO_BACKEND_PIPELINE) {
        e->backend = GDU_IO_BACKEND_PIPELINE;
        snprintf(e->reason, sizeof e->reason, "pipeline: requested");
        return 0;
    }
    if (want == GDU_IO_BACKEND_AUTO && !gdu_io_nvfs_present()) {
        /* No direct path can exist: do not pay for cuFileDriverOpen. */
        e->backend = GDU_IO_BACKEND_PIPELINE;
        snprintf(e->reason, sizeof e->reason,
                 "pipeline: cufile not tried: nvidia-fs not loaded (no /proc/driver/nvidia-fs; "
                 "cuFile could only run in compat mode, through the CPU)");
        return 0;
    }
    r = gdu_io_cufile_engine_init(e, e->cufile_why, sizeof e->cufile_why);
    char ring[GDU_IO_WHY] = "";
    if (want == GDU_IO_BACKEND_CUFILE) {
        if (r == 0 && (r = gdu_io_cufile_ring_init(e, ring, sizeof ring)) != 0)
            snprintf(e->cufile_why, sizeof e->cufile_why, "%s", ring);
        if (r != 0) {
            snprintf(why, len, "cufile unavailable: %s", e->cufile_why);
            return r;
        }
        e->backend = GDU_IO_BACKEND_CUFILE;
        snprintf(e->reason, sizeof e->reason, "cufile: requested (%s); %s",
                 e->nvfs_loaded ? "nvidia-fs loaded" : "compat mode, nvidia-fs not loaded", ring);
        return 0;
    }
    if (r == 0 && e->nvfs_loaded && (r = gdu_io_cufile_ring_init(e, ring, sizeof ring)) != 0)
        snprintf(e->cufile_why, sizeof e->cufile_why, "%s", ring);
    if (r == 0 && e->nvfs_loaded) {
        e->backend = GDU_IO_BACKEND_CUFILE;
        snprintf(e->reason, sizeof e->reason, "cufile: nvidia-fs loaded; %s", ring);
    } else {
        e->backend = GDU_IO_BACKEND_PIPELINE;
        snprintf(e->reason, sizeof e->reason, "pipeline: cufile unavailable: %s",
                 r != 0 ? e->cufile_why : "nvidia-fs not loaded (cuFile would run in compat mode)");
        gdu_io_cufile_engine_fini(e); /* compat mode would only bounce through the CPU */
    }
    return 0;
}

/* Starts the worker threads; each sets itself up (worker_main). */
static int start_workers(gdu_io_engine *e, char *why, size_t len)
{
    unsigned n = e->opt.workers;
    e->workers = calloc(n, sizeof *e->workers);
    if (e->workers == NULL)
        return -ENOMEM;
    for (unsigned i = 0; i < n; i++) {
        e->workers[i].engine = e;
        e->workers[i].slots = e->opt.staging_per_worker;
    }
    for (unsigned i = 0; i < n; i++) {
        int r = pthread_create(&e->workers[i].thread, NULL, worker_main, &e->workers[i]);
        if (r != 0) {
            snprintf(why, len, "cannot start I/O worker thread: %s", strerror(r));
            return -r;
        }
        e->workers[i].started = true;
        /* Named for the user's top and debugger, and for tests that count
         * the engines a process keeps (a name of at most 15 bytes). */
        char name[16];
        snprintf(name, sizeof name, "gdu-io-%u", i & 0xffffu); /* workers: at most 256 */
        pthread_setname_np(e->workers[i].thread, name);
    }
    return 0;
}

/* An engine of options o (the defaults for NULL; checked later), its
 * queue's lock and conditions made and its mappings tracked across fork;
 * nothing started yet. NULL without memory. */
static gdu_io_engine *engine_new(const gdu_io_options *o)
{
    gdu_io_engine *e = calloc(1, sizeof *e);
    if (e == NULL)
        return NULL;
    if (o != NULL)
        e->opt = *o;
    else
        gdu_io_options_default(&e->opt, NULL, 0); /* fill_options reports a bad setting */
    e->sys = default_sys;
    e->pid = getpid();
    pthread_mutex_init(&e->qlock, NULL);
    pthread_condattr_t monotonic; /* idle workers wait for kept mappings' times by it */
    pthread_condattr_init(&monotonic);
    pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
    pthread_cond_init(&e->qcond, &monotonic);
    pthread_condattr_destroy(&monotonic);
    e->keep_map_seconds = GDU_IO_KEEP_MAP_SECONDS;
    pthread_cond_init(&e->prestage_cond, NULL);
    gdu_io_maps_track(e);
    return e;
}

int gdu_io_engine_create(const gdu_io_options *o, gdu_io_engine **out, char *why, size_t why_len)
{
    return gdu_io_engine_create_moving(o, NULL, out, why, why_len);
}

int gdu_io_engine_create_moving(const gdu_io_options *o, const gdu_io_mover *mover,
                                gdu_io_engine **out, char *why, size_t why_len)
{
    char scratch[GDU_IO_WHY];
    if (why == NULL || why_len == 0) {
        why = scratch;
        why_len = sizeof scratch;
    }
    why[0] = '\0';
    if (out == NULL)
        return -EINVAL;
    *out = NULL;
    gdu_io_engine *e = engine_new(o);
    if (e == NULL)
        return -ENOMEM;
    int r = fill_options(&e->opt, why, why_len);
    e->read_piece = e->opt.chunk_size < GDU_IO_READ_PIECE ? e->opt.chunk_size : GDU_IO_READ_PIECE;
    if (r == 0)
        r = choose_backend(e, why, why_len);
    if (r == 0) {
        if (mover != NULL)
            e->mover = mover;
        /* Staging is made at once, in the background: the first round is
         * done while the caller prepares its first request. */
        if (e->backend != GDU_IO_BACKEND_CUFILE)
            gdu_io_staging_map(e);
        else
            e->staging_state = GDU_IO_STAGING_BY_SLOT;
        start_prestage(e);
    }
    gdu_CUcontext prev = NULL;
    bool entered = false;
    if (r == 0 && e->cu != NULL) {
        r = gdu_io_cuda_enter(e, &prev, why, why_len);
        entered = r == 0;
    }
    if (r == 0)
        r = start_workers(e, why, why_len);
    if (entered)
        gdu_cuda_ctx_restore(e->cu, prev);
    if (r != 0) {
        if (why[0] == '\0')
            snprintf(why, why_len, "cannot create the I/O engine: %s", strerror(-r));
        gdu_io_engine_destroy(e);
        return r;
    }
    *out = e;
    return 0;
}

/* Under e->qlock, after a round: whether a worker went on with fewer slots. */
static bool short_of_staging(const gdu_io_engine *e)
{
    for (unsigned i = 0; i < e->opt.workers; i++)
        if (e->workers[i].slots < e->opt.staging_per_worker && !e->workers[i].growing)
            return true;
    return false;
}

int gdu_io_engine_prestage(gdu_io_engine *e, char *why, size_t why_len)
{
    if (e == NULL)
        return -EINVAL;
    if (gdu_io_engine_foreign(e))
        return gdu_io_foreign_fail(e, why, why_len);
    pthread_mutex_lock(&e->qlock);
    /* the round the engine started with, and the region's second part */
    while (e->prestage_left != 0 || (e->staging_state == GDU_IO_STAGING_GROWING && !e->stopping))
        pthread_cond_wait(&e->prestage_cond, &e->qlock);
    int status = e->prestage_status;
    char first[GDU_IO_WHY];
    snprintf(first, sizeof first, "%s", e->prestage_why);
    if (status != 0) { /* once more, for the slots it could not get */
        start_prestage(e);
        while (e->prestage_left != 0)
            pthread_cond_wait(&e->prestage_cond, &e->qlock);
        status = e->prestage_status;
        if (status == 0 && short_of_staging(e))
            status = -ENOMEM;
    }
    if (status != 0)
        snprintf(why, why_len, "%s", e->prestage_status != 0 ? e->prestage_why : first);
    pthread_mutex_unlock(&e->qlock);
    return status;
}

void gdu_io_engine_destroy(gdu_io_engine *e)
{
    if (e == NULL || gdu_io_engine_foreign(e)) /* nothing of it to stop here */
        return;
    gdu_io_maps_untrack(e);
    pthread_mutex_lock(&e->qlock);
    e->stopping = true;
    pthread_cond_broadcast(&e->qcond);
    pthread_mutex_unlock(&e->qlock);
    gdu_CUcontext prev = NULL;
    char why[GDU_IO_WHY];
    bool entered = e->cu != NULL && gdu_io_cuda_enter(e, &prev, why, sizeof why) == 0;
    if (e->workers != NULL) {
        for (unsigned i = 0; i < e->opt.workers; i++) {
            gdu_io_worker *w = &e->workers[i];
            if (w->started)
                pthread_join(w->thread, NULL);
            if (w->mctx != NULL)
                e->mover->worker_fini(e, w->mctx);
        }
    }
    pthread_mutex_lock(&e->qlock);
    struct timespec unused;
    bool has_wake;
    gdu_io_expire_kept(e, &unused, &has_wake); /* stopping: every kept mapping */
    while (gdu_io_unmap_one(e))
        ;
    pthread_mutex_unlock(&e->qlock);
    gdu_io_staging_free(e);
    free(e->workers);
    gdu_io_cufile_engine_fini(e);
    if (entered)
        gdu_cuda_ctx_restore(e->cu, prev);
    if (e->cu != NULL)
        gdu_cuda_ctx_release(e->cu, &e->primary);
    pthread_cond_destroy(&e->qcond);
    pthread_cond_destroy(&e->prestage_cond);
    pthread_mutex_destroy(&e->qlock);
    free(e);
}
