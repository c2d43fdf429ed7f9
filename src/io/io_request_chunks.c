/* A request's chunks, the side of a request the workers see: how its
 * extents are cut into chunks (planned here or on a worker, gathered, taken
 * in parts) and how each chunk's outcome settles into the request. An
 * extent's done is the prefix up to the lowest point where a chunk came up
 * short or failed, so a failure is never reported as bytes moved. The
 * caller's side (submit, place, wait) is io_request.c. */
#include "io/io_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void file_request_finished(gdu_io_file *f)
{
    pthread_mutex_lock(&f->lock);
    if (--f->inflight == 0)
        pthread_cond_broadcast(&f->idle);
    pthread_mutex_unlock(&f->lock);
}

void gdu_io_request_finish(gdu_io_request *r)
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
        gdu_io_request_finish(r);
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
    if (c == &r->planning || !gdu_io_may_gather(r->file, r->op) ||
        atomic_load(&r->file->direct_reads))
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
    if (!gdu_io_may_gather(f, op))
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
    if (!gdu_io_may_gather(f, op))
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

void gdu_io_box_fill(gdu_io_extent *ext, size_t n, uint64_t offset, const uint64_t *counts,
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

int gdu_io_plan_chunks(gdu_io_file *f, gdu_io_op op, gdu_io_runs s, size_t n, gdu_io_chunk_plan *p)
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

size_t gdu_io_plan_bytes(const gdu_io_chunk_plan *p, size_t n)
{
    return p->n_chunks * sizeof(gdu_io_chunk) + n * sizeof(uint64_t);
}

void gdu_io_build_chunks(gdu_io_request *r, void *room, const gdu_io_chunk_plan *p)
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

void gdu_io_request_plan(gdu_io_request *r)
{
    gdu_io_file *f = r->file;
    const gdu_io_box *b = r->box;
    if (b != NULL && r->ext != NULL)
        gdu_io_box_fill(r->ext, r->n_ext, b->offset, b->counts, b->strides, b->ndims, b->length,
                        b->mem);
    gdu_io_chunk_plan p;
    int status = gdu_io_plan_chunks(f, r->op, gdu_io_runs_of(r), r->n_ext, &p);
    if (status == 0) {
        r->plan = calloc(1, gdu_io_plan_bytes(&p, r->n_ext));
        status = r->plan == NULL ? -ENOMEM : 0;
    }
    if (status == 0) {
        gdu_io_build_chunks(r, r->plan, &p);
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
        gdu_io_request_finish(r);
}
