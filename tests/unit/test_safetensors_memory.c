/* Opening a checkpoint with a large header takes memory in proportion to
 * it, within twice what Python's json.loads takes for the same header. A
 * header of a million tensors (71 MB, entries like the ones below) peaked at
 * 2.1 GB of RSS in gdu_st_open, against 0.68 GB for json.loads (measured
 * with /usr/bin/time -v: a node and a string each malloc'd, item arrays
 * doubled from 8). This program counts the heap bytes in use (malloc,
 * calloc, realloc and free replaced, sizes by malloc_usable_size) and checks
 * the peak per tensor of a 20,000-tensor header (it was 2,237 bytes, and as
 * much kept; 672 at the peak and 232 kept since the parser's arenas). Skipped
 * under AddressSanitizer and valgrind, whose allocators these are not. */
#include "gdunlock/safetensors.h"

#include <malloc.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_runtime.h"

void *__libc_malloc(size_t);
void *__libc_calloc(size_t, size_t);
void *__libc_realloc(void *, size_t);
void __libc_free(void *);

static size_t g_live, g_peak;
static unsigned long g_calls;

#if !GDU_TEST_ASAN /* its allocator and interceptors are not to be replaced */
static void *counted(void *p)
{
    if (p != NULL) {
        g_live += malloc_usable_size(p);
        g_peak = g_live > g_peak ? g_live : g_peak;
        g_calls++;
    }
    return p;
}

void *malloc(size_t n) { return counted(__libc_malloc(n)); }
void *calloc(size_t n, size_t m) { return counted(__libc_calloc(n, m)); }
void free(void *p)
{
    if (p != NULL)
        g_live -= malloc_usable_size(p);
    __libc_free(p);
}
void *realloc(void *p, size_t n)
{
    size_t old = p ? malloc_usable_size(p) : 0;
    void *q = __libc_realloc(p, n);
    if (q != NULL || n == 0)
        g_live -= old;
    return counted(q);
}
#endif

#define TENSORS 20000
/* Twice json.loads's 680 bytes a tensor is the limit (1,360), with room. */
#define BYTES_PER_TENSOR 1000

/* A header like the issue's: {"tNNNNNNN":{"dtype":"F32","shape":[1],
 * "data_offsets":[B,E]}, ...} (71 bytes an entry), and 4 bytes per tensor. */
static void write_header(const char *path)
{
    size_t cap = (size_t)TENSORS * 96 + 16, n = 1;
    char *json = __libc_malloc(cap);
    assert_non_null(json);
    json[0] = '{';
    for (size_t i = 0; i < TENSORS; i++)
        n += (size_t)snprintf(json + n, cap - n,
                              "%s\"t%07zu\":{\"dtype\":\"F32\",\"shape\":[1],"
                              "\"data_offsets\":[%zu,%zu]}",
                              i ? "," : "", i, 4 * i, 4 * i + 4);
    json[n++] = '}';
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    unsigned char len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)((uint64_t)n >> (8 * i));
    assert_int_equal(fwrite(len, 1, 8, f), 8);
    assert_int_equal(fwrite(json, 1, n, f), n);
    assert_int_equal(ftruncate(fileno(f), (off_t)(8 + n + 4 * TENSORS)), 0);
    assert_int_equal(fclose(f), 0);
    __libc_free(json);
}

static void test_header_memory_per_tensor(void **state)
{
    void *probe = malloc(16);
    free(probe);
    if (g_calls == 0 || RUNNING_ON_VALGRIND)
        skip(); /* this allocator is not ours to count (valgrind, sanitizers) */
    char path[] = "/tmp/gdu_st_memory_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    write_header(path);
    size_t base = g_live;
    g_peak = g_live;
    gdu_st_model *m = NULL;
    gdu_st_error err;
    assert_int_equal(gdu_st_open(path, &m, &err), GDU_ST_OK);
    assert_int_equal(gdu_st_model_tensor_count(m), TENSORS);
    size_t peak = (g_peak - base) / TENSORS, kept = (g_live - base) / TENSORS;
    print_message("gdu_st_open of %d tensors: %zu bytes a tensor at the peak, %zu kept\n", TENSORS,
                  peak, kept);
    assert_true(peak <= BYTES_PER_TENSOR);
    assert_int_equal(gdu_st_model_find(m, "t0012345"), 12345);
    gdu_st_model_free(m);
    assert_int_equal(g_live, base);
    unlink(path);
}

#define SHARDS 200
/* What one shard of two tensors keeps, with room: each shard's parsed
 * header kept two arena blocks of 1 MiB (2 MiB a shard by their size,
 * 9 KB of pages touched at 10,000 shards). */
#define BYTES_PER_SHARD (16 << 10)

/* An index of SHARDS numbered shards of two F32 tensors each: the memory an
 * open index keeps grows with its shards by what their headers need. */
static void test_index_memory_per_shard(void **state)
{
    void *probe = malloc(16);
    free(probe);
    if (g_calls == 0 || RUNNING_ON_VALGRIND)
        skip();
    char dir[] = "/tmp/gdu_st_shards_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256], index[256];
    snprintf(index, sizeof index, "%s/model.safetensors.index.json", dir);
    FILE *ix = fopen(index, "w");
    assert_non_null(ix);
    fprintf(ix, "{\"metadata\":{},\"weight_map\":{");
    for (int s = 0; s < SHARDS; s++) {
        char json[256];
        int n = snprintf(json, sizeof json,
                         "{\"a%d\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                         "\"b%d\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                         s, s);
        snprintf(path, sizeof path, "%s/model-%05d-of-%05d.safetensors", dir, s + 1, SHARDS);
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        unsigned char len[8] = {(unsigned char)n};
        assert_int_equal(fwrite(len, 1, 8, f), 8);
        assert_int_equal(fwrite(json, 1, (size_t)n, f), (size_t)n);
        assert_int_equal(fwrite("\0\0\0\0\0\0\0\0", 1, 8, f), 8);
        assert_int_equal(fclose(f), 0);
        fprintf(ix,
                "%s\"a%d\":\"model-%05d-of-%05d.safetensors\","
                "\"b%d\":\"model-%05d-of-%05d.safetensors\"",
                s ? "," : "", s, s + 1, SHARDS, s, s + 1, SHARDS);
    }
    fprintf(ix, "}}");
    assert_int_equal(fclose(ix), 0);
    size_t base = g_live;
    gdu_st_model *m = NULL;
    gdu_st_error err;
    assert_int_equal(gdu_st_open(index, &m, &err), GDU_ST_OK);
    assert_int_equal(gdu_st_model_tensor_count(m), 2 * SHARDS);
    size_t kept = (g_live - base) / SHARDS;
    print_message("gdu_st_open of an index of %d shards: %zu bytes kept a shard\n", SHARDS, kept);
    assert_true(kept <= BYTES_PER_SHARD);
    gdu_st_model_free(m);
    assert_int_equal(g_live, base);
    for (int s = 0; s < SHARDS; s++) {
        snprintf(path, sizeof path, "%s/model-%05d-of-%05d.safetensors", dir, s + 1, SHARDS);
        unlink(path);
    }
    unlink(index);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_memory_per_tensor),
        cmocka_unit_test(test_index_memory_per_shard),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
