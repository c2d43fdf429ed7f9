/* gdu_p2p_bench_run against the fake libcuda of test_p2p_fake_libcuda.c,
 * whose copies advance virtual stream clocks at known bandwidths: the
 * matrices must come out as those bandwidths, every destination buffer must
 * be checked, and damaged copies or a failed enable must be reported. */
#include "p2p/p2p_bench.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define BYTES (1u << 20)
#define HOPS 50

static const gdu_cuda *cu;
static gdu_p2p_results *res;

/* GB/s of reps copies that cost cost_us each plus bytes at gbps. */
static double expect_gbps(double gbps, double cost_us)
{
    return BYTES / (cost_us + BYTES / (gbps * 1e3)) / 1e3;
}

static int run_with(int n, int sm)
{
    gdu_p2p_bench_config cfg = {
        .bytes = BYTES, .iters = 3, .reps = 5, .latency_reps = 10, .sm = sm, .chase_hops = HOPS};
    int ordinals[] = {0, 1, 2};
    char why[256] = "";
    int rc = gdu_p2p_bench_run(cu, ordinals, n, &cfg, res, why, sizeof why);
    if (rc != 0)
        print_error("bench: %s\n", why);
    return rc;
}

static int run(int n) { return run_with(n, 0); }

static int run_sm(int n) { return run_with(n, 1); }

static int setup(void **state)
{
    char why[256];
    cu = gdu_cuda_load(why, sizeof why);
    if (cu == NULL) {
        print_error("fake libcuda not loaded: %s\n", why);
        return -1;
    }
    res = calloc(1, sizeof *res);
    return res ? 0 : -1;
}

static int teardown(void **state)
{
    free(res);
    return 0;
}

static int clean_env(void **state)
{
    unsetenv("GDU_FAKE_P2P_GPUS");
    unsetenv("GDU_FAKE_P2P_PEER");
    unsetenv("GDU_FAKE_P2P_CORRUPT");
    unsetenv("GDU_FAKE_P2P_ENABLE_FAIL");
    unsetenv("GDU_FAKE_P2P_SM_FAULT");
    unsetenv("GDU_FAKE_P2P_SM_CORRUPT");
    unsetenv("GDU_FAKE_P2P_JIT_FAIL");
    return 0;
}

static void test_known_bandwidths(void **state)
{
    assert_int_equal(run(2), 0);
    const int E = GDU_P2P_MODE_ENABLED, D = GDU_P2P_MODE_DISABLED;
    assert_true(res->can_access[0][1] && res->can_access[1][0]);
    for (int m = 0; m < GDU_P2P_MODES; m++)
        for (int i = 0; i < 2; i++) {
            assert_float_equal(res->uni_gbps[m].cell[i][i].median, expect_gbps(2000, 1), 0.5);
            assert_float_equal(res->bidi_gbps[m].cell[i][i].median, 2 * expect_gbps(2000, 1), 1);
            assert_float_equal(res->lat_gpu_us[m].cell[i][i].median, 1.0, 0.01);
        }
    assert_float_equal(res->uni_gbps[E].cell[0][1].median, expect_gbps(400, 2), 0.1);
    assert_float_equal(res->uni_gbps[E].cell[1][0].median, expect_gbps(400, 2), 0.1);
    assert_float_equal(res->uni_gbps[D].cell[0][1].median, expect_gbps(40, 10), 0.01);
    assert_float_equal(res->bidi_gbps[E].cell[0][1].median, 2 * expect_gbps(400, 2), 0.2);
    assert_float_equal(res->bidi_gbps[D].cell[1][0].median, 2 * expect_gbps(40, 10), 0.02);
    assert_float_equal(res->lat_gpu_us[E].cell[0][1].median, 2.0, 0.01);
    assert_float_equal(res->lat_gpu_us[D].cell[0][1].median, 10.0, 0.01);
    assert_true(res->lat_cpu_us[D].cell[0][1].valid);
    /* Spread: equal samples here. */
    assert_float_equal(res->uni_gbps[E].cell[0][1].min, res->uni_gbps[E].cell[0][1].max, 1e-6);
    /* Per mode: n*n unidirectional + 2*n*n bidirectional destinations. */
    assert_int_equal(res->buffers_checked, 2 * (4 + 8));
    assert_int_equal(res->buffers_corrupt, 0);
    assert_false(res->peer_enabled[0][1]); /* disabled again at the end */
    assert_int_equal(res->enable_error[0], '\0');
}

static void test_corrupt_peer_copies(void **state)
{
    setenv("GDU_FAKE_P2P_CORRUPT", "1", 1);
    assert_int_equal(run(2), 0);
    /* Enabled mode: 2 unidirectional + 2 bidirectional cells x 2 buffers. */
    assert_int_equal(res->buffers_corrupt, 6);
    assert_true(res->corrupt[GDU_P2P_MODE_ENABLED][0][1]);
    assert_true(res->corrupt[GDU_P2P_MODE_ENABLED][1][0]);
    assert_false(res->corrupt[GDU_P2P_MODE_ENABLED][0][0]);
    assert_false(res->corrupt[GDU_P2P_MODE_DISABLED][0][1]);
}

static void test_enable_fails(void **state)
{
    setenv("GDU_FAKE_P2P_ENABLE_FAIL", "1", 1);
    assert_int_equal(run(2), 0);
    assert_true(res->enable_failed[0][1]);
    assert_false(res->peer_enabled[0][1]);
    assert_non_null(strstr(res->enable_error, "CUDA_ERROR_MAP_FAILED"));
    /* Those cells stayed staged. */
    assert_float_equal(res->uni_gbps[GDU_P2P_MODE_ENABLED].cell[0][1].median, expect_gbps(40, 10),
                       0.01);
}

static void test_no_peer_access(void **state)
{
    setenv("GDU_FAKE_P2P_PEER", "0", 1);
    assert_int_equal(run(2), 0);
    assert_false(res->can_access[0][1]);
    assert_false(res->enable_failed[0][1]);
    assert_float_equal(res->uni_gbps[GDU_P2P_MODE_ENABLED].cell[0][1].median, expect_gbps(40, 10),
                       0.01);
}

static void test_one_gpu(void **state)
{
    setenv("GDU_FAKE_P2P_GPUS", "1", 1);
    assert_int_equal(run(1), 0);
    assert_int_equal(res->uni_gbps[0].n, 1);
    assert_true(res->uni_gbps[GDU_P2P_MODE_ENABLED].cell[0][0].valid);
    assert_false(res->uni_gbps[GDU_P2P_MODE_ENABLED].cell[0][1].valid);
    assert_int_equal(res->buffers_checked, 2 * 3);
}

static void test_three_gpus(void **state)
{
    setenv("GDU_FAKE_P2P_GPUS", "3", 1);
    assert_int_equal(run(3), 0);
    assert_int_equal(res->buffers_checked, 2 * (9 + 18));
    assert_int_equal(res->buffers_corrupt, 0);
    assert_float_equal(res->uni_gbps[GDU_P2P_MODE_ENABLED].cell[2][1].median, expect_gbps(400, 2),
                       0.1);
}

static void test_bad_config(void **state)
{
    gdu_p2p_bench_config cfg = {.bytes = BYTES, .iters = 0, .reps = 5, .latency_reps = 10};
    int ordinals[] = {0};
    char why[128];
    assert_int_equal(gdu_p2p_bench_run(cu, ordinals, 1, &cfg, res, why, sizeof why), -1);
    assert_non_null(strstr(why, "invalid"));
    cfg.iters = 1;
    assert_int_equal(gdu_p2p_bench_run(cu, ordinals, 0, &cfg, res, why, sizeof why), -1);
}

static void test_cuda_error_named(void **state)
{
    int ordinals[] = {0, 5}; /* no such GPU: cuDeviceGet fails */
    gdu_p2p_bench_config cfg = {.bytes = BYTES, .iters = 1, .reps = 1, .latency_reps = 1};
    char why[128];
    assert_int_equal(gdu_p2p_bench_run(cu, ordinals, 2, &cfg, res, why, sizeof why), -1);
    assert_non_null(strstr(why, "cuDeviceGet"));
}

static void assert_routes(int n, gdu_p2p_route_state want)
{
    for (int r = 0; r < GDU_P2P_ROUTES; r++)
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                if (res->route[r][i][j] != want)
                    print_error("route %s %d -> %d: %s (%s)\n", gdu_p2p_route_id(r), i, j,
                                gdu_p2p_route_state_id(res->route[r][i][j]),
                                res->route_detail[r][i][j]);
                assert_int_equal(res->route[r][i][j], want);
            }
}

/* SM kernels cost a 3 us launch each plus bytes at the fake's rate. */
static double expect_sm_gbps(double gbps) { return expect_gbps(gbps, 3); }

static void test_sm_known(void **state)
{
    assert_int_equal(run_sm(2), 0);
    assert_string_equal(res->sm_error, "");
    assert_true(res->sm_run);
    assert_routes(2, GDU_P2P_ROUTE_OK);
    /* Write: the source GPU stores into the peer (300); read: the destination
     * GPU loads from the peer (250); within a GPU 1500. */
    assert_float_equal(res->sm_write_gbps.cell[0][1].median, expect_sm_gbps(300), 0.1);
    assert_float_equal(res->sm_write_gbps.cell[1][0].median, expect_sm_gbps(300), 0.1);
    assert_float_equal(res->sm_read_gbps.cell[0][1].median, expect_sm_gbps(250), 0.1);
    assert_float_equal(res->sm_read_gbps.cell[1][0].median, expect_sm_gbps(250), 0.1);
    for (int i = 0; i < 2; i++) {
        assert_float_equal(res->sm_write_gbps.cell[i][i].median, expect_sm_gbps(1500), 0.5);
        assert_float_equal(res->sm_read_gbps.cell[i][i].median, expect_sm_gbps(1500), 0.5);
        assert_float_equal(res->sm_latency_us.cell[i][i].median, 0.5 + 3.0 / HOPS, 1e-3);
    }
    assert_float_equal(res->sm_latency_us.cell[0][1].median, 1.5 + 3.0 / HOPS, 1e-3);
    assert_float_equal(res->sm_latency_us.cell[1][0].median, 1.5 + 3.0 / HOPS, 1e-3);
    assert_int_equal(res->chase_nodes, BYTES / 256);
    assert_int_equal(res->chase_hops, HOPS);
    assert_int_equal(res->sm_check_bytes, BYTES);
    /* The copy engine's matrices are unchanged by the SM part. */
    assert_float_equal(res->uni_gbps[GDU_P2P_MODE_ENABLED].cell[0][1].median, expect_gbps(400, 2),
                       0.1);
    assert_false(res->peer_enabled[0][1]);
}

/* Peer SM access faults (the GMMU aperture lock): the run completes, the
 * fault is named on its route, nothing after it runs, the copy engine's
 * numbers stand, and each GPU's own SM numbers (measured first) too. */
static void test_sm_fault(void **state)
{
    setenv("GDU_FAKE_P2P_SM_FAULT", "1", 1);
    assert_int_equal(run_sm(2), 0);
    const int W = GDU_P2P_ROUTE_SM_WRITE, R = GDU_P2P_ROUTE_SM_READ;
    assert_int_equal(res->route[W][0][0], GDU_P2P_ROUTE_OK);
    assert_int_equal(res->route[R][0][0], GDU_P2P_ROUTE_OK);
    assert_int_equal(res->route[W][0][1], GDU_P2P_ROUTE_FAULT);
    assert_string_equal(res->route_detail[W][0][1],
                        "cuStreamSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS (700)");
    assert_int_equal(res->route[R][0][1], GDU_P2P_ROUTE_NOT_RUN);
    assert_int_equal(res->route[W][1][0], GDU_P2P_ROUTE_NOT_RUN);
    assert_int_equal(res->route[W][1][1], GDU_P2P_ROUTE_OK);
    assert_int_equal(res->route[GDU_P2P_ROUTE_CE][0][1], GDU_P2P_ROUTE_OK);
    assert_non_null(strstr(res->sm_error, "SM write 0 -> 1"));
    for (int i = 0; i < 2; i++) {
        assert_float_equal(res->sm_write_gbps.cell[i][i].median, expect_sm_gbps(1500), 0.5);
        assert_float_equal(res->sm_latency_us.cell[i][i].median, 0.5 + 3.0 / HOPS, 1e-3);
    }
    assert_false(res->sm_write_gbps.cell[0][1].valid);
    assert_float_equal(res->uni_gbps[GDU_P2P_MODE_ENABLED].cell[0][1].median, expect_gbps(400, 2),
                       0.1);
    assert_int_equal(res->buffers_corrupt, 0);
}

/* Without peer access no kernel may touch the peer's memory (the fake would
 * fault): those routes are "no peer", the diagonal is measured. */
static void test_sm_no_peer(void **state)
{
    const char *vars[] = {"GDU_FAKE_P2P_PEER", "GDU_FAKE_P2P_ENABLE_FAIL"};
    const char *vals[] = {"0", "1"};
    for (int k = 0; k < 2; k++) {
        clean_env(state);
        setenv(vars[k], vals[k], 1);
        assert_int_equal(run_sm(2), 0);
        assert_string_equal(res->sm_error, "");
        for (int r = 0; r < GDU_P2P_ROUTES; r++) {
            assert_int_equal(res->route[r][0][1], GDU_P2P_ROUTE_NO_PEER);
            assert_int_equal(res->route[r][1][0], GDU_P2P_ROUTE_NO_PEER);
            assert_int_equal(res->route[r][1][1], GDU_P2P_ROUTE_OK);
        }
        assert_false(res->sm_write_gbps.cell[0][1].valid);
        assert_false(res->sm_latency_us.cell[0][1].valid);
        assert_true(res->sm_latency_us.cell[1][1].valid);
    }
}

static void test_sm_corrupt_stores(void **state)
{
    setenv("GDU_FAKE_P2P_SM_CORRUPT", "1", 1);
    assert_int_equal(run_sm(2), 0);
    const int W = GDU_P2P_ROUTE_SM_WRITE, R = GDU_P2P_ROUTE_SM_READ;
    assert_int_equal(res->route[W][0][1], GDU_P2P_ROUTE_WRONG);
    assert_string_equal(res->route_detail[W][0][1],
                        "pattern check: byte 524288 of 1048576 differs");
    assert_int_equal(res->route[W][1][0], GDU_P2P_ROUTE_WRONG);
    assert_int_equal(res->route[R][0][1], GDU_P2P_ROUTE_OK); /* loads from the peer are fine */
    assert_int_equal(res->route[W][0][0], GDU_P2P_ROUTE_OK);
    assert_true(res->sm_write_gbps.cell[0][1].valid); /* measured, and flagged */
}

static void test_sm_kernels_do_not_load(void **state)
{
    setenv("GDU_FAKE_P2P_JIT_FAIL", "1", 1);
    assert_int_equal(run_sm(2), 0);
    assert_non_null(strstr(res->sm_error, "GPU 0: loading the SM kernels"));
    assert_non_null(strstr(res->sm_error, "CUDA_ERROR_INVALID_PTX"));
    assert_non_null(strstr(res->sm_error, "ptxas fatal: fake JIT failure"));
    assert_null(strstr(res->sm_error, "second line"));
    assert_int_equal(res->route[GDU_P2P_ROUTE_SM_WRITE][0][0], GDU_P2P_ROUTE_NOT_RUN);
    assert_int_equal(res->route[GDU_P2P_ROUTE_CE][0][1], GDU_P2P_ROUTE_OK);
    assert_false(res->peer_enabled[0][1]); /* the contexts were fine: disabled as usual */
}

static void test_sm_one_gpu(void **state)
{
    setenv("GDU_FAKE_P2P_GPUS", "1", 1);
    assert_int_equal(run_sm(1), 0);
    assert_routes(1, GDU_P2P_ROUTE_OK);
    assert_true(res->sm_write_gbps.cell[0][0].valid);
    assert_true(res->sm_read_gbps.cell[0][0].valid);
    assert_float_equal(res->sm_latency_us.cell[0][0].median, 0.5 + 3.0 / HOPS, 1e-3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_known_bandwidths, clean_env),
        cmocka_unit_test_setup(test_corrupt_peer_copies, clean_env),
        cmocka_unit_test_setup(test_enable_fails, clean_env),
        cmocka_unit_test_setup(test_no_peer_access, clean_env),
        cmocka_unit_test_setup(test_one_gpu, clean_env),
        cmocka_unit_test_setup(test_three_gpus, clean_env),
        cmocka_unit_test_setup(test_bad_config, clean_env),
        cmocka_unit_test_setup(test_cuda_error_named, clean_env),
        cmocka_unit_test_setup(test_sm_known, clean_env),
        cmocka_unit_test_setup(test_sm_fault, clean_env),
        cmocka_unit_test_setup(test_sm_no_peer, clean_env),
        cmocka_unit_test_setup(test_sm_corrupt_stores, clean_env),
        cmocka_unit_test_setup(test_sm_kernels_do_not_load, clean_env),
        cmocka_unit_test_setup(test_sm_one_gpu, clean_env),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
