/* Host-memory loads through the I/O engine: byte-exact against the file,
 * sharded checkpoints, multi-piece files, verify, DLPack export and block
 * lifetime, and a file that shrinks between open and load. */
#include "gdunlock/safetensors.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>

#include <cmocka.h>

#define FIX GDUNLOCK_FIXTURES "/safetensors/"

static const gdu_st_load_options host = {.target = GDU_ST_TARGET_HOST};

static unsigned char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(*len ? *len : 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, *len, f), *len);
    fclose(f);
    return buf;
}

static gdu_st_model *load_host(const char *path)
{
    gdu_st_model *m = NULL;
    gdu_st_error err;
    if (gdu_st_open(path, &m, &err) != GDU_ST_OK || gdu_st_load(m, &host, &err) != GDU_ST_OK)
        fail_msg("%s: %s %s", path, gdu_st_status_name(err.code), err.message);
    return m;
}

/* Every tensor's loaded bytes equal the file's bytes at its offset. */
static void expect_byte_exact(const gdu_st_model *m)
{
    for (size_t f = 0; f < gdu_st_model_file_count(m); f++) {
        size_t len;
        unsigned char *file = read_file(gdu_st_model_file_path(m, f), &len);
        for (size_t i = 0; i < gdu_st_model_tensor_count(m); i++) {
            const gdu_st_tensor *t = gdu_st_model_tensor(m, i);
            if (t->file != f)
                continue;
            assert_int_equal(t->device, -1);
            assert_true(t->address != 0);
            assert_true(t->file_offset + t->nbytes <= len);
            assert_memory_equal((const void *)(uintptr_t)t->address, file + t->file_offset,
                                t->nbytes);
        }
        free(file);
    }
}

static void test_single_file_byte_exact(void **state)
{
    gdu_st_model *m = load_host(FIX "small.safetensors");
    expect_byte_exact(m);
    gdu_st_load_stats s = gdu_st_model_stats(m);
    assert_int_equal(s.files, 1);
    assert_int_equal(s.tensors, 12);
    assert_int_equal(s.tensor_bytes, s.read_bytes); /* no holes */
    /* "host", or "host+O_DIRECT" where the fixture was not in the page cache
     * when the engine looked (other tests' reads and memory pressure decide
     * that, not this test: under a loaded ctest -j16 it was evicted). */
    if (strcmp(s.backend, "host") != 0 && strcmp(s.backend, "host+O_DIRECT") != 0)
        fail_msg("backend %s, expected host", s.backend);
    assert_true(s.seconds > 0);
    assert_true(strlen(s.memory) > 0);
    gdu_st_error err;
    assert_int_equal(gdu_st_load(m, &host, &err), GDU_ST_ERR_INVALID_ARGUMENT); /* twice */
    assert_int_equal(gdu_st_verify(m, &err), GDU_ST_OK);
    gdu_st_model_free(m);
}

static void test_engines_released_and_recreated(void **state)
{
    gdu_st_model *m = load_host(FIX "small.safetensors");
    gdu_st_model_free(m);
    assert_int_equal(gdu_st_engines_release(NULL), GDU_ST_OK);
    assert_int_equal(gdu_st_engines_release(NULL), GDU_ST_OK); /* twice is harmless */
    m = load_host(FIX "small.safetensors");
    expect_byte_exact(m);
    gdu_st_model_free(m);
}

static void test_sharded_byte_exact(void **state)
{
    gdu_st_model *m = load_host(FIX "sharded/model.safetensors.index.json");
    assert_int_equal(gdu_st_model_file_count(m), 2);
    expect_byte_exact(m);
    gdu_st_model_free(m);
    m = load_host(FIX "empty.safetensors");
    assert_int_equal(gdu_st_model_tensor_count(m), 0);
    gdu_st_error err;
    assert_int_equal(gdu_st_verify(m, &err), GDU_ST_OK);
    gdu_st_model_free(m);
}

static void test_verify_names_the_corrupted_tensor(void **state)
{
    gdu_st_model *m = load_host(FIX "small.safetensors");
    long i = gdu_st_model_find(m, "model.layers.0.self_attn.q_proj.weight");
    const gdu_st_tensor *t = gdu_st_model_tensor(m, (size_t)i);
    ((unsigned char *)(uintptr_t)t->address)[100] ^= 0x40;
    gdu_st_error err;
    assert_int_equal(gdu_st_verify(m, &err), GDU_ST_ERR_VERIFY_MISMATCH);
    assert_non_null(strstr(err.message, "q_proj"));
    gdu_st_model_free(m);

    m = NULL;
    assert_int_equal(gdu_st_open(FIX "small.safetensors", &m, &err), GDU_ST_OK);
    assert_int_equal(gdu_st_verify(m, &err), GDU_ST_ERR_INVALID_ARGUMENT); /* not loaded */
    assert_null(gdu_st_model_dlpack(m, 0));
    gdu_st_model_free(m);
}

/* The DLPack 0.x layout, as a consumer sees it. */
typedef struct {
    void *data;
    int32_t device_type, device_id;
    int32_t ndim;
    uint8_t code, bits;
    uint16_t lanes;
    int64_t *shape, *strides;
    uint64_t byte_offset;
} dl_tensor;
typedef struct dl_managed {
    dl_tensor t;
    void *ctx;
    void (*deleter)(struct dl_managed *);
} dl_managed;

static void test_dlpack_outlives_model(void **state)
{
    gdu_st_model *m = load_host(FIX "small.safetensors");
    long i = gdu_st_model_find(m, "model.embed_tokens.weight");
    const gdu_st_tensor *t = gdu_st_model_tensor(m, (size_t)i);
    unsigned char expect[64];
    memcpy(expect, (const void *)(uintptr_t)t->address, sizeof expect);
    dl_managed *a = gdu_st_model_dlpack(m, (size_t)i);
    dl_managed *b = gdu_st_model_dlpack(m, 0);
    assert_non_null(a);
    assert_non_null(b);
    assert_null(gdu_st_model_dlpack(m, 12));
    assert_ptr_equal(a->t.data, (void *)(uintptr_t)t->address);
    assert_int_equal(a->t.device_type, 1); /* kDLCPU */
    assert_int_equal(a->t.ndim, 1);
    assert_int_equal(a->t.shape[0], 64 * 32 * 2);
    assert_null(a->t.strides);
    assert_int_equal(a->t.code, 1); /* kDLUInt */
    assert_int_equal(a->t.bits, 8);
    assert_int_equal(a->t.lanes, 1);
    assert_int_equal(a->t.byte_offset, 0);
    gdu_st_model_free(m);
    /* The block lives on while DLPack tensors use it (ASan/valgrind check this). */
    assert_memory_equal(a->t.data, expect, sizeof expect);
    a->deleter(a);
    assert_non_null(b->t.data);
    b->deleter(b);
}

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
    uint64_t *last = ctx;
    assert_true(done > last[0]);
    assert_true(done <= total);
    last[0] = done;
    last[1] = total;
    last[2]++;
}

/* A file spanning several engine pieces: header, then a sparse data section
 * with marks around the piece boundaries. */
static void make_big_file(const char *path, uint64_t data_bytes)
{
    char json[256];
    snprintf(json, sizeof json,
             "{\"big\":{\"dtype\":\"U8\",\"shape\":[%llu],"
             "\"data_offsets\":[0,%llu]}}",
             (unsigned long long)data_bytes, (unsigned long long)data_bytes);
    size_t n = strlen(json);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    unsigned char len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)((uint64_t)n >> (8 * i));
    fwrite(len, 1, 8, f);
    fwrite(json, 1, n, f);
    assert_int_equal(ftruncate(fileno(f), (off_t)(8 + n + data_bytes)), 0);
    uint64_t marks[] = {0, (256u << 20) - 5, 256u << 20, data_bytes - 5};
    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++) {
        fseek(f, (long)(8 + n + marks[i]), SEEK_SET);
        fwrite("MARK!", 1, 5, f);
    }
    fclose(f);
}

/* Two engine pieces and a little more. */
#define BIG_DATA ((uint64_t)(256u << 20) + 4096 + 11)

/* make_big_file at a fresh name from a mkstemp template. */
static void temp_big_file(char *path_template, uint64_t data_bytes)
{
    int fd = mkstemp(path_template);
    assert_true(fd >= 0);
    close(fd);
    make_big_file(path_template, data_bytes);
}

/* make_big_file's marks, loaded at p. */
static void expect_big_marks(const char *p, uint64_t data_bytes)
{
    assert_memory_equal(p, "MARK!", 5);
    assert_memory_equal(p + (256u << 20) - 5, "MARK!MARK!", 10);
    assert_memory_equal(p + data_bytes - 5, "MARK!", 5);
}

/* A model over a fresh big file, and host options reporting progress into
 * seen[3] (last done, total, calls). */
static gdu_st_model *open_big_with_progress(char *path_template, uint64_t *seen,
                                            gdu_st_load_options *o)
{
    temp_big_file(path_template, BIG_DATA);
    *o = host;
    o->progress = on_progress;
    o->progress_ctx = seen;
    gdu_st_model *m = NULL;
    gdu_st_error err;
    assert_int_equal(gdu_st_open(path_template, &m, &err), GDU_ST_OK);
    return m;
}

static void test_multi_piece_progress_and_shrink(void **state)
{
    char path[] = "/tmp/gdu_st_big_XXXXXX";
    const uint64_t data = BIG_DATA;
    uint64_t seen[3] = {0, 0, 0};
    gdu_st_load_options o;
    gdu_st_model *m = open_big_with_progress(path, seen, &o);
    gdu_st_error err;
    assert_int_equal(gdu_st_load(m, &o, &err), GDU_ST_OK);
    assert_int_equal(seen[0], data);
    assert_int_equal(seen[1], data);
    assert_int_equal(seen[2], 2); /* two pieces */
    const gdu_st_tensor *t = gdu_st_model_tensor(m, 0);
    const char *p = (const char *)(uintptr_t)t->address;
    expect_big_marks(p, data);
    assert_int_equal(p[12345], 0);
    assert_int_equal(gdu_st_verify(m, &err), GDU_ST_OK);
    gdu_st_model_free(m);

    /* The file shrinks after its header was read: the load must fail, not
     * claim success with missing bytes. */
    assert_int_equal(gdu_st_open(path, &m, &err), GDU_ST_OK);
    assert_int_equal(truncate(path, 4096), 0);
    gdu_st_status s = gdu_st_load(m, &host, &err);
    assert_int_equal(s, GDU_ST_ERR_IO);
    assert_non_null(strstr(err.message, "truncated"));
    assert_int_equal(gdu_st_model_tensor(m, 0)->address, 0);
    gdu_st_model_free(m);
    unlink(path);
}

/* gdu_st_load in halves: after _start every address is set and exported
 * (the Python module builds its tensors then), the bytes are there after
 * _finish; the model refuses what would read or reload it in between. */
static void test_started_load_exports_before_finish(void **state)
{
    char path[] = "/tmp/gdu_st_start_XXXXXX";
    const uint64_t data = BIG_DATA;
    uint64_t seen[3] = {0, 0, 0};
    gdu_st_load_options o;
    gdu_st_model *m = open_big_with_progress(path, seen, &o);
    gdu_st_error err;
    assert_int_equal(gdu_st_load_finish(m, &err), GDU_ST_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "no load was started"));

    assert_int_equal(gdu_st_load_start(m, &o, &err), GDU_ST_OK);
    const gdu_st_tensor *t = gdu_st_model_tensor(m, 0);
    assert_true(t->address != 0);
    assert_int_equal(t->device, -1);
    dl_managed *x = gdu_st_model_dlpack(m, 0);
    assert_non_null(x);
    assert_ptr_equal(x->t.data, (void *)(uintptr_t)t->address);
    assert_int_equal(gdu_st_verify(m, &err), GDU_ST_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "still running"));
    assert_int_equal(gdu_st_load_start(m, &o, &err), GDU_ST_ERR_INVALID_ARGUMENT);
    assert_int_equal(gdu_st_engines_release(&err), GDU_ST_ERR_BUSY);

    assert_int_equal(gdu_st_load_finish(m, &err), GDU_ST_OK);
    assert_int_equal(seen[0], data); /* progress reported by _finish */
    assert_int_equal(seen[2], 2);
    const char *p = x->t.data;
    expect_big_marks(p, data);
    assert_int_equal(gdu_st_verify(m, &err), GDU_ST_OK);
    gdu_st_load_stats st = gdu_st_model_stats(m);
    assert_int_equal(st.read_bytes, data);
    assert_true(st.seconds >= st.transfer_seconds && st.transfer_seconds > 0);
    assert_int_equal(gdu_st_load_finish(m, &err), GDU_ST_ERR_INVALID_ARGUMENT);
    gdu_st_model_free(m);
    x->deleter(x);
    unlink(path);
}

/* Freeing a started model waits for its reads and gives the engine back:
 * an export taken before holds every byte, and the engines can be released
 * (a model freed with its reads in flight would leave them leased). */
static void test_free_finishes_a_started_load(void **state)
{
    char path[] = "/tmp/gdu_st_free_XXXXXX";
    const uint64_t data = BIG_DATA;
    temp_big_file(path, data);
    gdu_st_model *m = NULL;
    gdu_st_error err;
    assert_int_equal(gdu_st_open(path, &m, &err), GDU_ST_OK);
    assert_int_equal(gdu_st_load_start(m, &host, &err), GDU_ST_OK);
    dl_managed *x = gdu_st_model_dlpack(m, 0);
    assert_non_null(x);
    gdu_st_model_free(m);
    assert_int_equal(gdu_st_engines_release(&err), GDU_ST_OK);
    const char *p = x->t.data;
    expect_big_marks(p, data);
    x->deleter(x);
    unlink(path);
}

/* A read that fails shows in _finish: the addresses go back to 0, nothing
 * exports any more, and an export taken before stays valid memory. */
static void test_failed_finish_clears_addresses(void **state)
{
    char path[] = "/tmp/gdu_st_fail_XXXXXX";
    temp_big_file(path, BIG_DATA);
    gdu_st_model *m = NULL;
    gdu_st_error err;
    assert_int_equal(gdu_st_open(path, &m, &err), GDU_ST_OK);
    assert_int_equal(truncate(path, 4096), 0);
    assert_int_equal(gdu_st_load_start(m, &host, &err), GDU_ST_OK);
    dl_managed *x = gdu_st_model_dlpack(m, 0);
    assert_non_null(x);
    assert_int_equal(gdu_st_load_finish(m, &err), GDU_ST_ERR_IO);
    assert_non_null(strstr(err.message, "truncated"));
    assert_int_equal(gdu_st_model_tensor(m, 0)->address, 0);
    assert_null(gdu_st_model_dlpack(m, 0));
    memset(x->t.data, 0, 4096); /* still its memory (ASan/valgrind check this) */
    x->deleter(x);
    gdu_st_model_free(m);
    assert_int_equal(gdu_st_engines_release(&err), GDU_ST_OK);
    unlink(path);
}

/* Three tensors whose data section needs two memory segments: the second
 * starts at tensor b (256 MiB + 104 into the data), in its own allocation,
 * and must keep the alignment it has in the file. */
static void test_segments_at_tensor_boundaries(void **state)
{
    const uint64_t a_end = (256u << 20) + 104, b_end = a_end + 4096, c_end = b_end + 11;
    char json[512];
    snprintf(json, sizeof json,
             "{\"a\":{\"dtype\":\"U8\",\"shape\":[%llu],\"data_offsets\":[0,%llu]},"
             "\"b\":{\"dtype\":\"F32\",\"shape\":[1024],\"data_offsets\":[%llu,%llu]},"
             "\"c\":{\"dtype\":\"U8\",\"shape\":[11],\"data_offsets\":[%llu,%llu]}}",
             (unsigned long long)a_end, (unsigned long long)a_end, (unsigned long long)a_end,
             (unsigned long long)b_end, (unsigned long long)b_end, (unsigned long long)c_end);
    char path[] = "/tmp/gdu_st_seg_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t n = strlen(json);
    unsigned char len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)((uint64_t)n >> (8 * i));
    assert_int_equal(write(fd, len, 8), 8);
    assert_int_equal(write(fd, json, n), (ssize_t)n);
    assert_int_equal(ftruncate(fd, (off_t)(8 + n + c_end)), 0);
    const uint64_t marks[] = {0, a_end - 5, a_end, b_end - 5, b_end, c_end - 5};
    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++)
        assert_int_equal(pwrite(fd, "MARK!", 5, (off_t)(8 + n + marks[i])), 5);
    close(fd);

    gdu_st_model *m = NULL;
    gdu_st_error err;
    assert_int_equal(gdu_st_open(path, &m, &err), GDU_ST_OK);
    assert_int_equal(gdu_st_load(m, &host, &err), GDU_ST_OK);
    const gdu_st_tensor *a = gdu_st_model_tensor(m, 0), *b = gdu_st_model_tensor(m, 1),
                        *c = gdu_st_model_tensor(m, 2);
    const char *pa = (const char *)(uintptr_t)a->address, *pb = (const char *)(uintptr_t)b->address,
               *pc = (const char *)(uintptr_t)c->address;
    assert_int_equal(b->address % 256, a_end % 256); /* the file's alignment */
    assert_int_equal(c->address, b->address + 4096); /* same segment as b */
    assert_memory_equal(pa, "MARK!", 5);
    assert_memory_equal(pa + a_end - 5, "MARK!", 5);
    assert_memory_equal(pb, "MARK!", 5);
    assert_memory_equal(pb + 4096 - 5, "MARK!", 5);
    assert_memory_equal(pc, "MARK!", 5);
    assert_memory_equal(pc + 11 - 5, "MARK!", 5);
    assert_int_equal(gdu_st_verify(m, &err), GDU_ST_OK);
    gdu_st_load_stats st = gdu_st_model_stats(m);
    assert_true(st.transfer_seconds > 0 && st.alloc_seconds > 0);
    assert_int_equal(st.read_bytes, c_end);
    gdu_st_model_free(m);
    unlink(path);
}

/* A load blocked in its progress callback (so: running, its requests
 * queued) while another thread asks to release the engines. */
typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int in_callback, go_on;
} gate;

static void blocking_progress(void *ctx, uint64_t done, uint64_t total)
{
    gate *g = ctx;
    pthread_mutex_lock(&g->lock);
    g->in_callback = 1;
    pthread_cond_broadcast(&g->cond);
    while (!g->go_on)
        pthread_cond_wait(&g->cond, &g->lock);
    pthread_mutex_unlock(&g->lock);
}

typedef struct {
    gate *g;
    gdu_st_status status;
    gdu_st_model *model;
} load_job;

static void *load_thread(void *arg)
{
    load_job *job = arg;
    gdu_st_load_options o = host;
    o.progress = blocking_progress;
    o.progress_ctx = job->g;
    gdu_st_error err;
    job->status = gdu_st_open(FIX "sharded/model.safetensors.index.json", &job->model, &err);
    if (job->status == GDU_ST_OK)
        job->status = gdu_st_load(job->model, &o, &err);
    return NULL;
}

/* Releasing the engines while a load uses them is refused (the load would
 * otherwise wait forever on an engine that no longer runs), and works once
 * the load has finished; a lease from gdu_st_engine_acquire counts too. */
static void test_release_refused_while_loading(void **state)
{
    gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
    load_job job = {&g, GDU_ST_ERR_INVALID_ARGUMENT, NULL};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, load_thread, &job), 0);
    pthread_mutex_lock(&g.lock);
    while (!g.in_callback)
        pthread_cond_wait(&g.cond, &g.lock);
    pthread_mutex_unlock(&g.lock);
    gdu_st_error err;
    assert_int_equal(gdu_st_engines_release(&err), GDU_ST_ERR_BUSY);
    assert_non_null(strstr(err.message, "still use"));
    pthread_mutex_lock(&g.lock);
    g.go_on = 1;
    pthread_cond_broadcast(&g.cond);
    pthread_mutex_unlock(&g.lock);
    pthread_join(t, NULL);
    assert_int_equal(job.status, GDU_ST_OK);
    expect_byte_exact(job.model);
    gdu_st_model_free(job.model);
    assert_int_equal(gdu_st_engines_release(&err), GDU_ST_OK);

    gdu_io_engine *e = NULL;
    assert_int_equal(gdu_st_engine_acquire(1, 0, &e, &err), GDU_ST_OK);
    assert_non_null(e);
    assert_int_equal(gdu_st_engines_release(&err), GDU_ST_ERR_BUSY);
    assert_int_equal(gdu_st_engine_return(e), GDU_ST_OK);
    assert_int_equal(gdu_st_engines_release(&err), GDU_ST_OK);
}

/* A return of an engine that has no lease out (one never leased, or a
 * lease returned twice) is refused and cancels no other lease: before, it
 * let gdu_st_engines_release destroy the engine a reader still held (a
 * use-after-free under ASan at the reader's next open). */
static void test_foreign_and_double_returns_refused(void **state)
{
    gdu_io_engine *e = NULL;
    gdu_st_error err;
    assert_int_equal(gdu_st_engine_acquire(1, 0, &e, &err), GDU_ST_OK);
    int other = 0;
    assert_int_equal(gdu_st_engine_return((gdu_io_engine *)&other), GDU_ST_ERR_INVALID_ARGUMENT);
    assert_int_equal(gdu_st_engines_release(&err), GDU_ST_ERR_BUSY);
    gdu_io_file *f = NULL;
    char why[256];
    assert_int_equal(gdu_io_open(e, FIX "small.safetensors", GDU_IO_READ, &f, why, sizeof why), 0);
    gdu_io_close(f);
    assert_int_equal(gdu_st_engine_return(e), GDU_ST_OK);
    assert_int_equal(gdu_st_engine_return(e), GDU_ST_ERR_INVALID_ARGUMENT); /* twice */
    assert_int_equal(gdu_st_engine_return(NULL), GDU_ST_OK);
    assert_int_equal(gdu_st_engines_release(&err), GDU_ST_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_file_byte_exact),
        cmocka_unit_test(test_sharded_byte_exact),
        cmocka_unit_test(test_engines_released_and_recreated),
        cmocka_unit_test(test_verify_names_the_corrupted_tensor),
        cmocka_unit_test(test_dlpack_outlives_model),
        cmocka_unit_test(test_multi_piece_progress_and_shrink),
        cmocka_unit_test(test_started_load_exports_before_finish),
        cmocka_unit_test(test_free_finishes_a_started_load),
        cmocka_unit_test(test_failed_finish_clears_addresses),
        cmocka_unit_test(test_segments_at_tensor_boundaries),
        cmocka_unit_test(test_release_refused_while_loading),
        cmocka_unit_test(test_foreign_and_double_returns_refused),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    gdu_st_engines_release(NULL);
    return failed;
}
