/* Which file a model reads: the one whose header it validated, whatever its
 * path names later (a writer replacing a checkpoint by rename); a file that
 * had to be opened again only if it is that file, unchanged; never a FIFO
 * swapped in (no hang); and checkpoints of more shards than the process may
 * open files. Small files in a scratch folder; an alarm turns a hang into a
 * failure. */
#include "gdunlock/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

static const gdu_st_load_options host = {.target = GDU_ST_TARGET_HOST};

#define TENSOR_BYTES 16

/* The byte at position i of the shard numbered n, in generation gen (a
 * rewritten file has other bytes at the same offsets). */
static unsigned char shard_byte(size_t n, size_t i, int gen)
{
    return (unsigned char)(n * 31 + i * 7 + (size_t)gen * 101 + 1);
}

typedef struct {
    char dir[64];
    size_t shards;
    char index[128];
} checkpoint;

static void shard_path(const checkpoint *c, size_t n, char *path, size_t len)
{
    snprintf(path, len, "%s/s%03zu.safetensors", c->dir, n);
}

/* Writes shard n at path: one U8 tensor "tNNN" of TENSOR_BYTES bytes. */
static void write_shard(const char *path, size_t n, int gen)
{
    char json[128];
    int len = snprintf(json, sizeof json,
                       "{\"t%03zu\":{\"dtype\":\"U8\",\"shape\":[%d],\"data_offsets\":[0,%d]}}", n,
                       TENSOR_BYTES, TENSOR_BYTES);
    unsigned char data[8 + sizeof json + TENSOR_BYTES];
    for (int i = 0; i < 8; i++)
        data[i] = (unsigned char)((uint64_t)len >> (8 * i));
    memcpy(data + 8, json, (size_t)len);
    for (size_t i = 0; i < TENSOR_BYTES; i++)
        data[8 + (size_t)len + i] = shard_byte(n, i, gen);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, 8 + (size_t)len + TENSOR_BYTES, f),
                     8 + (size_t)len + TENSOR_BYTES);
    assert_int_equal(fclose(f), 0);
}

/* A checkpoint of `shards` shards and its index in a fresh folder. */
static void make_checkpoint(checkpoint *c, size_t shards)
{
    snprintf(c->dir, sizeof c->dir, "/tmp/gdu_st_files_XXXXXX");
    assert_non_null(mkdtemp(c->dir));
    c->shards = shards;
    snprintf(c->index, sizeof c->index, "%s/model.safetensors.index.json", c->dir);
    FILE *idx = fopen(c->index, "w");
    assert_non_null(idx);
    fputs("{\"weight_map\":{", idx);
    for (size_t n = 0; n < shards; n++) {
        char path[128];
        shard_path(c, n, path, sizeof path);
        write_shard(path, n, 0);
        fprintf(idx, "%s\"t%03zu\":\"s%03zu.safetensors\"", n ? "," : "", n, n);
    }
    fputs("}}", idx);
    assert_int_equal(fclose(idx), 0);
}

static void remove_checkpoint(checkpoint *c)
{
    for (size_t n = 0; n < c->shards; n++) {
        char path[128];
        shard_path(c, n, path, sizeof path);
        unlink(path);
    }
    char other[128];
    snprintf(other, sizeof other, "%s/other", c->dir);
    unlink(other);
    unlink(c->index);
    rmdir(c->dir);
}

enum { NEW_BYTES, FIFO };

/* Replaces shard n by rename with a file of the same layout, other bytes
 * (generation 1), or with a FIFO. */
static void replace_shard(const checkpoint *c, size_t n, int fifo)
{
    char path[128], other[128];
    shard_path(c, n, path, sizeof path);
    snprintf(other, sizeof other, "%s/other", c->dir);
    if (fifo)
        assert_int_equal(mkfifo(other, 0600), 0);
    else
        write_shard(other, n, 1);
    assert_int_equal(rename(other, path), 0);
}

/* Every tensor's loaded bytes are generation 0's, the bytes validated. */
static void expect_generation0(const gdu_st_model *m)
{
    for (size_t i = 0; i < gdu_st_model_tensor_count(m); i++) {
        const gdu_st_tensor *t = gdu_st_model_tensor(m, i);
        size_t n = (size_t)strtoul(t->name + 1, NULL, 10);
        const unsigned char *p = (const unsigned char *)(uintptr_t)t->address;
        assert_non_null(p);
        for (size_t b = 0; b < TENSOR_BYTES; b++)
            if (p[b] != shard_byte(n, b, 0))
                fail_msg("%s byte %zu: %u, the validated file holds %u", t->name, b, p[b],
                         shard_byte(n, b, 0));
    }
}

static gdu_st_model *open_ok(const char *path)
{
    gdu_st_model *m = NULL;
    gdu_st_error err;
    if (gdu_st_open(path, &m, &err) != GDU_ST_OK)
        fail_msg("%s: %s", path, err.message);
    return m;
}

/* Lowers the soft open-file limit to n (the engines are made first: they
 * stay for the process); returns the old one. */
static rlim_t limit_files(rlim_t n)
{
    gdu_io_engine *e = NULL;
    assert_int_equal(gdu_st_engine_acquire(1, 0, &e, NULL), GDU_ST_OK);
    assert_int_equal(gdu_st_engine_return(e), GDU_ST_OK);
    struct rlimit lim;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &lim), 0);
    rlim_t old = lim.rlim_cur;
    lim.rlim_cur = n;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &lim), 0);
    return old;
}

static void restore_files(rlim_t old)
{
    struct rlimit lim;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &lim), 0);
    lim.rlim_cur = old;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &lim), 0);
}

/* A shard replaced by rename after the open (a writer updating the
 * checkpoint): load, verify and the readers' file open all read the file
 * validated. It held other bytes at the header's offsets, so a load by path
 * reads them, and verify re-reading the path agrees with it. */
static void test_replaced_file_is_not_read(void **state)
{
    checkpoint c;
    make_checkpoint(&c, 2);
    gdu_st_model *m = open_ok(c.index);
    replace_shard(&c, 1, NEW_BYTES);
    gdu_st_error err;
    assert_int_equal(gdu_st_load(m, &host, &err), GDU_ST_OK);
    expect_generation0(m);
    assert_int_equal(gdu_st_verify(m, &err), GDU_ST_OK);

    gdu_io_engine *e = NULL;
    assert_int_equal(gdu_st_engine_acquire(1, 0, &e, &err), GDU_ST_OK);
    gdu_io_file *f = NULL;
    assert_int_equal(gdu_st_model_file_open(m, 1, e, &f, &err), GDU_ST_OK);
    const gdu_st_tensor *t = gdu_st_model_tensor(m, 1);
    unsigned char buf[TENSOR_BYTES];
    uint64_t done = 0;
    assert_int_equal(gdu_io_read(f, t->file_offset, TENSOR_BYTES, buf, &done, NULL, 0), 0);
    assert_int_equal(done, TENSOR_BYTES);
    assert_int_equal(buf[3], shard_byte(1, 3, 0));
    gdu_io_close(f);
    assert_int_equal(gdu_st_model_file_open(m, 2, e, &f, &err), GDU_ST_ERR_INVALID_ARGUMENT);
    assert_null(f);
    assert_int_equal(gdu_st_engine_return(e), GDU_ST_OK);
    gdu_st_model_free(m);
    remove_checkpoint(&c);
}

/* verify compares the loaded bytes with the file validated, not with what
 * the path names by then: a file replaced after the load changes nothing. */
static void test_verify_reads_the_validated_file(void **state)
{
    checkpoint c;
    make_checkpoint(&c, 1);
    char path[128];
    shard_path(&c, 0, path, sizeof path);
    gdu_st_model *m = open_ok(path);
    gdu_st_error err;
    assert_int_equal(gdu_st_load(m, &host, &err), GDU_ST_OK);
    replace_shard(&c, 0, NEW_BYTES);
    assert_int_equal(gdu_st_verify(m, &err), GDU_ST_OK);
    /* and a changed loaded byte is still caught */
    ((unsigned char *)(uintptr_t)gdu_st_model_tensor(m, 0)->address)[5] ^= 1;
    assert_int_equal(gdu_st_verify(m, &err), GDU_ST_ERR_VERIFY_MISMATCH);
    gdu_st_model_free(m);
    remove_checkpoint(&c);
}

/* Past the descriptors a model keeps (an eighth of the open-file limit:
 * here 1 of 12), files are opened again by path: a file replaced there is
 * refused as changed, a FIFO refused at once, the same file read. */
static void test_reopened_file_must_be_the_same(void **state)
{
    checkpoint c;
    make_checkpoint(&c, 3);
    rlim_t old = limit_files(12);
    gdu_st_model *m = open_ok(c.index);
    replace_shard(&c, 2, NEW_BYTES);
    gdu_st_error err;
    alarm(10);
    assert_int_equal(gdu_st_load(m, &host, &err), GDU_ST_ERR_CHANGED);
    assert_non_null(strstr(err.message, "s002.safetensors is not the file that was opened"));
    gdu_st_model_free(m);

    m = open_ok(c.index); /* the new file, validated now */
    assert_int_equal(gdu_st_load(m, &host, &err), GDU_ST_OK);
    assert_int_equal(gdu_st_verify(m, &err), GDU_ST_OK);
    replace_shard(&c, 1, NEW_BYTES); /* after the load: verify refuses it */
    assert_int_equal(gdu_st_verify(m, &err), GDU_ST_ERR_CHANGED);
    gdu_st_model_free(m);

    m = open_ok(c.index);
    replace_shard(&c, 1, FIFO); /* a FIFO without a writer: refused, not waited on */
    assert_int_equal(gdu_st_load(m, &host, &err), GDU_ST_ERR_OPEN);
    assert_non_null(strstr(err.message, "not a regular file"));
    alarm(0);
    gdu_st_model_free(m);
    restore_files(old);
    remove_checkpoint(&c);
}

/* A file opened again by path that was rewritten in place with its
 * modification time put back (cp -p, rsync --inplace -t): the same device,
 * inode, size and modification time, other bytes. Its change time cannot be
 * put back: refused as changed. */
static void test_reopened_file_rewritten_in_place_is_refused(void **state)
{
    checkpoint c;
    make_checkpoint(&c, 3);
    rlim_t old = limit_files(12);
    gdu_st_model *m = open_ok(c.index);
    char path[128];
    shard_path(&c, 2, path, sizeof path);
    struct stat before, after;
    assert_int_equal(stat(path, &before), 0);
    usleep(20000); /* past the file system's clock tick: the change time moves */
    write_shard(path, 2, 1);
    struct timespec times[2] = {before.st_atim, before.st_mtim};
    assert_int_equal(utimensat(AT_FDCWD, path, times, 0), 0);
    assert_int_equal(stat(path, &after), 0);
    assert_true(after.st_ino == before.st_ino && after.st_size == before.st_size &&
                after.st_mtim.tv_sec == before.st_mtim.tv_sec &&
                after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);
    gdu_st_error err;
    assert_int_equal(gdu_st_load(m, &host, &err), GDU_ST_ERR_CHANGED);
    assert_non_null(strstr(err.message, "s002.safetensors is not the file that was opened"));
    gdu_st_model_free(m);
    restore_files(old);
    remove_checkpoint(&c);
}

/* A FIFO renamed over a kept file: the load reads the file validated. */
static void test_fifo_swapped_in_is_not_opened(void **state)
{
    checkpoint c;
    make_checkpoint(&c, 1);
    char path[128];
    shard_path(&c, 0, path, sizeof path);
    gdu_st_model *m = open_ok(path);
    replace_shard(&c, 0, FIFO);
    alarm(10);
    gdu_st_error err;
    assert_int_equal(gdu_st_load(m, &host, &err), GDU_ST_OK);
    expect_generation0(m);
    alarm(0);
    gdu_st_model_free(m);
    remove_checkpoint(&c);
}

/* More shards than the process may open files: the model keeps few
 * descriptors and the load opens files as it reaches them. */
static void test_more_shards_than_the_open_file_limit(void **state)
{
    checkpoint c;
    make_checkpoint(&c, 40);
    rlim_t old = limit_files(24);
    gdu_st_model *m = open_ok(c.index);
    gdu_st_error err;
    if (gdu_st_load(m, &host, &err) != GDU_ST_OK)
        fail_msg("%s: %s", gdu_st_status_name(err.code), err.message);
    expect_generation0(m);
    assert_int_equal(gdu_st_verify(m, &err), GDU_ST_OK);
    gdu_st_model_free(m);
    restore_files(old);
    remove_checkpoint(&c);
}

/* At the open-file limit itself the error says so, not "check the path". */
static void test_open_file_limit_is_named(void **state)
{
    checkpoint c;
    make_checkpoint(&c, 1);
    rlim_t old = limit_files(64);
    int fds[64], n = 0;
    while (n < 64 && (fds[n] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0)
        n++;
    assert_int_equal(errno, EMFILE);
    gdu_st_model *m = NULL;
    gdu_st_error err;
    gdu_st_status s = gdu_st_open(c.index, &m, &err);
    while (n > 0)
        close(fds[--n]);
    restore_files(old);
    assert_int_equal(s, GDU_ST_ERR_TOO_MANY_FILES);
    assert_non_null(strstr(err.message, "ulimit -n"));
    assert_string_equal(gdu_st_status_name(GDU_ST_ERR_TOO_MANY_FILES), "GDU_ST_ERR_TOO_MANY_FILES");
    assert_string_equal(gdu_st_status_name(GDU_ST_ERR_CHANGED), "GDU_ST_ERR_CHANGED");
    remove_checkpoint(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replaced_file_is_not_read),
        cmocka_unit_test(test_verify_reads_the_validated_file),
        cmocka_unit_test(test_reopened_file_must_be_the_same),
        cmocka_unit_test(test_reopened_file_rewritten_in_place_is_refused),
        cmocka_unit_test(test_fifo_swapped_in_is_not_opened),
        cmocka_unit_test(test_more_shards_than_the_open_file_limit),
        cmocka_unit_test(test_open_file_limit_is_named),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    gdu_st_engines_release(NULL);
    return failed;
}
