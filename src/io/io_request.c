/* Requests, the caller's side: checking and submitting extents or a box,
 * placing a deferred read's memory, and completion (wait, poll, the blocking
 * read and write). How a request is cut into chunks and how their outcomes
 * settle it is io_request_chunks.c. */
#include "io/io_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    if (n >= GDU_IO_PLAN_ON_WORKER && gdu_io_may_gather(f, op))
        return submit_for_planning(f, op, ext, n, owns, NULL, deferred, cb, user, out);
    gdu_io_chunk_plan p;
    int bad = gdu_io_plan_chunks(f, op, (gdu_io_runs){ext, NULL}, n, &p);
    if (bad != 0)
        return bad;
    gdu_io_request *r = request_new(gdu_io_plan_bytes(&p, n), f, op, ext, n, deferred, cb, user);
    if (r == NULL)
        return -ENOMEM;
    r->owns_ext = owns;
    r->pending = p.n_chunks;
    gdu_io_build_chunks(r, r + 1, &p);
    size_t n_chunks = r->n_chunks;
    *out = r;
    if (n_chunks == 0)
        gdu_io_request_finish(r);
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
    bool on_worker = n >= GDU_IO_PLAN_ON_WORKER && gdu_io_may_gather(f, op);
    if (on_worker && box.ndims == 1) /* kept whole: its runs computed (gdu_io_runs) */
        return submit_for_planning(f, op, NULL, n, true, &box, deferred, cb, user, out);
    gdu_io_extent *ext = malloc(n * sizeof *ext); /* n >= 1 */
    if (ext == NULL)
        return -ENOMEM;
    int status;
    if (on_worker) {
        status = submit_for_planning(f, op, ext, n, true, &box, deferred, cb, user, out);
    } else {
        gdu_io_box_fill(ext, n, offset, counts, strides, ndims, length, mem);
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
    gdu_io_box_fill(ext, n, offset, counts, strides, ndims, length, mem);
    return 0;
}
