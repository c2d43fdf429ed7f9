/* The engine's staging: made at creation, in the background, as one region
 * holding every worker's slots, pinned by two calls (slots pinned one by
 * one from every worker at once cost a first load many times one pin of
 * the same region: bench/results/2026-12-01-h200-first-load-staging.md):
 * the first slot of every worker before the first
 * copy, the other slots while the workers copy through their first; when
 * the region cannot be pinned, slots are pinned one by one, and a slot that
 * cannot be had degrades the worker (later slots) or fails its chunk (the
 * first), never hangs a request. Host backend, with the mover's pin and
 * copy counted. */
#include "io/io_internal.h"
#include "io_test_util.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#define CHUNK (16u << 10)
#define SIZE ((uint64_t)CHUNK * 37 + 99)
#define WORKERS 4u
#define SLOTS 3u

static char dir[64];
static char *path;
/* Pins asked for; which fail (the first, the region's first part; the
 * second, the region's other part; every one from fail_from on, 0: none);
 * pins returned by the first copy (-1: no copy yet); the first two pins'
 * sizes; whether the second pin waits for a copy first (up to 20 s), and
 * whether one came. */
static atomic_int pins, pins_returned, fail_from, pins_at_first_copy;
static atomic_bool fail_region, fail_rest, hold_rest, copy_before_rest;
static atomic_size_t pin_bytes[2];
static gdu_io_mover counting;

static int counting_pin(gdu_io_engine *e, void *p, size_t bytes, char *why, size_t len)
{
    int n = atomic_fetch_add(&pins, 1) + 1;
    if (n <= 2)
        atomic_store(&pin_bytes[n - 1], bytes);
    for (int i = 0; n == 2 && atomic_load(&hold_rest) && i < 20000; i++) {
        if (atomic_load(&pins_at_first_copy) != -1) {
            atomic_store(&copy_before_rest, true);
            break;
        }
        usleep(1000);
    }
    int r = 0;
    if ((n == 1 && atomic_load(&fail_region)) || (n == 2 && atomic_load(&fail_rest)) ||
        (atomic_load(&fail_from) != 0 && n >= atomic_load(&fail_from))) {
        snprintf(why, len, "test: no staging for pin %d", n);
        r = -ENOMEM;
    } else {
        r = gdu_io_mover_host.staging_pin(e, p, bytes, why, len);
    }
    atomic_fetch_add(&pins_returned, 1);
    return r;
}

static int counting_to_mem(void *wctx, unsigned slot, void *mem, const void *staging, size_t n,
                           char *why, size_t len)
{
    int none = -1;
    atomic_compare_exchange_strong(&pins_at_first_copy, &none, atomic_load(&pins_returned));
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

/* An engine with the counting mover; failing pins as given, and its second
 * pin held for a copy or failing. */
static gdu_io_engine *engine_with(bool region_fails, int from, bool rest_held, bool rest_fails)
{
    atomic_store(&pins, 0);
    atomic_store(&pins_returned, 0);
    atomic_store(&pins_at_first_copy, -1);
    atomic_store(&pin_bytes[0], 0);
    atomic_store(&pin_bytes[1], 0);
    atomic_store(&fail_region, region_fails);
    atomic_store(&fail_rest, rest_fails);
    atomic_store(&hold_rest, rest_held);
    atomic_store(&copy_before_rest, false);
    atomic_store(&fail_from, from);
    gdu_io_options o = io_test_options(WORKERS, CHUNK, SLOTS, GDU_IO_DIRECT_OFF);
    gdu_io_engine *e = NULL;
    char why[256] = "";
    if (gdu_io_engine_create_moving(&o, &counting, &e, why, sizeof why) != 0)
        fail_msg("engine: %s", why);
    return e;
}

static gdu_io_engine *engine(bool region_fails, int from)
{
    return engine_with(region_fails, from, false, false);
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

/* Every slot, from the workers' slot_of, a distinct piece of the one region:
 * the first slot of every worker, then the second of every worker, ... */
static void assert_slots_in_region(const gdu_io_engine *e)
{
    const char *lo = e->staging, *hi = e->staging + e->staging_bytes;
    for (unsigned w = 0; w < WORKERS; w++)
        for (unsigned j = 0; j < SLOTS; j++) {
            const char *p = e->workers[w].slots_of[j].buf;
            assert_true(p >= lo && p + CHUNK <= hi);
            assert_int_equal((size_t)(p - lo) % CHUNK, 0);
            assert_int_equal((size_t)(p - lo) / CHUNK, j * WORKERS + w);
        }
}

/* Whether every worker has taken up all its slots within 20 s (a worker
 * does so the next time it looks for work after the second part settles). */
static bool all_grown(gdu_io_engine *e)
{
    for (int i = 0; i < 20000; i++) {
        unsigned grown = 0;
        pthread_mutex_lock(&e->qlock);
        for (unsigned w = 0; w < WORKERS; w++)
            grown += e->workers[w].slots == SLOTS;
        pthread_mutex_unlock(&e->qlock);
        if (grown == WORKERS)
            return true;
        usleep(1000);
    }
    return false;
}

/* A whole read right, with both parts pinned and no other pin, and every
 * worker on all its slots, each where the region's layout puts it. */
static void assert_reads_through_the_whole_region(gdu_io_engine *e)
{
    uint8_t *buf = malloc(SIZE);
    char why[256] = "";
    assert_int_equal(read_all(e, buf, why, sizeof why), 0);
    assert_file_bytes(buf);
    free(buf);
    assert_int_equal(atomic_load(&pins), 2);
    assert_true(all_grown(e));
    assert_slots_in_region(e);
}

static void region_pinned_in_two_parts_at_creation(void **state)
{
    gdu_io_engine *e = engine(false, 0);
    /* No request yet: the workers make the staging on their own. */
    for (int i = 0; i < 2000 && atomic_load(&pins_returned) < 2; i++)
        usleep(1000);
    assert_int_equal(atomic_load(&pins), 2);
    assert_int_equal(atomic_load(&pin_bytes[0]), (size_t)WORKERS * CHUNK);
    assert_int_equal(atomic_load(&pin_bytes[1]), (size_t)WORKERS * (SLOTS - 1) * CHUNK);
    assert_reads_through_the_whole_region(e);
    assert_true(atomic_load(&pins_at_first_copy) >= 1);
    gdu_io_engine_destroy(e);
}

/* The first copy waits for the first part's pin only: with the second pin
 * held until a copy has been made, a whole read completes through the
 * workers' first slots, and the workers then take up their others. */
static void first_copy_waits_for_the_first_slots_only(void **state)
{
    gdu_io_engine *e = engine_with(false, 0, true, false);
    uint8_t *buf = malloc(SIZE);
    char why[256] = "";
    assert_int_equal(read_all(e, buf, why, sizeof why), 0);
    assert_file_bytes(buf);
    free(buf);
    assert_int_equal(atomic_load(&pins_at_first_copy), 1);
    assert_int_equal(gdu_io_engine_prestage(e, why, sizeof why), 0);
    assert_true(atomic_load(&copy_before_rest));
    assert_reads_through_the_whole_region(e);
    gdu_io_engine_destroy(e);
}

/* The region's second part refused: the other slots are pinned one by one,
 * and prestage finds every slot there; without prestage, the reads pin them
 * at their first use. */
static void refused_rest_pins_the_other_slots_one_by_one(void **state)
{
    gdu_io_engine *e = engine_with(false, 0, false, true);
    char why[256] = "";
    assert_int_equal(gdu_io_engine_prestage(e, why, sizeof why), 0);
    assert_int_equal(atomic_load(&pins), 2 + WORKERS * (SLOTS - 1));
    uint8_t *buf = malloc(SIZE);
    assert_int_equal(read_all(e, buf, why, sizeof why), 0);
    assert_file_bytes(buf);
    assert_int_equal(atomic_load(&pins), 2 + WORKERS * (SLOTS - 1));
    assert_true(all_grown(e));
    const char *lo = e->staging, *hi = e->staging + e->staging_bytes;
    for (unsigned w = 0; w < WORKERS; w++) {
        assert_ptr_equal(e->workers[w].slots_of[0].buf, lo + (size_t)w * CHUNK);
        for (unsigned j = 1; j < SLOTS; j++) {
            const char *p = e->workers[w].slots_of[j].buf;
            assert_non_null(p);
            assert_true(p + CHUNK <= lo || p >= hi);
        }
    }
    gdu_io_engine_destroy(e);

    e = engine_with(false, 0, false, true);
    assert_int_equal(read_all(e, buf, why, sizeof why), 0);
    assert_file_bytes(buf);
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
    assert_int_equal(atomic_load(&pins), 2);
    for (unsigned w = 0; w < WORKERS; w++)
        for (unsigned j = 0; j < SLOTS; j++)
            assert_non_null(e->workers[w].slots_of[j].buf);
    assert_int_equal(gdu_io_engine_prestage(e, why, sizeof why), 0); /* nothing more to do */
    assert_int_equal(atomic_load(&pins), 2);
    uint8_t *buf = malloc(SIZE);
    assert_int_equal(read_all(e, buf, why, sizeof why), 0);
    assert_int_equal(atomic_load(&pins), 2); /* the reads pin nothing more */
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

/* This process's resident memory (VmRSS), in bytes. */
static uint64_t resident_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    assert_non_null(f);
    char line[256];
    unsigned long long kib = 0;
    while (fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "VmRSS: %llu kB", &kib) == 1)
            break;
    fclose(f);
    return (uint64_t)kib << 10;
}

/* Staging set far above the built-in size (2 workers x 2 slots of 512 MiB
 * = 2 GiB, as GDUNLOCK_IO_CHUNK=512M gives) is neither faulted in nor
 * pinned at start: a small load takes the memory it reads, not the
 * settings' (every slot was faulted in whatever the load). */
static void large_staging_follows_the_load(void **state)
{
    gdu_io_options o = io_test_options(2, (size_t)512 << 20, 2, GDU_IO_DIRECT_OFF);
    gdu_io_engine *e = NULL;
    char why[256] = "";
    atomic_store(&pins, 0);
    uint64_t before = resident_bytes();
    assert_int_equal(gdu_io_engine_create_moving(&o, &counting, &e, why, sizeof why), 0);
    assert_int_equal(gdu_io_engine_prestage(e, why, sizeof why), 0);
    uint8_t *buf = malloc(SIZE);
    assert_int_equal(read_all(e, buf, why, sizeof why), 0);
    assert_file_bytes(buf);
    free(buf);
    uint64_t grown = resident_bytes() - before;
    if (grown > ((uint64_t)64 << 20))
        fail_msg("a %llu-byte load with 2 GiB of staging set took %llu MiB",
                 (unsigned long long)SIZE, (unsigned long long)(grown >> 20));
    assert_int_equal(atomic_load(&pins), 0);
    gdu_io_engine_destroy(e);
}

/* Staging over a quarter of the machine's memory is refused, naming the
 * settings that make it (the variables where they are set); the built-in
 * defaults shrink to fit a small machine instead. */
static void staging_over_a_share_of_memory_is_refused(void **state)
{
    char why[512] = "";
    setenv("GDUNLOCK_IO_CHUNK", "1G", 1);
    gdu_io_options o = io_test_options(12, (size_t)1 << 30, 2, GDU_IO_DIRECT_OFF);
    assert_int_equal(gdu_io_options_bound_staging(&o, (uint64_t)16 << 30, why, sizeof why),
                     -EINVAL);
    unsetenv("GDUNLOCK_IO_CHUNK");
    assert_non_null(strstr(why, "12 workers x 2 slots x 1.00 GiB chunks is 24.00 GiB"));
    assert_non_null(strstr(why, "a quarter of this machine's 16.00 GiB"));
    assert_non_null(strstr(why, "GDUNLOCK_IO_CHUNK (1G)"));
    assert_int_equal(o.workers, 12); /* refused, not changed */
    gdu_io_options d = io_test_options(gdu_io_default_workers(), GDU_IO_DEFAULT_CHUNK,
                                       GDU_IO_DEFAULT_STAGING, GDU_IO_DIRECT_OFF);
    assert_int_equal(gdu_io_options_bound_staging(&d, (uint64_t)16 << 20, why, sizeof why), 0);
    assert_int_equal(d.staging_per_worker, 1);
    assert_int_equal(d.workers, 1);
    /* through the engine: this machine's memory */
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t memory = (uint64_t)pages * (uint64_t)page;
    unsigned workers = (unsigned)(memory / 4 / ((uint64_t)GDU_IO_MAX_STAGING << 30)) + 1;
    gdu_io_options big =
        io_test_options(workers, (size_t)1 << 30, GDU_IO_MAX_STAGING, GDU_IO_DIRECT_OFF);
    gdu_io_engine *e = NULL;
    assert_int_equal(gdu_io_engine_create(&big, &e, why, sizeof why), -EINVAL);
    assert_null(e);
    assert_non_null(strstr(why, "more than a quarter of this machine's"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(region_pinned_in_two_parts_at_creation),
        cmocka_unit_test(first_copy_waits_for_the_first_slots_only),
        cmocka_unit_test(refused_rest_pins_the_other_slots_one_by_one),
        cmocka_unit_test(smoke_destroyed_at_once),
        cmocka_unit_test(refused_region_pins_slot_by_slot),
        cmocka_unit_test(failed_slots_degrade_or_fail_then_recover),
        cmocka_unit_test(no_staging_fails_the_request),
        cmocka_unit_test(prestage_waits_for_every_slot),
        cmocka_unit_test(large_staging_follows_the_load),
        cmocka_unit_test(staging_over_a_share_of_memory_is_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
