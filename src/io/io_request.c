/* Requests: splitting extents into chunks at multiples of the chunk size,
 * accounting each chunk's outcome, and completion (callback, wait, poll).
 * An extent's done is the prefix up to the lowest point where a chunk came
 * up short or failed, so a failure is never reported as bytes moved. */
#include "io/io_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void file_request_finished(gdu_io_file *f)
{
    pthread_mutex_lock(&f->lock);
    if (--f->inflight == 0)
        pthread_cond_broadcast(&f->idle);
    pthread_mutex_unlock(&f->lock);
}

static void request_finish(gdu_io_request *r)
{
    uint64_t bytes = 0;
    gdu_io_runs s = gdu_io_runs_of(r);
    if (r->good_end == NULL) { /* its planning failed: nothing moved */
        for (size_t i = 0; i < r->n_ext && r->ext != NULL; i++) {
            r->ext[i].done = 0;
            r->ext[i].status = r->status;
        }
    } else {
        for (size_t i = 0; i < r->n_ext; i++) {
            uint64_t done = r->good_end[i] - gdu_io_run_offset(s, i);
            if (r->ext != NULL)
                r->ext[i].done = done;
            bytes += done;
        }
    }
    r->bytes = bytes;
    if (r->cb != NULL)
        r->cb(r->user, r->status, bytes);
    file_request_finished(r->file);
    pthread_mutex_lock(&r->lock);
    r->completed = true;
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->lock);
}

/* Under r->lock: run i's good bytes stop at file offset end (and its
 * extent, if it has one, failed with status, if not 0). */
static void extent_short(gdu_io_request *r, size_t i, uint64_t end, int status)
{
    if (end < r->good_end[i])
        r->good_end[i] = end;
    if (status != 0 && r->ext != NULL && r->ext[i].status == 0)
        r->ext[i].status = status;
}

void gdu_io_chunk_done(gdu_io_chunk *c, uint64_t good, int status, const char *why)
{
    gdu_io_request *r = c->req;
    pthread_mutex_lock(&r->lock);
    if (c->pieces > 1) { /* good counts the runs' bytes one after another */
        gdu_io_runs s = gdu_io_runs_of(r);
        for (size_t k = c->ext_index; k < c->ext_index + c->pieces; k++) {
            uint64_t length = gdu_io_run_length(s, k);
            uint64_t take = good < length ? good : length;
            if (take < length || status != 0)
                extent_short(r, k, gdu_io_run_offset(s, k) + take, status);
            good -= take;
        }
    } else if (good < c->length || status != 0) {
        extent_short(r, c->ext_index, c->offset + good, status);
    }
    if (status != 0 && r->status == 0) {
        r->status = status;
        snprintf(r->why, sizeof r->why, "%s", why != NULL && why[0] ? why : strerror(-status));
    }
    bool last = --r->pending == 0;
    pthread_mutex_unlock(&r->lock);
    if (last)
        request_finish(r);
}

/* The unit a request is split into for the workers. O_DIRECT reads and all
 * writes move whole chunks. Buffered reads are dispatched in read pieces
 * (4 MiB): with 16 MiB chunks, one worker reading a whole chunk in four
 * pieces before it took the next left the workers at about half the rate
 * of 4 MiB units (bench/results/2026-11-30-h200-io-batch2.md); so a large
 * chunk size only sizes the staging slots and the O_DIRECT transfers. */
static uint64_t dispatch_unit(const gdu_io_file *f, gdu_io_op op)
{
    const gdu_io_engine *e = f->engine;
    if (op == GDU_IO_OP_READ && !atomic_load(&f->direct_reads) && e->read_piece != 0 &&
        e->read_piece < e->opt.chunk_size)
        return e->read_piece;
    return e->opt.chunk_size;
}

static size_t chunks_of(uint64_t offset, uint64_t length, uint64_t chunk)
{
    if (length == 0)
        return 0;
    return (size_t)((offset + length - 1) / chunk - offset / chunk + 1);
}

/* Whether reads of f may be gathered: cuFile reads each extent straight
 * into device memory, so it gathers nothing, and writes move on their own. */
static bool may_gather(const gdu_io_file *f, gdu_io_op op)
{
    return op == GDU_IO_OP_READ && f->backend != GDU_IO_BACKEND_CUFILE;
}

/* Whether run k + 1 may follow run k in one gather chunk
 * (GDU_IO_GATHER_PIECE): both small, the second's memory following the
 * first's and its file range after the first's without overlap (so that a
 * short read at the end of the file cuts the chunk's bytes where it cuts
 * the runs'). */
static bool gathers(gdu_io_runs s, size_t k)
{
    uint64_t a = gdu_io_run_length(s, k), b = gdu_io_run_length(s, k + 1);
    return a != 0 && a < GDU_IO_GATHER_PIECE && b != 0 && b < GDU_IO_GATHER_PIECE &&
           gdu_io_run_offset(s, k + 1) >= gdu_io_run_offset(s, k) + a &&
           gdu_io_run_mem(s, k + 1) == gdu_io_run_mem(s, k) + a;
}

/* The bytes of a part of c with e->queued chunks queued (GDU_IO_MAX_PARTS),
 * 0 when c moves whole: its dispatch unit (a gather chunk's, or the read
 * piece) cut into workers / queued parts, in whole pages of GDU_IO_ALIGN
 * bytes: no part is smaller than a page, and the rest keeps its chunk's
 * place within a page. */
static uint64_t part_bytes(const gdu_io_engine *e, const gdu_io_chunk *c)
{
    size_t parts = e->opt.workers / e->queued;
    if (parts < 2)
        return 0;
    if (parts > GDU_IO_MAX_PARTS)
        parts = GDU_IO_MAX_PARTS;
    uint64_t unit = e->read_piece;
    if (c->pieces > 1 && unit > GDU_IO_GATHER_CHUNK)
        unit = GDU_IO_GATHER_CHUNK;
    return unit / parts / GDU_IO_ALIGN * GDU_IO_ALIGN;
}

bool gdu_io_take_part(gdu_io_engine *e, gdu_io_chunk *c, gdu_io_chunk *part)
{
    gdu_io_request *r = c->req;
    /* reads through staging only: as for gathers, and O_DIRECT moves whole chunks */
    if (c == &r->planning || !may_gather(r->file, r->op) || atomic_load(&r->file->direct_reads))
        return false;
    uint64_t unit = part_bytes(e, c);
    if (unit == 0 || c->length < 2 * unit)
        return false;
    *part = *c;
    if (c->pieces == 1) {
        part->length = unit;
        c->offset += unit;
        c->mem += unit;
        c->length -= unit;
    } else {
        size_t k = 0;
        uint64_t bytes = 0;
        gdu_io_runs s = gdu_io_runs_of(r);
        while (k < c->pieces && bytes < unit)
            bytes += gdu_io_run_length(s, c->ext_index + k++);
        if (k == c->pieces || c->length - bytes < unit)
            return false;
        part->pieces = k;
        part->length = bytes;
        c->ext_index += k;
        c->pieces -= k;
        c->offset = gdu_io_run_offset(s, c->ext_index);
        c->mem = gdu_io_run_mem(s, c->ext_index);
        c->length -= bytes;
    }
    pthread_mutex_lock(&r->lock);
    r->pending++;
    pthread_mutex_unlock(&r->lock);
    return true;
}

/* Whether any two runs would share a gather chunk (before the file is
 * mapped for it: a request of whole tensors maps nothing). */
static bool has_gathers(const gdu_io_file *f, gdu_io_op op, gdu_io_runs s, size_t n)
{
    if (!may_gather(f, op))
        return false;
    if (s.ext == NULL) /* a box's runs: alike, so the first two say */
        return n > 1 && gathers(s, 0);
    for (size_t i = 0; i + 1 < n; i++)
        if (gathers(s, i))
            return true;
    return false;
}

/* How many runs from run i on form one gather chunk: runs that gather one
 * after another, at most unit bytes in all (GDU_IO_GATHER_CHUNK at most),
 * counting the gaps the worker reads over (GDU_IO_GATHER_GAP): so every
 * range it reads fits in the staging slot where its bytes go. From the
 * file's mapping (mapped) nothing is read over: only the runs count. 1
 * means run i moves on its own. */
static size_t gather_run(const gdu_io_file *f, gdu_io_op op, gdu_io_runs s, size_t n, size_t i,
                         uint64_t unit, bool mapped)
{
    if (!may_gather(f, op))
        return 1;
    if (unit > GDU_IO_GATHER_CHUNK)
        unit = GDU_IO_GATHER_CHUNK;
    uint64_t staged = gdu_io_run_length(s, i);
    if (s.ext == NULL && i + 1 < n) {
        /* A box's runs are alike, one stride apart: the count is the
         * loop's below without walking them, which for the 32,000 rows of
         * an embedding's column held the other workers idle at a rank's
         * start while one planned (issue 21). */
        if (!gathers(s, i))
            return 1;
        uint64_t gap = s.box->strides[0] - staged;
        uint64_t more = staged + (!mapped && gap <= GDU_IO_GATHER_GAP ? gap : 0);
        uint64_t fit = staged > unit ? 0 : (unit - staged) / more;
        return 1 + (size_t)(fit < n - 1 - i ? fit : n - 1 - i);
    }
    size_t k = i;
    while (k + 1 < n) {
        if (!gathers(s, k))
            break;
        uint64_t gap =
            gdu_io_run_offset(s, k + 1) - (gdu_io_run_offset(s, k) + gdu_io_run_length(s, k));
        uint64_t more =
            gdu_io_run_length(s, k + 1) + (!mapped && gap <= GDU_IO_GATHER_GAP ? gap : 0);
        if (staged + more > unit)
            break;
        staged += more;
        k++;
    }
    return k - i + 1;
}

/* The number of runs of a box (gdu_io_extents_box) in *n, or -EINVAL when
 * its runs could not be moved: no counts or strides, too many dimensions, a
 * count of 0, a run past 2^63, no memory for the bytes, more bytes than
 * memory can address. */
static int box_count(uint64_t offset, const uint64_t *counts, const uint64_t *strides,
                     unsigned ndims, uint64_t length, const void *mem, size_t *n)
{
    if ((ndims > 0 && (counts == NULL || strides == NULL)) || ndims > GDU_IO_BOX_MAX_DIMS ||
        offset > (uint64_t)INT64_MAX)
        return -EINVAL;
    uint64_t want = 1, last = offset;
    for (unsigned d = 0; d < ndims; d++) {
        if (counts[d] == 0 || want > SIZE_MAX / counts[d])
            return -EINVAL;
        want *= counts[d];
        uint64_t reach = counts[d] - 1;
        if (strides[d] != 0 && reach > ((uint64_t)INT64_MAX - last) / strides[d])
            return -EINVAL;
        last += reach * strides[d];
    }
    if (length > (uint64_t)INT64_MAX - last || (length > 0 && mem == NULL) ||
        (length > 0 && want > SIZE_MAX / length))
        return -EINVAL;
    *n = (size_t)want;
    return 0;
}

/* The n runs of a sound box (box_count), in row-major order. */
static void box_fill(gdu_io_extent *ext, size_t n, uint64_t offset, const uint64_t *counts,
                     const uint64_t *strides, unsigned ndims, uint64_t length, void *mem)
{
    uint64_t index[GDU_IO_BOX_MAX_DIMS] = {0};
    uint64_t at = offset;
    for (size_t k = 0; k < n; k++) {
        ext[k] = (gdu_io_extent){
            .offset = at, .length = length, .mem = (void *)((uintptr_t)mem + k * length)};
        /* The next run: the innermost counter steps, carrying outwards. */
        for (unsigned d = ndims; d-- > 0;) {
            at += strides[d];
            if (++index[d] < counts[d])
                break;
            at -= counts[d] * strides[d];
            index[d] = 0;
        }
    }
}

/* b with its dimensions of one index left out and each outer dimension
 * merged into the next where it steps over exactly the whole of it (the
 * rows of a slice of whole rows): the same runs in the same order, in as
 * few dimensions as they take. */
static void box_merge(gdu_io_box *b)
{
    unsigned out = 0;
    for (unsigned d = 0; d < b->ndims; d++) {
        if (b->counts[d] == 1)
            continue;
        if (out > 0 && b->strides[out - 1] == b->counts[d] * b->strides[d]) {
            b->counts[out - 1] *= b->counts[d];
            b->strides[out - 1] = b->strides[d];
            continue;
        }
        b->counts[out] = b->counts[d];
        b->strides[out] = b->strides[d];
        out++;
    }
    b->ndims = out;
}

/* -EINVAL when an extent cannot be moved: no memory for its bytes, or a
 * range past 2^63. */
static int check_extents(const gdu_io_extent *ext, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((ext[i].length > 0 && ext[i].mem == NULL) || ext[i].offset > (uint64_t)INT64_MAX ||
            ext[i].length > (uint64_t)INT64_MAX - ext[i].offset)
            return -EINVAL;
    return 0;
}

/* How a request's extents split into chunks, before the chunks are made. */
typedef struct {
    uint64_t unit;   /* dispatch_unit */
    bool mapped;     /* gathers copy from the file's mapping */
    size_t n_chunks; /* gather runs one each, others one per unit they touch */
} chunk_plan;

/* The plan of the n runs (checked) of an op on f, mapping the file when
 * they gather; -EINVAL when the chunk count overflows. */
static int plan_chunks(gdu_io_file *f, gdu_io_op op, gdu_io_runs s, size_t n, chunk_plan *p)
{
    p->unit = dispatch_unit(f, op);
    p->mapped = has_gathers(f, op, s, n) && gdu_io_gather_mapped(f);
    p->n_chunks = 0;
    for (size_t i = 0; i < n;) {
        size_t run = gather_run(f, op, s, n, i, p->unit, p->mapped);
        size_t k =
            run > 1 ? 1 : chunks_of(gdu_io_run_offset(s, i), gdu_io_run_length(s, i), p->unit);
        if (k > (SIZE_MAX / 2 - p->n_chunks) / sizeof(gdu_io_chunk))
            return -EINVAL;
        p->n_chunks += k;
        i += run;
    }
    return 0;
}

/* The bytes build_chunks lays a plan out in, for n extents. */
static size_t plan_bytes(const chunk_plan *p, size_t n)
{
    return p->n_chunks * sizeof(gdu_io_chunk) + n * sizeof(uint64_t);
}

/* Lays r's chunks and good_end out at room (plan_bytes of them), fills the
 * chunks (linked in order) and resets its extents' results, if it has
 * extents. */
static void build_chunks(gdu_io_request *r, void *room, const chunk_plan *p)
{
    r->chunks = room;
    r->good_end = (uint64_t *)(void *)&r->chunks[p->n_chunks];
    r->n_chunks = p->n_chunks;
    r->mapped = p->mapped;
    gdu_io_extent *ext = r->ext;
    gdu_io_runs s = gdu_io_runs_of(r);
    uint64_t cs = p->unit;
    size_t n = r->n_ext, n_chunks = r->n_chunks, k = 0;
    for (size_t i = 0; i < n;) {
        size_t run = gather_run(r->file, r->op, s, n, i, cs, r->mapped);
        for (size_t j = i; j < i + run; j++) {
            if (ext != NULL) {
                ext[j].done = 0;
                ext[j].status = 0;
            }
            r->good_end[j] = gdu_io_run_offset(s, j) + gdu_io_run_length(s, j);
        }
        if (run > 1) {
            gdu_io_chunk *c = &r->chunks[k];
            *c = (gdu_io_chunk){.req = r,
                                .ext_index = i,
                                .pieces = run,
                                .offset = gdu_io_run_offset(s, i),
                                .mem = gdu_io_run_mem(s, i)};
            for (size_t j = i; j < i + run; j++)
                c->length += gdu_io_run_length(s, j);
            c->next = k + 1 < n_chunks ? &r->chunks[k + 1] : NULL;
            k++;
            i += run;
            continue;
        }
        uint64_t off = gdu_io_run_offset(s, i), end = off + gdu_io_run_length(s, i);
        while (off < end) {
            uint64_t stop = (off / cs + 1) * cs;
            if (stop > end)
                stop = end;
            gdu_io_chunk *c = &r->chunks[k];
            c->req = r;
            c->ext_index = i;
            c->pieces = 1;
            c->offset = off;
            c->length = stop - off;
            c->mem = gdu_io_run_mem(s, i) + (off - gdu_io_run_offset(s, i));
            c->next = k + 1 < n_chunks ? &r->chunks[k + 1] : NULL;
            k++;
            off = stop;
        }
        i++;
    }
}

/* A request of f (counted in its inflight; a deferred one on its unplaced
 * list), with tail bytes after it. */
static gdu_io_request *request_new(size_t tail, gdu_io_file *f, gdu_io_op op, gdu_io_extent *ext,
                                   size_t n, bool deferred, gdu_io_callback cb, void *user)
{
    gdu_io_request *r = calloc(1, sizeof *r + tail);
    if (r == NULL)
        return NULL;
    r->file = f;
    r->op = op;
    r->ext = ext;
    r->n_ext = n;
    r->cb = cb;
    r->user = user;
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->cond, NULL);
    r->deferred = deferred;
    atomic_init(&r->placement, deferred ? 0 : 1);
    pthread_mutex_lock(&f->lock);
    f->inflight++;
    if (deferred) {
        r->unplaced_next = f->unplaced;
        if (f->unplaced != NULL)
            f->unplaced->unplaced_prev = r;
        f->unplaced = r;
    }
    pthread_mutex_unlock(&f->lock);
    return r;
}

/* Under f->lock, for unplaced request r of f: its placement (mem, or
 * cancelled with NULL), off the unplaced list, told to the workers waiting
 * for it. r cannot be freed meanwhile: gdu_io_wait cancels an unplaced
 * request, under f->lock, before it waits. */
static void place_locked(gdu_io_file *f, gdu_io_request *r, void *mem)
{
    if (r->unplaced_prev != NULL)
        r->unplaced_prev->unplaced_next = r->unplaced_next;
    else
        f->unplaced = r->unplaced_next;
    if (r->unplaced_next != NULL)
        r->unplaced_next->unplaced_prev = r->unplaced_prev;
    r->unplaced_prev = r->unplaced_next = NULL;
    r->shift = (uintptr_t)mem - GDU_IO_UNPLACED;
    pthread_mutex_lock(&r->lock);
    atomic_store(&r->placement, mem != NULL ? 1 : -1);
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->lock);
}

int gdu_io_place(gdu_io_request *r, void *mem)
{
    if (r == NULL || !r->deferred)
        return -EINVAL;
    gdu_io_file *f = r->file;
    if (gdu_io_engine_foreign(f->engine))
        return -ESRCH;
    pthread_mutex_lock(&f->lock);
    int placed = atomic_load(&r->placement);
    if (placed == 0)
        place_locked(f, r, mem);
    pthread_mutex_unlock(&f->lock);
    return placed == 0 ? 0 : -EALREADY;
}

void gdu_io_cancel_unplaced(gdu_io_file *f)
{
    pthread_mutex_lock(&f->lock);
    while (f->unplaced != NULL)
        place_locked(f, f->unplaced, NULL);
    pthread_mutex_unlock(&f->lock);
}

int gdu_io_chunk_mem(const gdu_io_chunk *c, char **mem, char *why, size_t len)
{
    gdu_io_request *r = c->req;
    if (!r->deferred) {
        *mem = c->mem;
        return 0;
    }
    int placed = atomic_load(&r->placement);
    if (placed == 0) {
        pthread_mutex_lock(&r->lock);
        while ((placed = atomic_load(&r->placement)) == 0)
            pthread_cond_wait(&r->cond, &r->lock);
        pthread_mutex_unlock(&r->lock);
    }
    if (placed < 0) {
        snprintf(why, len, "the read was cancelled before its memory was given");
        return -ECANCELED;
    }
    *mem = (char *)((uintptr_t)c->mem + r->shift);
    return 0;
}

/* Queues a read of many extents (checked; owned by the request when owns)
 * whose chunks a worker plans (gdu_io_request_plan); with box, the worker
 * first makes them of it (ext is their memory, allocated here on the
 * caller's thread as the caller's own extents would be). */
static int submit_for_planning(gdu_io_file *f, gdu_io_op op, gdu_io_extent *ext, size_t n,
                               bool owns, const gdu_io_box *box, bool deferred, gdu_io_callback cb,
                               void *user, gdu_io_request **out)
{
    gdu_io_request *r =
        request_new(box != NULL ? sizeof *box : 0, f, op, ext, n, deferred, cb, user);
    if (r == NULL)
        return -ENOMEM;
    r->owns_ext = owns;
    if (box != NULL) {
        gdu_io_box *kept = (gdu_io_box *)(void *)(r + 1);
        *kept = *box;
        r->box = kept;
    }
    r->planning = (gdu_io_chunk){.req = r};
    r->pending = 1; /* the planning, until its chunks are queued */
    *out = r;
    gdu_io_engine_enqueue(f->engine, &r->planning, &r->planning, 1, false);
    return 0;
}

void gdu_io_request_plan(gdu_io_request *r)
{
    gdu_io_file *f = r->file;
    const gdu_io_box *b = r->box;
    if (b != NULL && r->ext != NULL)
        box_fill(r->ext, r->n_ext, b->offset, b->counts, b->strides, b->ndims, b->length, b->mem);
    chunk_plan p;
    int status = plan_chunks(f, r->op, gdu_io_runs_of(r), r->n_ext, &p);
    if (status == 0) {
        r->plan = calloc(1, plan_bytes(&p, r->n_ext));
        status = r->plan == NULL ? -ENOMEM : 0;
    }
    if (status == 0) {
        build_chunks(r, r->plan, &p);
        size_t n_chunks = r->n_chunks;
        if (n_chunks > 0) {
            pthread_mutex_lock(&r->lock);
            r->pending += n_chunks;
            pthread_mutex_unlock(&r->lock);
            /* Ahead of what was queued after the planning: it held their place. */
            gdu_io_engine_enqueue(f->engine, &r->chunks[0], &r->chunks[n_chunks - 1], n_chunks,
                                  true);
        }
    }
    pthread_mutex_lock(&r->lock);
    if (status != 0 && r->status == 0) {
        r->status = status;
        snprintf(r->why, sizeof r->why, "planning %zu extents: %s", r->n_ext, strerror(-status));
    }
    bool last = --r->pending == 0;
    pthread_mutex_unlock(&r->lock);
    if (last)
        request_finish(r);
}

/* 0 when f takes requests of op (and out is there for them), else -EINVAL. */
static int check_file_op(const gdu_io_file *f, gdu_io_op op, gdu_io_request **out)
{
    if (out != NULL)
        *out = NULL;
    if (f == NULL || out == NULL)
        return -EINVAL;
    if ((op == GDU_IO_OP_READ && !(f->flags & GDU_IO_READ)) ||
        (op == GDU_IO_OP_WRITE && !(f->flags & GDU_IO_WRITE)) ||
        (op != GDU_IO_OP_READ && op != GDU_IO_OP_WRITE))
        return -EINVAL;
    return 0;
}

/* Queues the n checked extents ext, which the request frees when it owns
 * them. */
static int submit_checked(gdu_io_file *f, gdu_io_op op, gdu_io_extent *ext, size_t n, bool owns,
                          bool deferred, gdu_io_callback cb, void *user, gdu_io_request **out)
{
    if (n >= GDU_IO_PLAN_ON_WORKER && may_gather(f, op))
        return submit_for_planning(f, op, ext, n, owns, NULL, deferred, cb, user, out);
    chunk_plan p;
    int bad = plan_chunks(f, op, (gdu_io_runs){ext, NULL}, n, &p);
    if (bad != 0)
        return bad;
    gdu_io_request *r = request_new(plan_bytes(&p, n), f, op, ext, n, deferred, cb, user);
    if (r == NULL)
        return -ENOMEM;
    r->owns_ext = owns;
    r->pending = p.n_chunks;
    build_chunks(r, r + 1, &p);
    size_t n_chunks = r->n_chunks;
    *out = r;
    if (n_chunks == 0)
        request_finish(r);
    else
        gdu_io_engine_enqueue(f->engine, &r->chunks[0], &r->chunks[n_chunks - 1], n_chunks, false);
    return 0;
}

int gdu_io_submit(gdu_io_file *f, gdu_io_op op, gdu_io_extent *ext, size_t n, gdu_io_callback cb,
                  void *user, gdu_io_request **out)
{
    int bad = check_file_op(f, op, out);
    if (bad != 0 || (n > 0 && ext == NULL) || n > SIZE_MAX / 64 || check_extents(ext, n) != 0)
        return -EINVAL;
    if (gdu_io_engine_foreign(f->engine))
        return -ESRCH;
    return submit_checked(f, op, ext, n, false, false, cb, user, out);
}

/* gdu_io_submit_box, or with deferred its read whose memory comes later
 * (mem GDU_IO_UNPLACED then). */
static int submit_box(gdu_io_file *f, gdu_io_op op, uint64_t offset, const uint64_t *counts,
                      const uint64_t *strides, unsigned ndims, uint64_t length, void *mem,
                      bool deferred, gdu_io_callback cb, void *user, gdu_io_request **out)
{
    size_t n = 0;
    if (check_file_op(f, op, out) != 0 ||
        box_count(offset, counts, strides, ndims, length, mem, &n) != 0 || n > SIZE_MAX / 64)
        return -EINVAL;
    if (gdu_io_engine_foreign(f->engine))
        return -ESRCH;
    gdu_io_box box = {.offset = offset, .length = length, .mem = mem, .ndims = ndims};
    if (ndims > 0) { /* counts and strides may be NULL without dimensions */
        memcpy(box.counts, counts, ndims * sizeof *counts);
        memcpy(box.strides, strides, ndims * sizeof *strides);
    }
    box_merge(&box);
    bool on_worker = n >= GDU_IO_PLAN_ON_WORKER && may_gather(f, op);
    if (on_worker && box.ndims == 1) /* kept whole: its runs computed (gdu_io_runs) */
        return submit_for_planning(f, op, NULL, n, true, &box, deferred, cb, user, out);
    gdu_io_extent *ext = malloc(n * sizeof *ext); /* n >= 1 */
    if (ext == NULL)
        return -ENOMEM;
    int status;
    if (on_worker) {
        status = submit_for_planning(f, op, ext, n, true, &box, deferred, cb, user, out);
    } else {
        box_fill(ext, n, offset, counts, strides, ndims, length, mem);
        status = submit_checked(f, op, ext, n, true, deferred, cb, user, out);
    }
    if (status != 0)
        free(ext);
    return status;
}

int gdu_io_submit_box(gdu_io_file *f, gdu_io_op op, uint64_t offset, const uint64_t *counts,
                      const uint64_t *strides, unsigned ndims, uint64_t length, void *mem,
                      gdu_io_callback cb, void *user, gdu_io_request **out)
{
    return submit_box(f, op, offset, counts, strides, ndims, length, mem, false, cb, user, out);
}

int gdu_io_submit_box_deferred(gdu_io_file *f, uint64_t offset, const uint64_t *counts,
                               const uint64_t *strides, unsigned ndims, uint64_t length,
                               gdu_io_callback cb, void *user, gdu_io_request **out)
{
    return submit_box(f, GDU_IO_OP_READ, offset, counts, strides, ndims, length,
                      (void *)GDU_IO_UNPLACED, true, cb, user, out);
}

int gdu_io_poll(const gdu_io_request *r)
{
    if (r == NULL)
        return -EINVAL;
    if (gdu_io_engine_foreign(r->file->engine))
        return -ESRCH;
    gdu_io_request *m = (gdu_io_request *)r;
    pthread_mutex_lock(&m->lock);
    int done = m->completed;
    pthread_mutex_unlock(&m->lock);
    return done;
}

int gdu_io_wait(gdu_io_request *r, uint64_t *bytes, char *why, size_t why_len)
{
    if (r == NULL)
        return -EINVAL;
    if (gdu_io_engine_foreign(r->file->engine)) /* the request is the parent's: it stays */
        return gdu_io_foreign_fail(r->file->engine, why, why_len);
    /* left unplaced it would never complete; placed (the loader's every
     * read), the file's lock is not needed to see it */
    if (r->deferred && atomic_load(&r->placement) == 0)
        gdu_io_place(r, NULL);
    pthread_mutex_lock(&r->lock);
    while (!r->completed)
        pthread_cond_wait(&r->cond, &r->lock);
    pthread_mutex_unlock(&r->lock);
    int status = r->status;
    if (bytes != NULL)
        *bytes = r->bytes;
    if (status != 0 && why != NULL && why_len > 0)
        snprintf(why, why_len, "%s", r->why);
    pthread_cond_destroy(&r->cond);
    pthread_mutex_destroy(&r->lock);
    if (r->owns_ext)
        free(r->ext);
    free(r->plan);
    free(r);
    return status;
}

static int transfer(gdu_io_file *f, gdu_io_op op, uint64_t offset, uint64_t length, void *mem,
                    uint64_t *done, char *why, size_t why_len)
{
    gdu_io_extent x = {.offset = offset, .length = length, .mem = mem};
    gdu_io_request *r = NULL;
    if (done != NULL)
        *done = 0;
    int s = gdu_io_submit(f, op, &x, 1, NULL, NULL, &r);
    if (s == -ESRCH)
        return gdu_io_foreign_fail(f->engine, why, why_len);
    if (s != 0) {
        if (why != NULL && why_len > 0)
            snprintf(why, why_len, "invalid %s request (offset %llu, length %llu)",
                     op == GDU_IO_OP_READ ? "read" : "write", (unsigned long long)offset,
                     (unsigned long long)length);
        return s;
    }
    s = gdu_io_wait(r, NULL, why, why_len);
    if (done != NULL)
        *done = x.done;
    return s;
}

int gdu_io_read(gdu_io_file *f, uint64_t offset, uint64_t length, void *mem, uint64_t *done,
                char *why, size_t why_len)
{
    return transfer(f, GDU_IO_OP_READ, offset, length, mem, done, why, why_len);
}

int gdu_io_write(gdu_io_file *f, uint64_t offset, uint64_t length, const void *mem, uint64_t *done,
                 char *why, size_t why_len)
{
    return transfer(f, GDU_IO_OP_WRITE, offset, length, (void *)mem, done, why, why_len);
}

int gdu_io_sync(gdu_io_file *f, char *why, size_t why_len)
{
    if (f == NULL)
        return -EINVAL;
    while (fdatasync(f->fd) != 0) {
        if (errno == EINTR)
            continue;
        int err = errno;
        if (why != NULL && why_len > 0)
            snprintf(why, why_len, "fdatasync failed: %s", strerror(err));
        return -err;
    }
    return 0;
}

int gdu_io_extents_box(gdu_io_extent *ext, size_t n, uint64_t offset, const uint64_t *counts,
                       const uint64_t *strides, unsigned ndims, uint64_t length, void *mem)
{
    size_t want = 0;
    if (ext == NULL || box_count(offset, counts, strides, ndims, length, mem, &want) != 0 ||
        want != n)
        return -EINVAL;
    box_fill(ext, n, offset, counts, strides, ndims, length, mem);
    return 0;
}
