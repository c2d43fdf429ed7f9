/* The engine's CUDA path (pipeline backend: pinned staging, streams, events,
 * asynchronous copies) against tests/unit/fake_libcuda.c, whose deferred
 * copies turn any reuse of a staging buffer before its copy finished into
 * wrong bytes. Run with LD_LIBRARY_PATH pointing at the fake. */
#include "cuda/cuda_api.h"
#include "io/io_internal.h"
#include "io_test_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#define CHUNK (32u << 10)
#define SIZE ((uint64_t)CHUNK * 23 + 1234)

static const gdu_cuda *cu;
static char dir[64];
static char *path;

static int setup(void **state)
{
    char why[256];
    cu = gdu_cuda_load(why, sizeof why);
    if (cu == NULL) {
        fprintf(stderr, "fake libcuda not loaded: %s\n", why);
        return -1;
    }
    snprintf(dir, sizeof dir, "./gdu-io-cuda-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return -1;
    path = io_test_file(dir, "data.bin", SIZE, 21);
    return path ? 0 : -1;
}

static int teardown(void **state)
{
    io_test_remove_dir(dir, path);
    return 0;
}

static gdu_io_engine *pipeline_engine(gdu_io_direct direct)
{
    gdu_io_options o;
    gdu_io_options_default(&o, NULL, 0);
    o.backend = GDU_IO_BACKEND_PIPELINE;
    o.workers = 3;
    o.chunk_size = CHUNK;
    o.staging_per_worker = 3;
    o.direct = direct;
    gdu_io_engine *e = NULL;
    char why[256] = "";
    int r = gdu_io_engine_create(&o, &e, why, sizeof why);
    if (r != 0)
        fail_msg("engine: %s", why);
    return e;
}

static void reads_land_in_device_memory(void **state)
{
    for (int direct = GDU_IO_DIRECT_AUTO; direct <= GDU_IO_DIRECT_OFF; direct++) {
        gdu_io_engine *e = pipeline_engine((gdu_io_direct)direct);
        assert_int_equal(gdu_io_engine_backend(e), GDU_IO_BACKEND_PIPELINE);
        if (direct == GDU_IO_DIRECT_OFF) /* buffered chunks in 3-page pieces, copies deferred */
            gdu_io_engine_set_read_piece(e, 3 * 4096);
        gdu_io_file *f = NULL;
        assert_int_equal(gdu_io_open(e, path, GDU_IO_READ, &f, NULL, 0), 0);
        assert_int_equal(gdu_io_file_backend(f), GDU_IO_BACKEND_PIPELINE);
        gdu_CUdeviceptr d = 0;
        assert_int_equal(cu->cuMemAlloc(&d, SIZE), 0);
        uint8_t *host = malloc(SIZE);
        uint64_t rng = 77 + (uint64_t)direct;
        for (int i = 0; i < 40; i++) {
            uint64_t off = i == 0 ? 0 : io_test_rand(&rng) % SIZE;
            uint64_t len = i == 0 ? SIZE : 1 + io_test_rand(&rng) % (5 * CHUNK);
            uint64_t done = 0;
            char why[256] = "";
            cu->cuMemsetD8(d, 0, SIZE); /* no sync: the engine's streams wait for it */
            assert_int_equal(gdu_io_read(f, off, len, (void *)(uintptr_t)d, &done, why, sizeof why),
                             0);
            uint64_t expect = off + len > SIZE ? SIZE - off : len;
            assert_int_equal(done, expect);
            cu->cuMemcpyDtoH(host, d, expect);
            for (uint64_t k = 0; k < expect; k++)
                if (host[k] != io_test_byte(off + k, 21))
                    fail_msg("direct mode %d: byte %llu of %llu+%llu wrong", direct,
                             (unsigned long long)k, (unsigned long long)off,
                             (unsigned long long)len);
        }
        free(host);
        cu->cuMemFree(d);
        gdu_io_close(f);
        gdu_io_engine_destroy(e);
    }
}

static void device_to_file_to_device_round_trip(void **state)
{
    char out[128];
    snprintf(out, sizeof out, "%s/out.bin", dir);
    gdu_io_engine *e = pipeline_engine(GDU_IO_DIRECT_ON);
    gdu_io_file *f = NULL;
    assert_int_equal(gdu_io_open(e, out,
                                 GDU_IO_READ | GDU_IO_WRITE | GDU_IO_CREATE | GDU_IO_TRUNCATE, &f,
                                 NULL, 0),
                     0);
    uint8_t *src = malloc(SIZE), *back = malloc(SIZE);
    for (uint64_t i = 0; i < SIZE; i++)
        src[i] = io_test_byte(i, 5);
    gdu_CUdeviceptr d = 0, d2 = 0;
    assert_int_equal(cu->cuMemAlloc(&d, SIZE), 0);
    assert_int_equal(cu->cuMemAlloc(&d2, SIZE), 0);
    cu->cuMemcpyHtoD(d, src, SIZE);
    /* Written in unaligned pieces, as a batch. */
    gdu_io_extent x[3] = {
        {.offset = 0, .length = 4097, .mem = (void *)(uintptr_t)d},
        {.offset = 4097, .length = 7 * CHUNK, .mem = (void *)(uintptr_t)(d + 4097)},
        {.offset = 4097 + 7 * CHUNK,
         .length = SIZE - 4097 - 7 * CHUNK,
         .mem = (void *)(uintptr_t)(d + 4097 + 7 * CHUNK)},
    };
    gdu_io_request *r = NULL;
    assert_int_equal(gdu_io_submit(f, GDU_IO_OP_WRITE, x, 3, NULL, NULL, &r), 0);
    uint64_t bytes = 0;
    assert_int_equal(gdu_io_wait(r, &bytes, NULL, 0), 0);
    assert_int_equal(bytes, SIZE);
    assert_int_equal(gdu_io_sync(f, NULL, 0), 0);
    uint64_t done = 0;
    assert_int_equal(gdu_io_read(f, 0, SIZE, (void *)(uintptr_t)d2, &done, NULL, 0), 0);
    assert_int_equal(done, SIZE);
    cu->cuMemcpyDtoH(back, d2, SIZE);
    assert_memory_equal(back, src, SIZE);
    free(src);
    free(back);
    cu->cuMemFree(d);
    cu->cuMemFree(d2);
    gdu_io_close(f);
    gdu_io_engine_destroy(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reads_land_in_device_memory),
        cmocka_unit_test(device_to_file_to_device_round_trip),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
