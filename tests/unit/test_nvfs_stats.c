/* nvidia-fs stats parser: every recorded format, deltas, hostile input. */
#include "probe/nvfs_stats.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#define FIXTURE(name) GDUNLOCK_FIXTURES "/nvfs-stats/" name

static void load(const char *path, gdu_nvfs_stats *st)
{
    char why[256] = "";
    int rc = gdu_nvfs_stats_read(path, st, why, sizeof why);
    if (rc != 0)
        fail_msg("%s: %s", path, why);
}

/* Delta between two fixtures. */
static void delta_of(const char *before, const char *after, gdu_nvfs_delta *d)
{
    gdu_nvfs_stats b, a;
    load(before, &b);
    load(after, &a);
    gdu_nvfs_stats_delta(&b, &a, d);
}

static void test_v4_iostats_off(void **state)
{
    gdu_nvfs_stats st;
    load(FIXTURE("v4-2.25.7-iostats-off.txt"), &st);
    assert_int_equal(st.stats_version, 4);
    assert_string_equal(st.gds_version, "1.14.0.31");
    assert_string_equal(st.driver_version, "2.25.7");
    assert_string_equal(st.logging_level, "info");
    assert_int_equal(st.peerdirect, GDU_NVFS_YES);
    assert_int_equal(st.io_stats, GDU_NVFS_NO);
    assert_int_equal(st.peer_stats, GDU_NVFS_NO);
    /* IO stats off: no Reads n/ok, only err counters. */
    assert_false(st.present[GDU_NVFS_READS_N]);
    assert_true(st.present[GDU_NVFS_READS_ERR]);
    assert_true(st.present[GDU_NVFS_READS_IO_STATE_ERR]);
    assert_true(st.present[GDU_NVFS_WRITES_PG_CACHE_EIO]);
    assert_int_equal(st.value[GDU_NVFS_BAR1_N], 1);
    assert_int_equal(st.value[GDU_NVFS_BAR1_OK], 1);
    assert_int_equal(st.value[GDU_NVFS_BAR1_FREE], 1);
    assert_true(st.present[GDU_NVFS_BAR1_DELAY_FREES]);
    assert_true(st.present[GDU_NVFS_ERROR_DMA_REF]);
    assert_true(st.present[GDU_NVFS_OPS_BATCHIO]);
    assert_true(st.present[GDU_NVFS_SPARSE_PAGES]);
    assert_int_equal(st.n_gpus, 1);
    assert_string_equal(st.gpus[0].pci, "0000:01:00.0");
    assert_string_equal(st.gpus[0].uuid, "5c1a9e42-8a0b-4f3e-a0d6-3b2f1c4e9d71");
    assert_int_equal(st.gpus[0].max_pinned_mib, 2);
    assert_false(st.gpus[0].has_cross_root_port);
    assert_int_equal(st.unknown_lines, 0);
    assert_int_equal(st.bad_values, 0);
}

static void test_v4_iostats_on_peer_on(void **state)
{
    gdu_nvfs_stats st;
    load(FIXTURE("v4-2.28.4-iostats-on-peer-on.txt"), &st);
    assert_int_equal(st.io_stats, GDU_NVFS_YES);
    assert_int_equal(st.peer_stats, GDU_NVFS_YES);
    assert_int_equal(st.peerdirect, GDU_NVFS_NO);
    assert_string_equal(st.logging_level, "warn");
    assert_int_equal(st.value[GDU_NVFS_BATCHES_N], 10);
    assert_int_equal(st.value[GDU_NVFS_BATCHES_SUBMIT_LAT_US], 35);
    assert_int_equal(st.value[GDU_NVFS_READS_N], 524288);
    assert_int_equal(st.value[GDU_NVFS_READS_MIB], 524288);
    /* the second "Reads" line adds to the same section */
    assert_int_equal(st.value[GDU_NVFS_READS_BW_MIBS], 13224);
    assert_int_equal(st.value[GDU_NVFS_READS_LAT_US], 594);
    assert_int_equal(st.value[GDU_NVFS_WRITES_MIB], 4096);
    assert_int_equal(st.value[GDU_NVFS_WRITES_LAT_US], 1201);
    assert_int_equal(st.value[GDU_NVFS_BAR1_ACTIVE], 4);
    assert_int_equal(st.value[GDU_NVFS_OPS_READ], 2);
    assert_int_equal(st.n_gpus, 2);
    assert_int_equal(st.gpus[0].registered_mib, 64);
    assert_true(st.gpus[1].has_cross_root_port);
    assert_int_equal(st.gpus[1].cross_root_port_pct, 12);
    assert_string_equal(st.gpus[1].pci, "0000:41:00.0");
    assert_int_equal(st.unknown_lines, 0);
    assert_int_equal(st.bad_values, 0);
}

static void test_v2(void **state)
{
    gdu_nvfs_stats st;
    load(FIXTURE("v2-2.3.1.txt"), &st);
    assert_int_equal(st.stats_version, 2);
    assert_string_equal(st.driver_version, "2.3.1");
    assert_int_equal(st.io_stats, GDU_NVFS_UNKNOWN);
    assert_int_equal(st.peerdirect, GDU_NVFS_UNKNOWN);
    assert_int_equal(st.value[GDU_NVFS_READS_N], 2048);
    assert_int_equal(st.value[GDU_NVFS_BAR1_OK], 3);
    assert_false(st.present[GDU_NVFS_BAR1_DELAY_FREES]);
    assert_false(st.present[GDU_NVFS_ERROR_DMA_REF]);
    assert_false(st.present[GDU_NVFS_OPS_BATCHIO]);
    assert_true(st.present[GDU_NVFS_OPS_WRITE]);
    assert_int_equal(st.n_gpus, 1);
    assert_int_equal(st.unknown_lines, 0);
}

static void test_mb_units(void **state)
{
    gdu_nvfs_stats st;
    load(FIXTURE("v4-mb-units.txt"), &st);
    assert_int_equal(st.value[GDU_NVFS_SHADOW_BUF_MIB], 256);
    assert_true(st.present[GDU_NVFS_SHADOW_BUF_MIB]);
    assert_int_equal(st.value[GDU_NVFS_BAR1_N], 2088);
    assert_int_equal(st.value[GDU_NVFS_BAR1_CALLBACKS], 6);
    assert_int_equal(st.value[GDU_NVFS_WRITES_IO_STATE_ERR], 237);
    assert_int_equal(st.n_gpus, 2);
    assert_int_equal(st.gpus[0].registered_mib, 32);
    assert_int_equal(st.gpus[0].max_pinned_mib, 1977);
    assert_true(st.gpus[1].has_cache);
    assert_int_equal(st.unknown_lines, 0);
}

static void test_future_unknown_lines(void **state)
{
    gdu_nvfs_stats st;
    load(FIXTURE("future-unknown-lines.txt"), &st);
    assert_int_equal(st.stats_version, 5);
    assert_string_equal(st.driver_version, "3.0.1");
    assert_string_equal(st.gds_version, "9.9.9.9");
    assert_int_equal(st.value[GDU_NVFS_BAR1_OK], 5);
    /* the overflowing value is dropped, its neighbour kept */
    assert_false(st.present[GDU_NVFS_READS_ERR]);
    assert_true(st.present[GDU_NVFS_READS_IO_STATE_ERR]);
    assert_int_equal(st.bad_values, 1);
    /* "Quantum Flux", the line without a colon, remap=3, numa=1 */
    assert_int_equal(st.unknown_lines, 4);
    assert_int_equal(st.n_gpus, 1);
    assert_int_equal(st.gpus[0].registered_mib, 7);
}

static void test_delta_direct(void **state)
{
    gdu_nvfs_delta d;
    delta_of(FIXTURE("direct-before.txt"), FIXTURE("direct-after.txt"), &d);
    assert_false(d.counters_reset);
    assert_true(d.present[GDU_NVFS_BAR1_OK]);
    assert_int_equal(d.value[GDU_NVFS_BAR1_N], 2);
    assert_int_equal(d.value[GDU_NVFS_BAR1_OK], 2);
    assert_int_equal(d.value[GDU_NVFS_BAR1_ERR], 0);
    assert_int_equal(d.value[GDU_NVFS_READS_N], 4);
    assert_int_equal(d.value[GDU_NVFS_READS_MIB], 16);
    assert_int_equal(d.value[GDU_NVFS_WRITES_MIB], 16);
    assert_int_equal(d.value[GDU_NVFS_READS_ERR], 0);
    /* bandwidth is a gauge: its delta is reported but means nothing */
    assert_false(gdu_nvfs_field_is_counter(GDU_NVFS_READS_BW_MIBS));
    assert_int_equal(d.n_gpus, 1);
    assert_true(d.gpus[0].in_before && d.gpus[0].in_after);
    assert_int_equal(d.gpus[0].registered_mib, 32);
    assert_int_equal(d.gpus[0].registered_mib_after, 32);
}

static void test_delta_bar1_err(void **state)
{
    gdu_nvfs_delta d;
    delta_of(FIXTURE("bar1-err-before.txt"), FIXTURE("bar1-err-after.txt"), &d);
    assert_int_equal(d.value[GDU_NVFS_BAR1_ERR], 2);
    assert_int_equal(d.value[GDU_NVFS_BAR1_OK], 0);
    assert_int_equal(d.value[GDU_NVFS_MMAP_OK], 2);
    /* IO stats off: n is absent on both sides, so no delta either */
    assert_false(d.present[GDU_NVFS_READS_N]);
    assert_true(d.present[GDU_NVFS_READS_ERR]);
}

static void test_delta_shadow_and_reset(void **state)
{
    gdu_nvfs_delta d;
    delta_of(FIXTURE("shadow-before.txt"), FIXTURE("shadow-after.txt"), &d);
    assert_int_equal(d.value[GDU_NVFS_SHADOW_BUF_MIB], 32);
    assert_int_equal(d.gpus[0].cache_mib, 32);
    assert_false(d.counters_reset);
    /* reversed: gauges go negative; counters going back means a reset */
    delta_of(FIXTURE("shadow-after.txt"), FIXTURE("shadow-before.txt"), &d);
    assert_int_equal(d.value[GDU_NVFS_SHADOW_BUF_MIB], -32);
    assert_false(d.counters_reset); /* gauges only: no counter went back */
    delta_of(FIXTURE("direct-after.txt"), FIXTURE("direct-before.txt"), &d);
    assert_true(d.counters_reset);
}

static void test_delta_gpu_appears(void **state)
{
    gdu_nvfs_delta d;
    delta_of(FIXTURE("v4-2.25.7-iostats-off.txt"), FIXTURE("v4-2.28.4-iostats-on-peer-on.txt"), &d);
    assert_int_equal(d.n_gpus, 2);
    assert_true(d.gpus[0].in_before && d.gpus[0].in_after);
    assert_int_equal(d.gpus[0].registered_mib, 64);
    assert_false(d.gpus[1].in_before);
    assert_true(d.gpus[1].in_after);
}

static void test_missing_file(void **state)
{
    gdu_nvfs_stats st;
    char why[256];
    int rc = gdu_nvfs_stats_read(FIXTURE("no-such-file"), &st, why, sizeof why);
    assert_int_equal(rc, -ENOENT);
    assert_non_null(strstr(why, "nvidia-fs is not loaded"));
}

/* GDUNLOCK_NVFS_STATS may name anything: a FIFO is not opened (it would block). */
static void test_fifo_not_opened(void **state)
{
    char dir[] = "/tmp/gdu-nvfs-XXXXXX", path[64], why[256];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/stats", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    alarm(20);
    gdu_nvfs_stats st;
    assert_int_equal(gdu_nvfs_stats_read(path, &st, why, sizeof why), -EINVAL);
    alarm(0);
    assert_non_null(strstr(why, "is not a regular file"));
    unlink(path);
    rmdir(dir);
}

static void test_not_stats(void **state)
{
    gdu_nvfs_stats st;
    const char text[] = "hello world\nthis: is not=stats\n";
    assert_int_equal(gdu_nvfs_stats_parse(text, sizeof text - 1, &st), -EINVAL);
    assert_int_equal(gdu_nvfs_stats_parse(NULL, 0, &st), -EINVAL);
    assert_int_equal(gdu_nvfs_stats_parse("", 0, &st), -EINVAL);
}

/* The parser must stop at len even when the bytes after it look like stats. */
static void test_length_bound(void **state)
{
    gdu_nvfs_stats st;
    const char text[] = "Bar1-map\t\t\t: n=1 ok=1 err=0\nBar1-map\t\t\t: n=9";
    size_t cut = strlen("Bar1-map\t\t\t: n=1 ok=1 err=0\nBar1-map\t\t\t: n=");
    assert_int_equal(gdu_nvfs_stats_parse(text, cut, &st), 0);
    assert_int_equal(st.value[GDU_NVFS_BAR1_N], 1); /* "n=" with nothing after is bad */
    assert_int_equal(st.bad_values, 1);
    /* a 1-byte buffer with no terminator */
    char one = 'G';
    assert_int_equal(gdu_nvfs_stats_parse(&one, 1, &st), -EINVAL);
}

/* Non-printable bytes in text fields come out as '?', and too many GPU lines are dropped, counted. */
static void test_hostile_text(void **state)
{
    char *text = malloc(200 * 64);
    assert_non_null(text);
    size_t len = (size_t)sprintf(text, "GDS Version: \x01\xff"
                                       "abc\nNVFS statistics(ver: 99999999999)\n");
    for (int i = 0; i < 70; i++)
        len += (size_t)sprintf(text + len, "GPU 0000:%02x:00.0  uuid:u%d : Registered_MiB=%d\n", i,
                               i, i);
    gdu_nvfs_stats st;
    assert_int_equal(gdu_nvfs_stats_parse(text, len, &st), 0);
    assert_string_equal(st.gds_version, "??abc");
    assert_int_equal(st.stats_version, -1); /* absurd version rejected */
    assert_int_equal(st.n_gpus, GDU_NVFS_MAX_GPUS);
    assert_int_equal(st.gpus_dropped, 70 - GDU_NVFS_MAX_GPUS);
    free(text);
}

static void test_field_names(void **state)
{
    assert_string_equal(gdu_nvfs_field_key(GDU_NVFS_BAR1_ERR), "bar1_map.err");
    assert_string_equal(gdu_nvfs_field_label(GDU_NVFS_READS_IO_STATE_ERR), "Reads io_state_err");
    assert_true(gdu_nvfs_field_is_counter(GDU_NVFS_BAR1_OK));
    assert_false(gdu_nvfs_field_is_counter(GDU_NVFS_BAR1_ACTIVE));
    assert_string_equal(gdu_nvfs_field_key(GDU_NVFS_FIELD_COUNT), "unknown");
    for (int f = 0; f < GDU_NVFS_FIELD_COUNT; f++)
        assert_non_null(gdu_nvfs_field_key(f));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v4_iostats_off),
        cmocka_unit_test(test_v4_iostats_on_peer_on),
        cmocka_unit_test(test_v2),
        cmocka_unit_test(test_mb_units),
        cmocka_unit_test(test_future_unknown_lines),
        cmocka_unit_test(test_delta_direct),
        cmocka_unit_test(test_delta_bar1_err),
        cmocka_unit_test(test_delta_shadow_and_reset),
        cmocka_unit_test(test_delta_gpu_appears),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_fifo_not_opened),
        cmocka_unit_test(test_not_stats),
        cmocka_unit_test(test_length_bound),
        cmocka_unit_test(test_hostile_text),
        cmocka_unit_test(test_field_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
