/* The cuFile backend's ring of registered buffers under a small BAR1
 * (GDUNLOCK_TEST_BAR1, the test setting), against the fake libcufile, whose
 * cuFileBufRegister fails past FAKE_CUFILE_BAR1_LIMIT as pinning past BAR1
 * does: a file larger than the budget moves through buffers that never
 * exceed it, the destination is never registered, a BAR1 too small for
 * one buffer is named, and RM's count of the BAR1 no process uses
 * (GDUNLOCK_TEST_BAR1_AVAILABLE, standing in for RM's answer) bounds the
 * ring too, since other processes' pins take from the same BAR1. */
#include "cuda/cuda_api.h"
#include "io/io_internal.h"
#include "io_test_util.h"

#include <dlfcn.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#define SIZE ((uint64_t)(24u << 20) + 4097)

static const gdu_cuda *cu;
static char dir[64];
static char *path;
static void (*registered)(size_t *now, size_t *most);

static int setup(void **state)
{
    char why[256];
    cu = gdu_cuda_load(why, sizeof why);
    snprintf(dir, sizeof dir, "./gdu-io-ring-XXXXXX");
    if (cu == NULL || mkdtemp(dir) == NULL)
        return -1;
    path = io_test_file(dir, "data.bin", SIZE, 41);
    /* The same library the engine loads (GDUNLOCK_LIBCUFILE), for its counters. */
    void *fake = dlopen(getenv("GDUNLOCK_LIBCUFILE"), RTLD_NOW);
    registered = fake ? (void (*)(size_t *, size_t *))dlsym(fake, "fake_cufile_registered") : NULL;
    return path && registered ? 0 : -1;
}

static int teardown(void **state)
{
    io_test_remove_dir(dir, path);
    return 0;
}

static int reset_env(void **state)
{
    unsetenv("GDUNLOCK_TEST_BAR1");
    unsetenv("GDUNLOCK_TEST_BAR1_AVAILABLE");
    unsetenv("FAKE_CUFILE_BAR1_LIMIT");
    unsetenv("FAKE_CUFILE_NVFS_MAJOR");
    size_t now, most;
    registered(&now, &most);
    return 0;
}

static int make(gdu_io_backend b, gdu_io_engine **e, char *why, size_t len)
{
    gdu_io_options o;
    gdu_io_options_default(&o, NULL, 0);
    o.backend = b;
    o.workers = 8;
    o.chunk_size = 1u << 20;
    return gdu_io_engine_create(&o, e, why, len);
}

/* BAR1 40 MiB: a budget of 4 MiB (BAR1 less RM's 36 MiB reserve), four
 * 1 MiB buffers for eight workers and a 24 MiB file. */
static void reads_through_a_ring_within_the_budget(void **state)
{
    setenv("GDUNLOCK_TEST_BAR1", "40M", 1);
    setenv("FAKE_CUFILE_BAR1_LIMIT", "4194304", 1);
    gdu_io_engine *e = NULL;
    char why[256] = "";
    assert_int_equal(make(GDU_IO_BACKEND_CUFILE, &e, why, sizeof why), 0);
    const char *reason = gdu_io_engine_reason(e);
    assert_non_null(strstr(reason, "ring of 4 x 1024 KiB registered buffers"));
    assert_non_null(strstr(reason, "4 MiB BAR1 budget"));
    assert_non_null(strstr(reason, "GDUNLOCK_TEST_BAR1=40M"));
    assert_int_equal(gdu_io_cufile_ring_registered(e), 4u << 20);
    gdu_io_file *f = NULL;
    assert_int_equal(gdu_io_open(e, path, GDU_IO_READ | GDU_IO_WRITE, &f, why, sizeof why), 0);
    assert_int_equal(gdu_io_file_backend(f), GDU_IO_BACKEND_CUFILE);
    assert_non_null(
        strstr(gdu_io_file_reason(f), "ring of 4 x 1024 KiB")); /* the loader shows it */
    gdu_CUdeviceptr d = 0;
    assert_int_equal(cu->cuMemAlloc(&d, SIZE), 0);
    uint64_t done = 0;
    assert_int_equal(gdu_io_read(f, 0, SIZE, (void *)(uintptr_t)d, &done, why, sizeof why), 0);
    assert_int_equal(done, SIZE);
    uint8_t *host = malloc(SIZE);
    cu->cuMemcpyDtoH(host, d, SIZE);
    for (uint64_t i = 0; i < SIZE; i++)
        if (host[i] != io_test_byte(i, 41))
            fail_msg("byte %llu wrong", (unsigned long long)i);
    /* Writes go the other way through the same buffers. */
    memset(host, 0x5a, 3u << 20);
    cu->cuMemcpyHtoD(d, host, 3u << 20);
    assert_int_equal(gdu_io_write(f, 1000, 3u << 20, (void *)(uintptr_t)d, &done, why, sizeof why),
                     0);
    assert_int_equal(gdu_io_read(f, 0, SIZE, (void *)(uintptr_t)d, &done, why, sizeof why), 0);
    cu->cuMemcpyDtoH(host, d, SIZE);
    assert_int_equal(host[999], io_test_byte(999, 41));
    assert_int_equal(host[1000], 0x5a);
    assert_int_equal(host[1000 + (3u << 20) - 1], 0x5a);
    size_t now, most;
    registered(&now, &most);
    assert_true(most <= (4u << 20)); /* never past the budget: the destination is not registered */
    gdu_io_close(f);
    gdu_io_engine_destroy(e);
    registered(&now, &most);
    assert_int_equal(now, 0); /* all deregistered */
    cu->cuMemFree(d);
    free(host);
}

static void a_bar1_too_small_for_one_buffer_is_named(void **state)
{
    setenv("GDUNLOCK_TEST_BAR1", "36M", 1); /* all of it RM's reserve */
    gdu_io_engine *e = NULL;
    char why[256] = "";
    assert_int_equal(make(GDU_IO_BACKEND_CUFILE, &e, why, sizeof why), -ENOSPC);
    assert_non_null(strstr(why, "holds no"));
    /* AUTO with nvidia-fs falls back to the pipeline and says why. */
    setenv("FAKE_CUFILE_NVFS_MAJOR", "2", 1);
    assert_int_equal(make(GDU_IO_BACKEND_AUTO, &e, why, sizeof why), 0);
    assert_int_equal(gdu_io_engine_backend(e), GDU_IO_BACKEND_PIPELINE);
    assert_non_null(strstr(gdu_io_engine_reason(e), "holds no"));
    gdu_io_engine_destroy(e);
    setenv("GDUNLOCK_TEST_BAR1", "lots", 1);
    assert_int_equal(make(GDU_IO_BACKEND_CUFILE, &e, why, sizeof why), -EINVAL);
    assert_non_null(strstr(why, "GDUNLOCK_TEST_BAR1=lots"));
}

/* Unknown BAR1 (no sysfs entry for the fake GPU): sized as 256 MiB. */
static void unknown_bar1_is_assumed_small(void **state)
{
    gdu_io_engine *e = NULL;
    char why[256] = "";
    assert_int_equal(make(GDU_IO_BACKEND_CUFILE, &e, why, sizeof why), 0);
    assert_non_null(strstr(gdu_io_engine_reason(e), "unknown: assumed"));
    assert_int_equal(gdu_io_cufile_ring_registered(e), 8u << 20); /* 8 workers x 1 MiB */
    gdu_io_engine_destroy(e);
}

/* BAR1 40 MiB of which RM counts 38 MiB unused (another process pins the
 * rest): 2 MiB above RM's reserve, so two buffers, where the size alone
 * would allow four. */
static void rm_unused_bar1_bounds_the_ring(void **state)
{
    setenv("GDUNLOCK_TEST_BAR1", "40M", 1);
    setenv("GDUNLOCK_TEST_BAR1_AVAILABLE", "38M", 1);
    gdu_io_engine *e = NULL;
    char why[256] = "";
    assert_int_equal(make(GDU_IO_BACKEND_CUFILE, &e, why, sizeof why), 0);
    const char *reason = gdu_io_engine_reason(e);
    assert_non_null(strstr(reason, "ring of 2 x 1024 KiB registered buffers"));
    assert_non_null(strstr(reason, "38 MiB of it unused by any process"));
    assert_int_equal(gdu_io_cufile_ring_registered(e), 2u << 20);
    gdu_io_engine_destroy(e);
}

/* Less unused than RM's reserve: no buffer fits, and the reason names RM's
 * figure; a bad setting is named. */
static void rm_unused_bar1_too_small_is_named(void **state)
{
    setenv("GDUNLOCK_TEST_BAR1", "1G", 1);
    setenv("GDUNLOCK_TEST_BAR1_AVAILABLE", "30M", 1);
    gdu_io_engine *e = NULL;
    char why[256] = "";
    assert_int_equal(make(GDU_IO_BACKEND_CUFILE, &e, why, sizeof why), -ENOSPC);
    assert_non_null(strstr(why, "holds no"));
    assert_non_null(strstr(why, "30 MiB of it unused by any process"));
    setenv("GDUNLOCK_TEST_BAR1_AVAILABLE", "0", 1);
    assert_int_equal(make(GDU_IO_BACKEND_CUFILE, &e, why, sizeof why), -EINVAL);
    assert_non_null(strstr(why, "GDUNLOCK_TEST_BAR1_AVAILABLE=0"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(reads_through_a_ring_within_the_budget, reset_env),
        cmocka_unit_test_setup(a_bar1_too_small_for_one_buffer_is_named, reset_env),
        cmocka_unit_test_setup(unknown_bar1_is_assumed_small, reset_env),
        cmocka_unit_test_setup(rm_unused_bar1_bounds_the_ring, reset_env),
        cmocka_unit_test_setup(rm_unused_bar1_too_small_is_named, reset_env),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
