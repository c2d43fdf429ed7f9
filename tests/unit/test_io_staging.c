/* Staging slots are allocated by each worker when it first uses them, not
 * when the engine is created (so that a fresh process's first reads start
 * before all staging is pinned), and a slot that cannot be allocated
 * degrades the worker (later slots) or fails its chunk (the first), never
 * hangs a request. Host backend, with the mover's allocator replaced. */
#include "io/io_internal.h"
#include "io_test_util.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#define CHUNK (16u << 10)
#define SIZE ((uint64_t)CHUNK * 37 + 99)

static char dir[64];
static char *path;
static atomic_int allocs, fail_from; /* allocations made; the first failing one (0: none) */
static gdu_io_mover counting;

static void *counting_alloc(gdu_io_engine *e, size_t bytes, char *why, size_t len)
{
    int n = atomic_fetch_add(&allocs, 1) + 1;
    if (atomic_load(&fail_from) != 0 && n >= atomic_load(&fail_from)) {
        snprintf(why, len, "test: no staging for allocation %d", n);
        return NULL;
    }
    return gdu_io_mover_host.staging_alloc(e, bytes, why, len);
}

static int setup(void **state)
{
    snprintf(dir, sizeof dir, "./gdu-io-staging-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return -1;
    path = io_test_file(dir, "data.bin", SIZE, 5);
    counting = gdu_io_mover_host;
    counting.staging_alloc = counting_alloc;
    return path ? 0 : -1;
}

static int teardown(void **state)
{
    io_test_remove_dir(dir, path);
    return 0;
}

static gdu_io_engine *engine(void)
{
    gdu_io_engine *e = io_test_engine(4, CHUNK, 3, GDU_IO_DIRECT_OFF);
    assert_non_null(e);
    e->mover = &counting; /* before any chunk is queued */
    atomic_store(&allocs, 0);
    return e;
}

/* Reads the whole file; returns the request's status. */
static int read_all(gdu_io_engine *e, uint8_t *buf, char *why, size_t len)
{
    gdu_io_file *f = NULL;
    assert_int_equal(gdu_io_open(e, path, GDU_IO_READ, &f, why, len), 0);
    uint64_t done = 0;
    int r = gdu_io_read(f, 0, SIZE, buf, &done, why, len);
    gdu_io_close(f);
    return r;
}

static void slots_are_allocated_on_first_use(void **state)
{
    gdu_io_engine *e = engine();
    for (unsigned w = 0; w < 4; w++)
        for (unsigned j = 0; j < GDU_IO_MAX_STAGING; j++)
            assert_null(e->workers[w].slots_of[j].buf);
    assert_int_equal(atomic_load(&allocs), 0);
    uint8_t *buf = malloc(SIZE);
    char why[256] = "";
    assert_int_equal(read_all(e, buf, why, sizeof why), 0);
    for (uint64_t i = 0; i < SIZE; i++)
        if (buf[i] != io_test_byte(i, 5))
            fail_msg("byte %llu differs", (unsigned long long)i);
    assert_true(atomic_load(&allocs) >= 1 && atomic_load(&allocs) <= 4 * 3);
    free(buf);
    gdu_io_engine_destroy(e);
}

static void failed_slots_degrade_or_fail_then_recover(void **state)
{
    gdu_io_engine *e = engine();
    atomic_store(&fail_from, 2); /* one buffer in all: the first worker's slot 0 */
    gdu_io_options o = *gdu_io_engine_options(e);
    assert_int_equal(o.workers, 4);
    uint8_t *buf = malloc(SIZE);
    char why[256] = "";
    int r = read_all(e, buf, why, sizeof why);
    /* Workers without any staging fail their chunks, with the cause. */
    if (r != 0)
        assert_non_null(strstr(why, "no staging"));
    unsigned degraded = 0;
    for (unsigned w = 0; w < 4; w++)
        degraded += e->workers[w].slots < 3;
    assert_true(degraded >= 1 || r != 0);
    atomic_store(&fail_from, 0);
    /* Every worker that has one slot goes on reading with it. */
    r = read_all(e, buf, why, sizeof why);
    assert_int_equal(r, 0);
    for (uint64_t i = 0; i < SIZE; i++)
        if (buf[i] != io_test_byte(i, 5))
            fail_msg("byte %llu differs", (unsigned long long)i);
    free(buf);
    gdu_io_engine_destroy(e);
}

static void no_staging_fails_the_request(void **state)
{
    gdu_io_engine *e = engine();
    atomic_store(&fail_from, 1);
    uint8_t *buf = malloc(SIZE);
    char why[256] = "";
    assert_int_equal(read_all(e, buf, why, sizeof why), -ENOMEM);
    assert_non_null(strstr(why, "no staging"));
    atomic_store(&fail_from, 0);
    free(buf);
    gdu_io_engine_destroy(e);
}

/* gdu_io_engine_prestage: every slot of every worker pinned before any I/O
 * (what gdunlock bench does before its clock starts); a shortage is named
 * and the engine goes on with what it got. */
static void prestage_pins_every_slot(void **state)
{
    gdu_io_engine *e = engine();
    char why[256] = "";
    assert_int_equal(gdu_io_engine_prestage(e, why, sizeof why), 0);
    assert_int_equal(atomic_load(&allocs), 4 * 3);
    for (unsigned w = 0; w < 4; w++)
        for (unsigned j = 0; j < 3; j++)
            assert_non_null(e->workers[w].slots_of[j].buf);
    assert_int_equal(gdu_io_engine_prestage(e, why, sizeof why), 0); /* nothing more to do */
    assert_int_equal(atomic_load(&allocs), 4 * 3);
    uint8_t *buf = malloc(SIZE);
    assert_int_equal(read_all(e, buf, why, sizeof why), 0);
    assert_int_equal(atomic_load(&allocs), 4 * 3); /* the reads pin nothing more */
    gdu_io_engine_destroy(e);

    e = engine();
    atomic_store(&fail_from, 9);
    assert_int_equal(gdu_io_engine_prestage(e, why, sizeof why), -ENOMEM);
    assert_non_null(strstr(why, "no staging"));
    atomic_store(&fail_from, 0);
    assert_int_equal(read_all(e, buf, why, sizeof why), 0);
    for (uint64_t i = 0; i < SIZE; i++)
        if (buf[i] != io_test_byte(i, 5))
            fail_msg("byte %llu differs", (unsigned long long)i);
    free(buf);
    gdu_io_engine_destroy(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(slots_are_allocated_on_first_use),
        cmocka_unit_test(failed_slots_degrade_or_fail_then_recover),
        cmocka_unit_test(no_staging_fails_the_request),
        cmocka_unit_test(prestage_pins_every_slot),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
