/* Opening checkpoints: single files, sharded indexes, refused indexes and
 * hostile files from tests/fixtures/safetensors (made by make_fixtures.py). */
#include "gdunlock/safetensors.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#define FIX GDUNLOCK_FIXTURES "/safetensors/"

static gdu_st_model *open_ok(const char *path)
{
    gdu_st_model *m = NULL;
    gdu_st_error err;
    gdu_st_status s = gdu_st_open(path, &m, &err);
    if (s != GDU_ST_OK)
        fail_msg("%s: %s %s", path, gdu_st_status_name(s), err.message);
    return m;
}

static void expect_open(const char *path, gdu_st_status want)
{
    gdu_st_model *m = (gdu_st_model *)0x1;
    gdu_st_error err;
    gdu_st_status s = gdu_st_open(path, &m, &err);
    if (s != want)
        fail_msg("%s: got %s (%s), want %s", path, gdu_st_status_name(s), err.message,
                 gdu_st_status_name(want));
    assert_null(m);
    assert_non_null(strstr(err.message, strrchr(path, '/') + 1));
}

static void test_single_file(void **state)
{
    gdu_st_model *m = open_ok(FIX "small.safetensors");
    assert_int_equal(gdu_st_model_file_count(m), 1);
    assert_int_equal(gdu_st_model_tensor_count(m), 12);
    const gdu_st_header *h = gdu_st_model_file_header(m, 0);
    assert_int_equal(gdu_st_header_hole_bytes(h), 0);
    assert_int_equal(gdu_st_header_trailing_bytes(h), 0);
    assert_int_equal(gdu_st_header_data_offset(h) % 8, 0); /* the writer pads the header */
    assert_int_equal(gdu_st_header_metadata_count(h), 2);

    long i = gdu_st_model_find(m, "model.embed_tokens.weight");
    assert_true(i >= 0);
    const gdu_st_tensor *t = gdu_st_model_tensor(m, (size_t)i);
    assert_int_equal(t->dtype, GDU_ST_BF16);
    assert_int_equal(t->ndim, 2);
    assert_int_equal(t->shape[0], 64);
    assert_int_equal(t->nbytes, 64 * 32 * 2);
    assert_int_equal(t->address, 0); /* not loaded */
    assert_int_equal(t->file, 0);
    assert_int_equal(t->file_offset % 2, 0); /* aligned to its element size */
    assert_true(gdu_st_model_find(m, "\xe6\xa8\xa1\xe5\x9e\x8b.\xce\xb1") >= 0);
    assert_int_equal(gdu_st_model_find(m, "nope"), -1);
    assert_int_equal(gdu_st_model_find(m, NULL), -1);
    assert_null(gdu_st_model_tensor(m, 12));
    assert_null(gdu_st_model_file_path(m, 1));
    gdu_st_load_stats st = gdu_st_model_stats(m);
    assert_int_equal(st.tensors, 0);
    /* Every tensor aligned to its element size, as the reference writer leaves them. */
    for (size_t k = 0; k < gdu_st_model_tensor_count(m); k++) {
        const gdu_st_tensor *x = gdu_st_model_tensor(m, k);
        unsigned bytes = gdu_st_dtype_bits(x->dtype) / 8;
        if (bytes > 1)
            assert_int_equal(x->file_offset % bytes, 0);
    }
    gdu_st_model_free(m);

    m = open_ok(FIX "empty.safetensors");
    assert_int_equal(gdu_st_model_tensor_count(m), 0);
    gdu_st_model_free(m);
    gdu_st_model_free(NULL);
}

static void test_sharded(void **state)
{
    gdu_st_model *m = open_ok(FIX "sharded/model.safetensors.index.json");
    assert_int_equal(gdu_st_model_file_count(m), 2);
    assert_int_equal(gdu_st_model_tensor_count(m), 12);
    assert_non_null(strstr(gdu_st_model_file_path(m, 0), "sharded/model-0000"));
    /* Each tensor says which shard it is in. */
    long i = gdu_st_model_find(m, "scale");
    assert_true(i >= 0);
    const gdu_st_tensor *t = gdu_st_model_tensor(m, (size_t)i);
    assert_non_null(strstr(gdu_st_model_file_path(m, t->file), "model-00002-of-00002"));
    i = gdu_st_model_find(m, "model.layers.0.mlp.gate.weight");
    t = gdu_st_model_tensor(m, (size_t)i);
    assert_non_null(strstr(gdu_st_model_file_path(m, t->file), "model-00001-of-00002"));
    gdu_st_model_free(m);
}

static void test_refused_indexes(void **state)
{
    expect_open(FIX "bad_index/escape.index.json", GDU_ST_ERR_PATH_ESCAPE);
    expect_open(FIX "bad_index/absolute.index.json", GDU_ST_ERR_PATH_ESCAPE);
    expect_open(FIX "bad_index/missing_tensor.index.json", GDU_ST_ERR_INDEX);
    expect_open(FIX "bad_index/wrong_shard.index.json", GDU_ST_ERR_INDEX);
    expect_open(FIX "bad_index/no_weight_map.index.json", GDU_ST_ERR_INDEX);
    expect_open(FIX "bad_index/duplicate.index.json", GDU_ST_ERR_DUPLICATE_TENSOR);
    expect_open(FIX "bad_index/nonexistent.index.json", GDU_ST_ERR_OPEN);
}

static void test_hostile_files(void **state)
{
    expect_open(FIX "hostile/truncated.safetensors", GDU_ST_ERR_OUT_OF_RANGE);
    expect_open(FIX "hostile/huge_length.safetensors", GDU_ST_ERR_HEADER_LENGTH);
    expect_open(FIX "hostile/tiny.safetensors", GDU_ST_ERR_TOO_SMALL);
    expect_open(FIX "hostile/overlap.safetensors", GDU_ST_ERR_OVERLAP);
    expect_open(FIX "missing.safetensors", GDU_ST_ERR_OPEN);
    expect_open(GDUNLOCK_FIXTURES "/safetensors", GDU_ST_ERR_OPEN); /* a folder */
    gdu_st_model *m;
    assert_int_equal(gdu_st_open(NULL, &m, NULL), GDU_ST_ERR_INVALID_ARGUMENT);
}

static void test_damaged_files_strict_and_lenient(void **state)
{
    const char *damaged[] = {FIX "hostile/hole.safetensors", FIX "hostile/late_start.safetensors",
                             FIX "hostile/trailing.safetensors"};
    const gdu_st_status want[] = {GDU_ST_ERR_HOLE, GDU_ST_ERR_HOLE, GDU_ST_ERR_TRAILING};
    for (size_t i = 0; i < 3; i++) {
        expect_open(damaged[i], want[i]);
        gdu_st_model *m = NULL;
        gdu_st_error err;
        assert_int_equal(gdu_st_open_flags(damaged[i], GDU_ST_LENIENT, &m, &err), GDU_ST_OK);
        const gdu_st_header *h = gdu_st_model_file_header(m, 0);
        assert_true(gdu_st_header_hole_bytes(h) + gdu_st_header_trailing_bytes(h) > 0);
        gdu_st_model_free(m);
    }
    /* Overlaps stay refused when lenient. */
    gdu_st_model *m = NULL;
    assert_int_equal(gdu_st_open_flags(FIX "hostile/overlap.safetensors", GDU_ST_LENIENT, &m, NULL),
                     GDU_ST_ERR_OVERLAP);
}

/* A scratch folder under /tmp for links and FIFOs. */
static char *scratch(void)
{
    char *dir = strdup("/tmp/gdu_st_open_XXXXXX");
    assert_non_null(mkdtemp(dir));
    return dir;
}

static void copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    assert_non_null(in);
    assert_non_null(out);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        assert_int_equal(fwrite(buf, 1, n, out), n);
    fclose(in);
    fclose(out);
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    return remove(path);
}

/* rm -r dir (links are removed, not followed). */
static void remove_tree(char *dir)
{
    assert_int_equal(nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS), 0);
    free(dir);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* Runs in a child with an alarm, so a blocking open fails the test instead
 * of hanging it: returns the status gdu_st_open gave, or -1 on a timeout. */
static int open_status_with_timeout(const char *path)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(5);
        gdu_st_model *m = NULL;
        gdu_st_status s = gdu_st_open(path, &m, NULL);
        gdu_st_model_free(m);
        _exit((int)s);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_fifo_is_refused_without_blocking(void **state)
{
    char *dir = scratch();
    char fifo[256], index[256], shard_index[256];
    snprintf(fifo, sizeof fifo, "%s/model.safetensors", dir);
    snprintf(index, sizeof index, "%s/fifo.index.json", dir);
    snprintf(shard_index, sizeof shard_index, "%s/model.safetensors.index.json", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(mkfifo(index, 0600), 0);
    write_text(shard_index, "{\"weight_map\":{\"t\":\"model.safetensors\"}}");
    /* The file itself, an index that is a FIFO, and a shard that is one. */
    assert_int_equal(open_status_with_timeout(fifo), GDU_ST_ERR_OPEN);
    assert_int_equal(open_status_with_timeout(index), GDU_ST_ERR_OPEN);
    assert_int_equal(open_status_with_timeout(shard_index), GDU_ST_ERR_OPEN);
    gdu_st_error err;
    gdu_st_model *m = NULL;
    assert_int_equal(gdu_st_open(shard_index, &m, &err), GDU_ST_ERR_OPEN);
    assert_non_null(strstr(err.message, "not a regular file"));
    remove_tree(dir);
}

static void test_shard_links_must_stay_inside(void **state)
{
    char *dir = scratch();
    char path[512], target[512], index[512];
    /* A link to a file outside the index's folder is refused... */
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    assert_int_equal(symlink(FIX "small.safetensors", path), 0);
    snprintf(index, sizeof index, "%s/model.safetensors.index.json", dir);
    write_text(index, "{\"weight_map\":{\"scale\":\"model.safetensors\"}}");
    gdu_st_model *m = NULL;
    gdu_st_error err;
    assert_int_equal(gdu_st_open(index, &m, &err), GDU_ST_ERR_PATH_ESCAPE);
    assert_non_null(strstr(err.message, "outside the index's folder"));
    /* ...and so is a file reached through a linked folder. */
    unlink(path);
    snprintf(path, sizeof path, "%s/sub", dir);
    assert_int_equal(symlink(GDUNLOCK_FIXTURES "/safetensors", path), 0);
    write_text(index, "{\"weight_map\":{\"scale\":\"sub/small.safetensors\"}}");
    assert_int_equal(gdu_st_open(index, &m, &err), GDU_ST_ERR_PATH_ESCAPE);
    unlink(path);
    /* A link inside the folder is fine. */
    snprintf(target, sizeof target, "%s/real.safetensors", dir);
    copy_file(FIX "small.safetensors", target);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    assert_int_equal(symlink("real.safetensors", path), 0);
    write_text(index, "{\"weight_map\":{\"scale\":\"model.safetensors\"}}");
    m = open_ok(index);
    gdu_st_model_free(m);
    remove_tree(dir);
}

/* The Hugging Face cache: snapshots/REV/ holds links to ../../blobs/HASH. */
static void test_hugging_face_cache_layout(void **state)
{
    char *dir = scratch();
    char p[512], q[512];
    const char *folders[] = {"blobs", "snapshots", "snapshots/rev1"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, folders[i]);
        assert_int_equal(mkdir(p, 0700), 0);
    }
    /* The shard's blob: a copy of the sharded fixture's second file. */
    snprintf(p, sizeof p, "%s/blobs/abc123", dir);
    copy_file(FIX "sharded/model-00002-of-00002.safetensors", p);
    snprintf(p, sizeof p, "%s/blobs/idx456", dir);
    write_text(p, "{\"weight_map\":{\"scale\":\"model-00002-of-00002.safetensors\"}}");
    snprintf(p, sizeof p, "%s/snapshots/rev1/model-00002-of-00002.safetensors", dir);
    assert_int_equal(symlink("../../blobs/abc123", p), 0);
    snprintf(q, sizeof q, "%s/snapshots/rev1/model.safetensors.index.json", dir);
    assert_int_equal(symlink("../../blobs/idx456", q), 0);
    gdu_st_model *m = open_ok(q);
    assert_true(gdu_st_model_find(m, "scale") >= 0);
    gdu_st_model_free(m);
    remove_tree(dir);
}

static void index_status(const char *json, gdu_st_status want, size_t shards_want)
{
    char **shards = NULL;
    size_t n = 0, tensors = 0;
    gdu_st_error err;
    gdu_st_status s = gdu_st_index_parse(json, strlen(json), &shards, &n, &tensors, &err);
    if (s != want)
        fail_msg("%s: got %s (%s)", json, gdu_st_status_name(s), err.message);
    if (s == GDU_ST_OK) {
        assert_int_equal(n, shards_want);
        assert_null(shards[n]);
    }
    gdu_st_string_list_free(shards);
}

static void test_index_names(void **state)
{
    index_status("{\"weight_map\":{\"a\":\"x.st\",\"b\":\"y.st\",\"c\":\"x.st\"}}", GDU_ST_OK, 2);
    index_status("{\"weight_map\":{\"a\":\"sub/x.st\",\"b\":\"./y.st\",\"c\":\"..z\"}}", GDU_ST_OK,
                 3);
    index_status("{\"weight_map\":{\"a\":\"..\"}}", GDU_ST_ERR_PATH_ESCAPE, 0);
    index_status("{\"weight_map\":{\"a\":\"sub/../../x\"}}", GDU_ST_ERR_PATH_ESCAPE, 0);
    index_status("{\"weight_map\":{\"a\":\"sub/..\"}}", GDU_ST_ERR_PATH_ESCAPE, 0);
    index_status("{\"weight_map\":{\"a\":\"/x\"}}", GDU_ST_ERR_PATH_ESCAPE, 0);
    index_status("{\"weight_map\":{\"a\":\"\"}}", GDU_ST_ERR_PATH_ESCAPE, 0);
    index_status("{\"weight_map\":{\"a\":3}}", GDU_ST_ERR_INDEX, 0);
    index_status("{\"weight_map\":{}}", GDU_ST_ERR_INDEX, 0);
    index_status("{\"weight_map\":[]}", GDU_ST_ERR_INDEX, 0);
    index_status("{\"weight_map\":{\"a\":\"x\",\"a\":\"y\"}}", GDU_ST_ERR_INDEX, 0);
    index_status("not json", GDU_ST_ERR_INDEX, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_file),
        cmocka_unit_test(test_sharded),
        cmocka_unit_test(test_refused_indexes),
        cmocka_unit_test(test_hostile_files),
        cmocka_unit_test(test_index_names),
        cmocka_unit_test(test_damaged_files_strict_and_lenient),
        cmocka_unit_test(test_fifo_is_refused_without_blocking),
        cmocka_unit_test(test_shard_links_must_stay_inside),
        cmocka_unit_test(test_hugging_face_cache_layout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
