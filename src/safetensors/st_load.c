/* Loading: one memory block per file, filled by one engine read of the file's
 * data span. All files are submitted before any is waited on, so the engine's
 * workers stay busy across shard boundaries, and shards placed on different
 * GPUs (one engine each) load at the same time. */
#include "gdunlock/io.h"
#include "safetensors/st_error.h"
#include "safetensors/st_model_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Per file: where it goes and the engine request moving it. */
typedef struct {
    gdu_io_engine *engine;
    gdu_io_file *io;
    gdu_io_extent extent;
    gdu_io_request *request;
} load_job;

/* One engine per distinct GPU (or one HOST engine). */
typedef struct {
    int device;
    gdu_io_engine *engine;
} engine_slot;

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static gdu_st_status engine_for(engine_slot *slots, size_t *n, int device, int host,
                                gdu_io_engine **out, gdu_st_error *err)
{
    for (size_t i = 0; i < *n; i++) {
        if (slots[i].device == device) {
            *out = slots[i].engine;
            return GDU_ST_OK;
        }
    }
    gdu_io_options o;
    gdu_io_options_default(&o);
    o.device = device < 0 ? 0 : device;
    o.backend = host ? GDU_IO_BACKEND_HOST : GDU_IO_BACKEND_AUTO;
    char why[256] = "";
    if (gdu_io_options_from_env(&o, why, sizeof why) != 0)
        return st_fail(err, GDU_ST_ERR_INVALID_ARGUMENT, "I/O engine settings: %s", why);
    int rc = gdu_io_engine_create(&o, &slots[*n].engine, why, sizeof why);
    if (rc != 0)
        return st_fail(err, GDU_ST_ERR_ENGINE, "I/O engine for %s %d: %s",
                       host ? "host memory via GPU" : "GPU", device, why);
    slots[*n].device = device;
    *out = slots[(*n)++].engine;
    return GDU_ST_OK;
}

static void record_path(gdu_st_model *m, const gdu_io_file *io)
{
    snprintf(m->stats.backend, sizeof m->stats.backend, "%s%s",
             gdu_io_backend_name(gdu_io_file_backend(io)),
             gdu_io_file_direct(io) ? "+O_DIRECT" : "");
    snprintf(m->stats.reason, sizeof m->stats.reason, "%s", gdu_io_file_reason(io));
}

/* Allocates file f's block and submits its read. */
static gdu_st_status start_file(gdu_st_model *m, size_t f, int device, int host,
                                engine_slot *slots, size_t *n_slots, load_job *job,
                                gdu_st_error *err)
{
    st_file *file = &m->files[f];
    uint64_t span = gdu_st_header_data_span(file->header);
    gdu_st_status s = st_block_alloc(host ? ST_MEM_PINNED : ST_MEM_DEVICE, device, span,
                                     &file->block, err);
    if (s != GDU_ST_OK)
        return s;
    if (span == 0)
        return GDU_ST_OK;
    /* Host memory (pinned or not) is filled by one HOST engine for all files. */
    s = engine_for(slots, n_slots, host ? -1 : device, host, &job->engine, err);
    if (s != GDU_ST_OK)
        return s;
    char why[256] = "";
    if (gdu_io_open(job->engine, file->path, GDU_IO_READ, &job->io, why, sizeof why) != 0)
        return st_fail(err, GDU_ST_ERR_OPEN, "%s: %s", file->path, why);
    record_path(m, job->io);
    job->extent = (gdu_io_extent){
        .offset = gdu_st_header_data_offset(file->header),
        .length = span,
        .mem = (void *)(uintptr_t)file->block->address,
    };
    if (gdu_io_submit(job->io, GDU_IO_OP_READ, &job->extent, 1, NULL, NULL, &job->request) != 0)
        return st_fail(err, GDU_ST_ERR_ENGINE, "%s: the engine refused the read", file->path);
    return GDU_ST_OK;
}

/* Waits for file f's read; a short read means the file shrank since it was opened. */
static gdu_st_status finish_file(gdu_st_model *m, size_t f, load_job *job, gdu_st_error *err)
{
    if (job->request == NULL)
        return GDU_ST_OK;
    char why[256] = "";
    uint64_t done = 0;
    int rc = gdu_io_wait(job->request, &done, why, sizeof why);
    job->request = NULL;
    if (rc != 0)
        return st_fail(err, GDU_ST_ERR_ENGINE, "%s: %s", m->files[f].path, why);
    if (done != job->extent.length)
        return st_fail(err, GDU_ST_ERR_IO, "%s: read %llu of %llu bytes (file truncated "
                       "while loading?)", m->files[f].path, (unsigned long long)done,
                       (unsigned long long)job->extent.length);
    m->stats.read_bytes += done;
    return GDU_ST_OK;
}

/* Points every tensor of the loaded files at its bytes. */
static void fill_addresses(gdu_st_model *m)
{
    for (size_t i = 0; i < m->tensor_count; i++) {
        gdu_st_tensor *t = &m->tensors[i];
        const st_file *file = &m->files[t->file];
        t->address = file->block->address + (t->file_offset - gdu_st_header_data_offset(file->header));
        t->device = file->block->kind == ST_MEM_DEVICE ? file->block->device : -1;
        m->stats.tensor_bytes += t->nbytes;
    }
}

gdu_st_status gdu_st_load(gdu_st_model *m, const gdu_st_load_options *options,
                          gdu_st_error *err)
{
    if (m == NULL)
        return st_fail(err, GDU_ST_ERR_INVALID_ARGUMENT, "NULL model");
    for (size_t f = 0; f < m->file_count; f++)
        if (m->files[f].block != NULL)
            return st_fail(err, GDU_ST_ERR_INVALID_ARGUMENT, "the model is already loaded");
    static const int gpu0 = 0;
    gdu_st_load_options o = options ? *options : (gdu_st_load_options){0};
    if (o.gpus == NULL || o.gpu_count == 0) {
        o.gpus = &gpu0;
        o.gpu_count = 1;
    }
    int host = o.target == GDU_ST_TARGET_HOST;
    double t0 = now_seconds();
    memset(&m->stats, 0, sizeof m->stats);

    load_job *jobs = calloc(m->file_count ? m->file_count : 1, sizeof *jobs);
    engine_slot *slots = calloc(o.gpu_count + 1, sizeof *slots);
    size_t n_slots = 0;
    gdu_st_status s = jobs && slots ? GDU_ST_OK : st_fail(err, GDU_ST_ERR_NOMEM, "out of memory");
    uint64_t total = 0, done = 0;
    for (size_t f = 0; f < m->file_count; f++)
        total += gdu_st_header_data_span(m->files[f].header);
    size_t started = 0;
    for (; s == GDU_ST_OK && started < m->file_count; started++)
        s = start_file(m, started, o.gpus[started % o.gpu_count], host, slots, &n_slots,
                       &jobs[started], err);
    /* Every submitted request is waited on, also after a failure. */
    for (size_t f = 0; jobs != NULL && f < started; f++) {
        gdu_st_error e2;
        gdu_st_status s2 = finish_file(m, f, &jobs[f], &e2);
        if (s == GDU_ST_OK && s2 != GDU_ST_OK) {
            s = s2;
            if (err != NULL)
                *err = e2;
        }
        gdu_io_close(jobs[f].io);
        done += gdu_st_header_data_span(m->files[f].header);
        if (s == GDU_ST_OK && o.progress != NULL)
            o.progress(o.progress_ctx, done, total);
    }
    for (size_t i = 0; slots != NULL && i < n_slots; i++)
        gdu_io_engine_destroy(slots[i].engine);
    free(jobs);
    free(slots);
    if (s != GDU_ST_OK) {
        for (size_t f = 0; f < m->file_count; f++) {
            st_block_release(m->files[f].block);
            m->files[f].block = NULL;
        }
        return s;
    }
    fill_addresses(m);
    m->stats.files = m->file_count;
    m->stats.tensors = m->tensor_count;
    m->stats.seconds = now_seconds() - t0;
    const st_block *b = m->file_count ? m->files[0].block : NULL;
    snprintf(m->stats.memory, sizeof m->stats.memory, "%s",
             b == NULL ? "none" : b->kind == ST_MEM_HOST && host ? "host (no libcuda: not pinned)"
                                                               : st_mem_kind_name(b->kind));
    if (m->stats.backend[0] == '\0')
        snprintf(m->stats.backend, sizeof m->stats.backend, "none");
    return st_ok(err);
}
