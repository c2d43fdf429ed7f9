/* The engine's staging: made at creation, in the background, as one region
 * holding every worker's slots, pinned by one call before the first copy (24
 * slots pinned one by one from 8 threads took 40-60 ms of a first load on the
 * H200, one pin of the same region 3.8 ms); when the region cannot be pinned,
 * slots are pinned one by one, and a slot that cannot be had degrades the
 * worker (later slots) or fails its chunk (the first), never hangs a
 * request. Host backend, with the mover's pin and copy counted. */
#include "io/io_internal.h"
#include "io_test_util.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>
#include <cmocka.h>

#define CHUNK (16u << 10)
#define SIZE ((uint64_t)CHUNK * 37 + 99)
#define WORKERS 4u
#define SLOTS 3u

static char dir[64];
static char *path;
/* Pins asked for; which fail (the first, the region, and every one from
 * fail_from on, 0: none); pins made by the first copy (-1: no copy yet);
 * the first pin's size. */
static atomic_int pins, fail_from, pins_at_first_copy;
static atomic_bool fail_region;
static atomic_size_t first_pin_bytes;
static gdu_io_mover counting;

static int counting_pin(gdu_io_engine *e, void *p, size_t bytes, char *why, size_t len)
{
    int n = atomic_fetch_add(&pins, 1) + 1;
    if (n == 1)
        atomic_store(&first_pin_bytes, bytes);
    if ((n == 1 && atomic_load(&fail_region)) ||
        (atomic_load(&fail_from) != 0 && n >= atomic_load(&fail_from))) {
        snprintf(why, len, "test: no staging for pin %d", n);
        return -ENOMEM;
    }
    return gdu_io_mover_host.staging_pin(e, p, bytes, why, len);
}

static int counting_to_mem(void *wctx, unsigned slot, void *mem, const void *staging, size_t n,
                           char *why, size_t len)
{
    int none = -1;
    atomic_compare_exchange_strong(&pins_at_first_copy, &none, atomic_load(&pins));
    return gdu_io_mover_host.to_mem(wctx, slot, mem, staging, n, why, len);
}

static int setup(void **state)
{
    snprintf(dir, sizeof dir, "./gdu-io-staging-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return -1;
    path = io_test_file(dir, "data.bin", SIZE, 5);
    counting = gdu_io_mover_host;
    counting.staging_pin = counting_pin;
    counting.to_mem = counting_to_mem;
    return path ? 0 : -1;
}

static int teardown(void **state)
{
    io_test_remove_dir(dir, path);
    return 0;
}

/* An engine with the counting mover; failing pins as given. */
static gdu_io_engine *engine(bool region_fails, int from)
{
    atomic_store(&pins, 0);
    atomic_store(&pins_at_first_copy, -1);
    atomic_store(&first_pin_bytes, 0);
    atomic_store(&fail_region, region_fails);
    atomic_store(&fail_from, from);
    gdu_io_options o = io_test_options(WORKERS, CHUNK, SLOTS, GDU_IO_DIRECT_OFF);
    gdu_io_engine *e = NULL;
    char why[256] = "";
    if (gdu_io_engine_create_moving(&o, &counting, &e, why, sizeof why) != 0)
        fail_msg("engine: %s", why);
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

static void assert_file_bytes(const uint8_t *buf)
{
    for (uint64_t i = 0; i < SIZE; i++)
        if (buf[i] != io_test_byte(i, 5))
            fail_msg("byte %llu differs", (unsigned long long)i);
}

static void one_region_pinned_at_creation(void **state)
{
    gdu_io_engine *e = engine(false, 0);
    /* No request yet: the workers make the staging on their own. */
    for (int i = 0; i < 2000 && atomic_load(&pins) == 0; i++)
        usleep(1000);
    assert_int_equal(atomic_load(&pins), 1);
    assert_int_equal(atomic_load(&first_pin_bytes), (size_t)WORKERS * SLOTS * CHUNK);
    uint8_t *buf = malloc(SIZE);
    char why[256] = "";
    assert_int_equal(read_all(e, buf, why, sizeof why), 0);
    assert_file_bytes(buf);
    assert_int_equal(atomic_load(&pins), 1);
    assert_int_equal(atomic_load(&pins_at_first_copy), 1);
    /* Every slot is a distinct piece of the one region. */
    const char *lo = e->staging, *hi = e->staging + e->staging_bytes;
    for (unsigned w = 0; w < WORKERS; w++)
        for (unsigned j = 0; j < SLOTS; j++) {
            const char *p = e->workers[w].slots_of[j].buf;
            assert_true(p >= lo && p + CHUNK <= hi);
            assert_int_equal((size_t)(p - lo) % CHUNK, 0);
            assert_int_equal((size_t)(p - lo) / CHUNK, w * SLOTS + j);
        }
    free(buf);
    gdu_io_engine_destroy(e);
}

/* Smoke: destroyed before its staging is made, or while it is, it neither
 * hangs nor crashes (valgrind and ASan see the rest); it asserts nothing. */
static void smoke_destroyed_at_once(void **state)
{
    for (int i = 0; i < 50; i++)
        gdu_io_engine_destroy(engine(false, 0));
}

static void refused_region_pins_slot_by_slot(void **state)
{
    gdu_io_engine *e = engine(true, 0);
    uint8_t *buf = malloc(SIZE);
    char why[256] = "";
    assert_int_equal(read_all(e, buf, why, sizeof why), 0);
    assert_file_bytes(buf);
    assert_null(e->staging);
    assert_int_equal(atomic_load(&pins), 1 + WORKERS * SLOTS);
    assert_int_equal(atomic_load(&pins_at_first_copy), 1 + WORKERS * SLOTS);
    free(buf);
    gdu_io_engine_destroy(e);
}

static void failed_slots_degrade_or_fail_then_recover(void **state)
{
    /* The region and every slot after the first one refused. */
    gdu_io_engine *e = engine(true, 3);
    uint8_t *buf = malloc(SIZE);
    char why[256] = "";
    int r = read_all(e, buf, why, sizeof why);
    /* Workers without any staging fail their chunks, with the cause. */
    if (r != 0)
        assert_non_null(strstr(why, "no staging"));
    unsigned degraded = 0;
    for (unsigned w = 0; w < WORKERS; w++)
        degraded += e->workers[w].slots < SLOTS;
    assert_true(degraded >= 1 || r != 0);
    atomic_store(&fail_from, 0);
    /* Every worker that has one slot goes on reading with it; the others get theirs now. */
    r = read_all(e, buf, why, sizeof why);
    assert_int_equal(r, 0);
    assert_file_bytes(buf);
    free(buf);
    gdu_io_engine_destroy(e);
}

static void no_staging_fails_the_request(void **state)
{
    gdu_io_engine *e = engine(true, 1);
    uint8_t *buf = malloc(SIZE);
    char why[256] = "";
    assert_int_equal(read_all(e, buf, why, sizeof why), -ENOMEM);
    assert_non_null(strstr(why, "no staging"));
    atomic_store(&fail_from, 0);
    free(buf);
    gdu_io_engine_destroy(e);
}

/* gdu_io_engine_prestage: waits until every slot of every worker is pinned
 * (what gdunlock bench does before its clock starts); a shortage is named
 * and the engine goes on with what it got. */
static void prestage_waits_for_every_slot(void **state)
{
    gdu_io_engine *e = engine(false, 0);
    char why[256] = "";
    assert_int_equal(gdu_io_engine_prestage(e, why, sizeof why), 0);
    assert_int_equal(atomic_load(&pins), 1);
    for (unsigned w = 0; w < WORKERS; w++)
        for (unsigned j = 0; j < SLOTS; j++)
            assert_non_null(e->workers[w].slots_of[j].buf);
    assert_int_equal(gdu_io_engine_prestage(e, why, sizeof why), 0); /* nothing more to do */
    assert_int_equal(atomic_load(&pins), 1);
    uint8_t *buf = malloc(SIZE);
    assert_int_equal(read_all(e, buf, why, sizeof why), 0);
    assert_int_equal(atomic_load(&pins), 1); /* the reads pin nothing more */
    gdu_io_engine_destroy(e);

    e = engine(true, 9);
    assert_int_equal(gdu_io_engine_prestage(e, why, sizeof why), -ENOMEM);
    assert_non_null(strstr(why, "no staging"));
    atomic_store(&fail_from, 0);
    assert_int_equal(read_all(e, buf, why, sizeof why), 0);
    assert_file_bytes(buf);
    free(buf);
    gdu_io_engine_destroy(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_region_pinned_at_creation),
        cmocka_unit_test(smoke_destroyed_at_once),
        cmocka_unit_test(refused_region_pins_slot_by_slot),
        cmocka_unit_test(failed_slots_degrade_or_fail_then_recover),
        cmocka_unit_test(no_staging_fails_the_request),
        cmocka_unit_test(prestage_waits_for_every_slot),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
