/* Loading: one memory block per file, filled by engine reads of the file's
 * data span through the descriptor its header was read from. Files are
 * submitted before earlier ones are waited on, so the engine's workers stay
 * busy across shard boundaries, and shards placed on different GPUs (one
 * engine each, kept for the process: st_engines.h) load at the same time;
 * but only ST_LOAD_OPEN_FILES are open on the engines at once, the next
 * opened and submitted as one finishes. The load is split (start: allocate
 * every block, submit the first files; finish: wait, and submit the rest),
 * so a caller can hand the tensors on while their bytes move. */
#include "gdunlock/io.h"
#include "safetensors/st_engines.h"
#include "safetensors/st_error.h"
#include "safetensors/st_model_internal.h"
#include "util/clock.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A file's data section is allocated in segments of whole tensors, each
 * at least this large (a tensor larger than that gets one of its own), and
 * read in pieces of at most this size, every piece submitted as soon as its
 * segment exists: the workers read the first segment while the next is
 * being allocated (one allocation for an 8 GiB file would delay the first
 * read by all of its time), see the whole queue, and each completed piece
 * advances the progress report. */
#define PIECE_BYTES ((uint64_t)256 << 20)

/* A load has at most this many files open on the engines at once (a file
 * holds two descriptors with O_DIRECT), and at most a 32nd of the open-file
 * limit; the next file is opened as one finishes. */
#define ST_LOAD_OPEN_FILES 32

/* One piece of one file and the engine request moving it (NULL before it
 * is submitted and after it is waited for). */
typedef struct {
    size_t file;
    gdu_io_extent extent;
    gdu_io_request *request;
} load_piece;

/* What a started load holds until gdu_st_load_finish. */
struct st_pending_load {
    gdu_io_file **ios;      /* per file, while its reads run */
    gdu_io_engine **leased; /* per file, with ios */
    int *devices;           /* per file: its GPU */
    size_t *first_piece;    /* per file, and one past the last: its pieces */
    int host;
    size_t next_open;  /* files before it have been opened and submitted */
    size_t open_files; /* files open on the engines now */
    size_t open_limit;
    load_piece *pieces;
    size_t n_pieces;
    uint64_t total;
    double t0, first_submit;
    void (*progress)(void *ctx, uint64_t bytes_done, uint64_t bytes_total);
    void *progress_ctx;
    gdu_st_status status; /* the first failure, reported by finish */
    gdu_st_error error;
};

static void record_path(gdu_st_model *m, const gdu_io_file *io)
{
    snprintf(m->stats.backend, sizeof m->stats.backend, "%s%s",
             gdu_io_backend_name(gdu_io_file_backend(io)),
             gdu_io_file_direct(io) ? "+O_DIRECT" : "");
    snprintf(m->stats.reason, sizeof m->stats.reason, "%s", gdu_io_file_reason(io));
}

/* Submits one piece on file f's engine file. */
static gdu_st_status submit_piece(gdu_st_model *m, st_pending_load *p, load_piece *piece,
                                  gdu_st_error *err)
{
    if (p->first_submit == 0)
        p->first_submit = gdu_now_seconds();
    int rc = gdu_io_submit(p->ios[piece->file], GDU_IO_OP_READ, &piece->extent, 1, NULL, NULL,
                           &piece->request);
    if (rc != 0) {
        piece->request = NULL;
        return st_fail(err, GDU_ST_ERR_ENGINE, "%s: the engine refused the read%s",
                       m->files[piece->file].path,
                       rc == -ESRCH ? " (it is the parent process's: this process was forked "
                                      "from it after the load began; load again here)"
                                    : "");
    }
    return GDU_ST_OK;
}

/* Allocates file f's next segment, up to end, and adds its pieces, each
 * submitted at once while the file is open on its engine. */
static gdu_st_status add_segment(gdu_st_model *m, st_pending_load *p, size_t f, uint64_t end,
                                 gdu_st_error *err)
{
    st_file *file = &m->files[f];
    st_block *b = file->block;
    uint64_t start = b->n_segments ? b->segments[b->n_segments - 1].end : 0;
    double t = gdu_now_seconds();
    gdu_st_status s = st_block_add_segment(b, end, err);
    m->stats.alloc_seconds += gdu_now_seconds() - t;
    for (uint64_t pos = start; s == GDU_ST_OK && pos < end; pos += PIECE_BYTES) {
        load_piece *piece = &p->pieces[p->n_pieces++];
        *piece = (load_piece){
            .file = f,
            .extent =
                {
                    .offset = gdu_st_header_data_offset(file->header) + pos,
                    .length = end - pos < PIECE_BYTES ? end - pos : PIECE_BYTES,
                    .mem = (void *)(uintptr_t)st_block_address(b, pos, NULL),
                },
        };
        if (p->ios[f] != NULL)
            s = submit_piece(m, p, piece, err);
    }
    return s;
}

/* Opens file f on its engine (leased: gdu_st_engines_release cannot destroy
 * it under the reads) through the descriptor its header was read from, and
 * submits the pieces it has so far. Host memory (pinned or not) is filled by
 * one HOST engine for all files. */
static gdu_st_status open_file(gdu_st_model *m, st_pending_load *p, size_t f, gdu_st_error *err)
{
    p->next_open = f + 1;
    if (gdu_st_header_data_span(m->files[f].header) == 0)
        return GDU_ST_OK;
    double t = gdu_now_seconds();
    gdu_st_status s = st_engine_get(p->host, p->devices[f], &p->leased[f], err);
    m->stats.engine_seconds += gdu_now_seconds() - t;
    if (s == GDU_ST_OK)
        s = gdu_st_model_file_open(m, f, p->leased[f], &p->ios[f], err);
    if (s != GDU_ST_OK)
        return s;
    p->open_files++;
    record_path(m, p->ios[f]);
    for (size_t i = p->first_piece[f]; s == GDU_ST_OK && i < p->n_pieces && p->pieces[i].file == f;
         i++)
        s = submit_piece(m, p, &p->pieces[i], err);
    return s;
}

/* Creates file f's block and allocates it segment by segment (boundaries
 * at tensor starts), each segment's reads submitted at once when the file
 * is among those open. */
static gdu_st_status start_file(gdu_st_model *m, st_pending_load *p, size_t f, gdu_st_error *err)
{
    st_file *file = &m->files[f];
    uint64_t span = gdu_st_header_data_span(file->header);
    p->first_piece[f] = p->n_pieces;
    gdu_st_status s = st_block_create(p->host ? ST_MEM_PINNED : ST_MEM_DEVICE, p->devices[f], span,
                                      &file->block, err);
    if (s == GDU_ST_OK && p->next_open == f && p->open_files < p->open_limit)
        s = open_file(m, p, f, err);
    if (s != GDU_ST_OK || span == 0)
        return s == GDU_ST_OK ? st_block_add_segment(file->block, 0, err) : s;
    uint64_t data = gdu_st_header_data_offset(file->header), start = 0;
    for (size_t i = 0; s == GDU_ST_OK && i < m->tensor_count; i++) {
        const gdu_st_tensor *tensor = &m->tensors[i];
        uint64_t pos = tensor->file_offset - data;
        if (tensor->file != f || pos - start < PIECE_BYTES || pos >= span)
            continue;
        s = add_segment(m, p, f, pos, err);
        start = pos;
    }
    return s == GDU_ST_OK ? add_segment(m, p, f, span, err) : s;
}

/* Waits for one piece; a short read means the file shrank since it was opened. */
static gdu_st_status finish_piece(gdu_st_model *m, load_piece *p, gdu_st_error *err)
{
    char why[256] = "";
    uint64_t done = 0;
    int rc = gdu_io_wait(p->request, &done, why, sizeof why);
    p->request = NULL;
    const char *path = m->files[p->file].path;
    if (rc != 0) /* a slot's staging memory could not be had: named as such */
        return st_fail(err, rc == -ENOMEM ? GDU_ST_ERR_NOMEM : GDU_ST_ERR_ENGINE, "%s: %s", path,
                       why);
    if (done != p->extent.length)
        return st_fail(err, GDU_ST_ERR_IO,
                       "%s: read %llu of %llu bytes at offset %llu (file "
                       "truncated while loading?)",
                       path, (unsigned long long)done, (unsigned long long)p->extent.length,
                       (unsigned long long)p->extent.offset);
    m->stats.read_bytes += done;
    return GDU_ST_OK;
}

/* Points every tensor of the loaded files at its bytes. */
static void fill_addresses(gdu_st_model *m)
{
    for (size_t i = 0; i < m->tensor_count; i++) {
        gdu_st_tensor *t = &m->tensors[i];
        const st_file *file = &m->files[t->file];
        t->address = st_block_address(
            file->block, t->file_offset - gdu_st_header_data_offset(file->header), NULL);
        t->device = file->block->kind == ST_MEM_DEVICE ? file->block->device : -1;
        m->stats.tensor_bytes += t->nbytes;
    }
}

/* Closes file f once its reads are done, opening the next files in its
 * place (before its lease goes back, so that the engines count as used
 * throughout); a failure to open one is kept in p. */
static void file_done(gdu_st_model *m, st_pending_load *p, size_t f)
{
    gdu_io_close(p->ios[f]);
    p->ios[f] = NULL;
    p->open_files--;
    while (p->status == GDU_ST_OK && p->next_open < m->file_count && p->open_files < p->open_limit)
        p->status = open_file(m, p, p->next_open, &p->error);
    gdu_st_engine_return(p->leased[f]);
    p->leased[f] = NULL;
}

/* Waits for every submitted piece (also after a failure), opening the files
 * not yet open as others finish (until a failure), then gives the files and
 * engines back; keeps the first failure in p. */
static void drain(gdu_st_model *m, st_pending_load *p)
{
    uint64_t done = 0;
    for (size_t i = 0; i < p->n_pieces; i++) {
        load_piece *piece = &p->pieces[i];
        while (piece->request == NULL && p->status == GDU_ST_OK && p->next_open <= piece->file)
            p->status = open_file(m, p, p->next_open, &p->error);
        if (piece->request == NULL) /* its file was never opened: the load failed */
            continue;
        gdu_st_error e2;
        gdu_st_status s2 = finish_piece(m, piece, &e2);
        if (p->status == GDU_ST_OK && s2 != GDU_ST_OK) {
            p->status = s2;
            p->error = e2;
        }
        done += piece->extent.length;
        if (p->status == GDU_ST_OK && p->progress != NULL)
            p->progress(p->progress_ctx, done, p->total);
        if (i + 1 == p->first_piece[piece->file + 1])
            file_done(m, p, piece->file);
    }
    if (p->first_submit != 0)
        m->stats.transfer_seconds = gdu_now_seconds() - p->first_submit;
    for (size_t f = 0; f < m->file_count; f++) { /* opened, but not every piece was submitted */
        gdu_io_close(p->ios[f]);
        gdu_st_engine_return(p->leased[f]);
    }
}

static void pending_free(st_pending_load *p)
{
    if (p == NULL)
        return;
    free(p->ios);
    free(p->leased);
    free(p->devices);
    free(p->first_piece);
    free(p->pieces);
    free(p);
}

/* After a failed load: the model drops its memory and no tensor points into
 * it (exports keep theirs alive). */
static void release_blocks(gdu_st_model *m)
{
    for (size_t i = 0; i < m->tensor_count; i++)
        m->tensors[i].address = 0;
    for (size_t f = 0; f < m->file_count; f++) {
        st_block_release(m->files[f].block);
        m->files[f].block = NULL;
    }
}

/* A load of m's files as o asks, its arrays sized for every piece of
 * every file; NULL without memory. */
static st_pending_load *pending_new(const gdu_st_model *m, const gdu_st_load_options *o)
{
    st_pending_load *p = calloc(1, sizeof *p);
    if (p == NULL)
        return NULL;
    p->t0 = gdu_now_seconds();
    p->host = o->target == GDU_ST_TARGET_HOST;
    p->open_limit = st_files_within_limit(ST_LOAD_OPEN_FILES, 32);
    p->progress = o->progress;
    p->progress_ctx = o->progress_ctx;
    size_t max_pieces = 0, n = m->file_count ? m->file_count : 1;
    for (size_t f = 0; f < m->file_count; f++) {
        uint64_t span = gdu_st_header_data_span(m->files[f].header);
        p->total += span;
        /* Every segment but the last holds at least PIECE_BYTES, and each
         * adds at most one short piece. */
        max_pieces += 2 * (size_t)((span + PIECE_BYTES - 1) / PIECE_BYTES) + 1;
    }
    p->ios = calloc(n, sizeof *p->ios);
    p->leased = calloc(n, sizeof *p->leased);
    p->devices = calloc(n, sizeof *p->devices);
    p->first_piece = calloc(n + 1, sizeof *p->first_piece);
    p->pieces = calloc(max_pieces ? max_pieces : 1, sizeof *p->pieces);
    if (p->ios && p->leased && p->devices && p->first_piece && p->pieces)
        return p;
    pending_free(p);
    return NULL;
}

gdu_st_status gdu_st_load_start(gdu_st_model *m, const gdu_st_load_options *options,
                                gdu_st_error *err)
{
    if (m == NULL)
        return st_fail(err, GDU_ST_ERR_INVALID_ARGUMENT, "NULL model");
    if (m->pending != NULL)
        return st_fail(err, GDU_ST_ERR_INVALID_ARGUMENT,
                       "a load of this model is still running (gdu_st_load_finish)");
    for (size_t f = 0; f < m->file_count; f++)
        if (m->files[f].block != NULL)
            return st_fail(err, GDU_ST_ERR_INVALID_ARGUMENT, "the model is already loaded");
    static const int gpu0 = 0;
    gdu_st_load_options o = options ? *options : (gdu_st_load_options){0};
    if (o.target != GDU_ST_TARGET_GPU && o.target != GDU_ST_TARGET_HOST)
        return st_fail(err, GDU_ST_ERR_INVALID_ARGUMENT,
                       "load target %d is neither GDU_ST_TARGET_GPU nor GDU_ST_TARGET_HOST",
                       (int)o.target);
    if (o.gpus == NULL || o.gpu_count == 0) {
        o.gpus = &gpu0;
        o.gpu_count = 1;
    }
    memset(&m->stats, 0, sizeof m->stats);
    st_pending_load *p = pending_new(m, &o);
    if (p == NULL)
        return st_fail(err, GDU_ST_ERR_NOMEM, "out of memory");
    gdu_st_status s = GDU_ST_OK;
    for (size_t f = 0; s == GDU_ST_OK && f < m->file_count; f++) {
        p->devices[f] = o.gpus[f % o.gpu_count];
        s = start_file(m, p, f, err);
    }
    if (s != GDU_ST_OK) {
        p->next_open = m->file_count; /* open no more: drain only what was submitted */
        drain(m, p);                  /* what was submitted lands before its memory goes */
        pending_free(p);
        release_blocks(m);
        return s;
    }
    p->first_piece[m->file_count] = p->n_pieces;
    fill_addresses(m);
    m->pending = p;
    m->finish_pending = gdu_st_load_finish;
    return st_ok(err);
}

gdu_st_status gdu_st_load_finish(gdu_st_model *m, gdu_st_error *err)
{
    if (m == NULL)
        return st_fail(err, GDU_ST_ERR_INVALID_ARGUMENT, "NULL model");
    st_pending_load *p = m->pending;
    if (p == NULL)
        return st_fail(err, GDU_ST_ERR_INVALID_ARGUMENT, "no load was started (gdu_st_load_start)");
    drain(m, p);
    m->pending = NULL;
    gdu_st_status s = p->status;
    if (s != GDU_ST_OK && err != NULL)
        *err = p->error;
    double t0 = p->t0;
    pending_free(p);
    if (s != GDU_ST_OK) {
        release_blocks(m);
        return s;
    }
    m->stats.files = m->file_count;
    m->stats.tensors = m->tensor_count;
    m->stats.seconds = gdu_now_seconds() - t0;
    const st_block *b = m->file_count ? m->files[0].block : NULL;
    static const char *const memory[] = {
        [ST_MEM_DEVICE] = "device memory",
        [ST_MEM_PINNED] = "pinned host memory",
        [ST_MEM_HOST] = "host memory (not pinned: no libcuda)",
    };
    snprintf(m->stats.memory, sizeof m->stats.memory, "%s", b ? memory[b->kind] : "none");
    if (m->stats.backend[0] == '\0')
        snprintf(m->stats.backend, sizeof m->stats.backend, "none");
    return st_ok(err);
}

gdu_st_status gdu_st_load(gdu_st_model *m, const gdu_st_load_options *options, gdu_st_error *err)
{
    gdu_st_status s = gdu_st_load_start(m, options, err);
    return s == GDU_ST_OK ? gdu_st_load_finish(m, err) : s;
}
