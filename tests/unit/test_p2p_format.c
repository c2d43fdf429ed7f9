/* The p2p report's renderers: matrices in p2pBandwidthLatencyTest's layout,
 * the capability table with reasons, and the JSON document. */
#include "p2p/p2p_report.h"

#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static char *render_matrix(const gdu_p2p_matrix *m, const int *ordinals, int spread)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    gdu_p2p_print_matrix(f, "Title", m, ordinals, 2, spread);
    fclose(f);
    return text;
}

static gdu_p2p_stat stat3(double med, double lo, double hi)
{
    return (gdu_p2p_stat){.valid = 1, .median = med, .min = lo, .max = hi};
}

static void test_matrix_layout(void **state)
{
    gdu_p2p_matrix m = {.n = 2};
    m.cell[0][0] = stat3(2030.123, 2010, 2040.5);
    m.cell[0][1] = stat3(394.8, 393.25, 395.7);
    m.cell[1][0] = stat3(37.7, 37.5, 37.9);
    int ordinals[] = {0, 3};
    char *t = render_matrix(&m, ordinals, 0);
    assert_string_equal(t, "Title\n"
                           "   D\\D         0         3\n"
                           "     0   2030.12    394.80\n"
                           "     3     37.70         -\n");
    free(t);
    t = render_matrix(&m, ordinals, 1);
    assert_non_null(strstr(t, "     3     37.70         -\n"
                              "       spread of the samples [min..max]\n"
                              "     0    [2010.00..2040.50]      [393.25..395.70]\n"
                              "     3        [37.50..37.90]                     -\n"));
    free(t);
}

static gdu_p2p_report *two_gpus(void)
{
    gdu_p2p_report *r = calloc(1, sizeof *r);
    r->n = 2;
    for (int i = 0; i < 2; i++) {
        r->gpu[i] =
            (gdu_p2p_gpu){.ordinal = i, .memory_bytes = 24ull << 30, .cc_major = 8, .cc_minor = 9};
        snprintf(r->gpu[i].name, sizeof r->gpu[i].name, "NVIDIA GeForce RTX 4090");
        snprintf(r->gpu[i].pci_bus_id, sizeof r->gpu[i].pci_bus_id, "0000:%02X:00.0", 0x1b + i);
        r->bar1_bytes[i] = 256ull << 20;
    }
    r->rm_known[0] = 1;
    r->rm_gpu_id[0] = 0x1b00;
    snprintf(r->date, sizeof r->date, "2026-11-30T01:00:00Z");
    snprintf(r->command_line, sizeof r->command_line, "gdunlock p2p --size 256M");
    r->bench =
        (gdu_p2p_bench_config){.bytes = 256ull << 20, .iters = 5, .reps = 5, .latency_reps = 100};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            if (i == j)
                continue;
            gdu_p2p_pair_report *p = &r->pair[i][j];
            gdu_p2p_facts_init(&p->facts);
            p->rm_known = 1;
            memset(p->rm.status, GDU_P2P_CAPS_STATUS_NOT_SUPPORTED, sizeof p->rm.status);
            p->rm.status[GDU_P2P_CAPS_INDEX_READ] = GDU_P2P_CAPS_STATUS_GPU_NOT_SUPPORTED;
            p->rm.status[GDU_P2P_CAPS_INDEX_WRITE] = GDU_P2P_CAPS_STATUS_GPU_NOT_SUPPORTED;
            p->facts.cuda_can_access = GDU_TRI_NO;
            p->facts.rm_caps_known = 1;
            p->facts.rm = p->rm;
            p->facts.geforce = GDU_TRI_YES;
            gdu_p2p_reason(&p->facts, &p->verdict);
        }
    gdu_p2p_results *res = &r->results;
    res->n = 2;
    res->ordinals[1] = 1;
    gdu_p2p_matrix *all[] = {&res->uni_gbps[0],   &res->uni_gbps[1],   &res->bidi_gbps[0],
                             &res->bidi_gbps[1],  &res->lat_gpu_us[0], &res->lat_gpu_us[1],
                             &res->lat_cpu_us[0], &res->lat_cpu_us[1]};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) {
        all[k]->n = 2;
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++)
                all[k]->cell[i][j] = stat3(10.0 * (double)(k + 1) + i + j / 10.0, 1, 99);
    }
    res->buffers_checked = 24;
    r->measured = 1;
    return r;
}

static char *render_report(const gdu_p2p_report *r)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    gdu_p2p_print_report(f, r, 0);
    fclose(f);
    return text;
}

static void test_report_refused_pair(void **state)
{
    gdu_p2p_report *r = two_gpus();
    char *t = render_report(r);
    assert_non_null(strstr(t, "0 -> 1   no        0     no       none (staged through "));
    assert_non_null(strstr(t, "gpu_not_supported"));
    assert_non_null(strstr(t, "[sku_lock]"));
    assert_non_null(strstr(t, "P2P Connectivity Matrix (CUDA can-access-peer)\n"
                              "   D\\D     0     1\n"
                              "     0     1     0\n"
                              "     1     0     1\n"));
    assert_non_null(strstr(t, "fix: run 'gdunlock p2p unlock --check': it says what this machine"));
    assert_non_null(strstr(t, "Unidirectional P2P=Disabled Bandwidth Matrix (GB/s, median)"));
    assert_non_null(strstr(t, "Bidirectional P2P=Enabled Bandwidth Matrix"));
    assert_non_null(strstr(t, "P2P=Enabled Latency Matrix, CPU-timed"));
    assert_non_null(strstr(t, "24 buffers compared with their source pattern: all matched"));
    assert_non_null(strstr(t, "256.00 MiB"));
    assert_non_null(strstr(t, "command: gdunlock p2p --size 256M\n"));
    assert_null(strstr(t, "\033[")); /* no colour when not asked */
    free(t);
    r->results.buffers_corrupt = 2;
    snprintf(r->bench_error, sizeof r->bench_error, "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (2)");
    t = render_report(r);
    assert_non_null(strstr(t, "2 WRONG"));
    assert_non_null(strstr(t, "Measurement stopped: cuMemAlloc"));
    free(t);
    free(r);
}

static void test_report_one_gpu(void **state)
{
    gdu_p2p_report *r = two_gpus();
    r->n = 1;
    r->results.n = 1;
    r->results.uni_gbps[1].n = 1;
    char *t = render_report(r);
    assert_non_null(strstr(t, "Only one GPU: there is no pair to test"));
    assert_null(strstr(t, "P2P capability per ordered pair"));
    free(t);
    free(r);
}

static void test_json(void **state)
{
    gdu_p2p_report *r = two_gpus();
    r->results.uni_gbps[1].cell[0][1].valid = 0;
    json_t *doc = gdu_p2p_report_json(r);
    assert_non_null(doc);
    assert_string_equal(json_string_value(json_object_get(doc, "command")), "p2p");
    assert_string_equal(json_string_value(json_object_get(doc, "command_line")),
                        "gdunlock p2p --size 256M");
    assert_string_equal(json_string_value(json_object_get(doc, "date")), "2026-11-30T01:00:00Z");
    assert_int_equal(json_integer_value(json_object_get(doc, "size_bytes")), 256 << 20);
    json_t *gpus = json_object_get(doc, "gpus");
    assert_int_equal(json_array_size(gpus), 2);
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(gpus, 0), "compute_capability")), "8.9");
    assert_true(json_is_true(json_object_get(json_array_get(gpus, 0), "geforce")));
    assert_int_equal(json_integer_value(json_object_get(json_array_get(gpus, 0), "rm_gpu_id")),
                     0x1b00);
    assert_true(json_is_null(json_object_get(json_array_get(gpus, 1), "rm_gpu_id")));
    json_t *pairs = json_object_get(doc, "pairs");
    assert_int_equal(json_array_size(pairs), 2); /* ordered pairs, no diagonal */
    json_t *p = json_array_get(pairs, 0);
    assert_int_equal(json_integer_value(json_object_get(p, "src")), 0);
    assert_int_equal(json_integer_value(json_object_get(p, "dst")), 1);
    json_t *v = json_object_get(p, "verdict");
    assert_true(json_is_false(json_object_get(v, "p2p")));
    assert_string_equal(json_string_value(json_object_get(v, "cause")), "sku_lock");
    json_t *st = json_object_get(json_object_get(p, "rm"), "status");
    assert_string_equal(json_string_value(json_object_get(st, "read")), "gpu_not_supported");
    assert_string_equal(json_string_value(json_object_get(st, "pci_bar1")), "not_supported");
    json_t *m = json_object_get(doc, "measured");
    json_t *uni = json_object_get(
        json_object_get(json_object_get(m, "bandwidth_gbps"), "unidirectional"), "p2p_enabled");
    json_t *med = json_object_get(uni, "median");
    assert_true(json_is_null(json_array_get(json_array_get(med, 0), 1)));
    assert_float_equal(json_real_value(json_array_get(json_array_get(med, 1), 0)), 21.0, 1e-9);
    assert_float_equal(
        json_real_value(json_array_get(json_array_get(json_object_get(uni, "max"), 1), 1)), 99.0,
        0);
    assert_true(json_is_true(json_object_get(json_object_get(m, "verification"), "ok")));
    /* The document serialises (no NaN or invalid UTF-8 sneaks in). */
    char *text = json_dumps(doc, 0);
    assert_non_null(text);
    free(text);
    json_decref(doc);
    r->measured = 0;
    doc = gdu_p2p_report_json(r);
    assert_true(json_is_null(json_object_get(doc, "measured")));
    json_decref(doc);
    free(r);
}

/* Two GPUs with the SM part measured: 0 -> 1 SM write faulted, the rest ok. */
static gdu_p2p_report *with_sm(void)
{
    gdu_p2p_report *r = two_gpus();
    gdu_p2p_results *res = &r->results;
    res->sm_run = 1;
    res->sm_check_bytes = 1 << 20;
    res->chase_nodes = 1 << 20;
    res->chase_hops = 10000;
    gdu_p2p_matrix *all[] = {&res->sm_write_gbps, &res->sm_read_gbps, &res->sm_latency_us};
    for (size_t k = 0; k < 3; k++) {
        all[k]->n = 2;
        all[k]->cell[0][0] = stat3(1500.0 + (double)k, 1400, 1600);
    }
    res->sm_latency_us.cell[1][0] = stat3(1.2345, 1.2, 1.3);
    for (int k = 0; k < GDU_P2P_ROUTES; k++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++)
                res->route[k][i][j] = GDU_P2P_ROUTE_OK;
    res->route[GDU_P2P_ROUTE_SM_WRITE][0][1] = GDU_P2P_ROUTE_FAULT;
    snprintf(res->route_detail[GDU_P2P_ROUTE_SM_WRITE][0][1], sizeof res->route_detail[0][0][0],
             "cuStreamSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS (700)");
    res->route[GDU_P2P_ROUTE_SM_READ][1][1] = GDU_P2P_ROUTE_NOT_RUN;
    snprintf(res->sm_error, sizeof res->sm_error, "stopped at the fault of SM write 0 -> 1");
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            r->pair[i][j].facts.cuda_can_access = GDU_TRI_YES;
            gdu_p2p_facts_init(&r->pair[i][i].facts);
            for (int k = 0; k < GDU_P2P_ROUTES; k++)
                gdu_p2p_route_reason(&r->pair[i][j].facts, i == j, (gdu_p2p_route)k,
                                     res->route[k][i][j], &r->pair[i][j].route[k]);
        }
    return r;
}

static void test_report_sm(void **state)
{
    gdu_p2p_report *r = with_sm();
    char *t = render_report(r);
    assert_non_null(strstr(t,
                           "\nSM Write Bandwidth Matrix (GB/s, median; copy kernel on the source "
                           "GPU storing into the destination)\n   D\\D         0         1\n"
                           "     0   1500.00         -\n"));
    assert_non_null(strstr(t, "SM Read Bandwidth Matrix (GB/s, median; copy kernel on the "
                              "destination GPU loading from the source)\n"));
    assert_non_null(strstr(t, "column = GPU holding the chain of 1048576 nodes; 10000 loads per "
                              "sample)\n   D\\D         0         1\n     0  1502.000         -\n"
                              "     1     1.234         -\n"));
    assert_non_null(strstr(t, "SM routes 1.00 MiB each"));
    assert_non_null(strstr(t, "pair     copy engine  SM write     SM read\n"
                              "0 -> 0   ok           ok           ok\n"
                              "0 -> 1   ok           fault        ok\n"
                              "1 -> 0   ok           ok           ok\n"
                              "1 -> 1   ok           ok           not_run\n"));
    /* GeForce facts: the fault is the GMMU aperture lock, with the detail. */
    assert_non_null(strstr(t, "  0 -> 1 SM write: [gmmu_aperture] SM stores into the peer's memory "
                              "fault while peer access is enabled"));
    assert_non_null(strstr(t, "(cuStreamSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS (700))\n"
                              "           fix: run 'gdunlock p2p unlock --check'"));
    assert_non_null(strstr(t, "  SM part: stopped at the fault of SM write 0 -> 1\n"));
    assert_null(strstr(t, "1 -> 1 SM read:")); /* not run: no reason line */
    free(t);
    r->results.sm_run = 0;
    t = render_report(r);
    assert_non_null(strstr(t, "SM routes: not measured (--no-sm)"));
    assert_null(strstr(t, "SM Write Bandwidth"));
    free(t);
    free(r);
}

static void test_json_sm(void **state)
{
    gdu_p2p_report *r = with_sm();
    json_t *doc = gdu_p2p_report_json(r);
    json_t *m = json_object_get(doc, "measured");
    json_t *sm = json_object_get(m, "sm");
    assert_int_equal(json_integer_value(json_object_get(sm, "chase_nodes")), 1 << 20);
    assert_int_equal(json_integer_value(json_object_get(sm, "check_bytes")), 1 << 20);
    assert_string_equal(json_string_value(json_object_get(sm, "error")),
                        "stopped at the fault of SM write 0 -> 1");
    json_t *w =
        json_object_get(json_object_get(json_object_get(sm, "bandwidth_gbps"), "write"), "median");
    assert_float_equal(json_real_value(json_array_get(json_array_get(w, 0), 0)), 1500.0, 1e-9);
    assert_true(json_is_null(json_array_get(json_array_get(w, 0), 1)));
    json_t *routes = json_object_get(m, "routes");
    assert_int_equal(json_array_size(routes), 4); /* every ordered pair and the diagonal */
    json_t *p01 = json_array_get(routes, 1);
    assert_int_equal(json_integer_value(json_object_get(p01, "dst")), 1);
    json_t *smw = json_object_get(p01, "sm_write");
    assert_string_equal(json_string_value(json_object_get(smw, "state")), "fault");
    assert_string_equal(json_string_value(json_object_get(smw, "cause")), "gmmu_aperture");
    assert_non_null(strstr(json_string_value(json_object_get(smw, "detail")), "ILLEGAL_ADDRESS"));
    json_t *nr = json_object_get(json_array_get(routes, 3), "sm_read");
    assert_string_equal(json_string_value(json_object_get(nr, "state")), "not_run");
    assert_null(json_object_get(nr, "cause"));
    json_decref(doc);
    r->results.sm_run = 0;
    doc = gdu_p2p_report_json(r);
    assert_true(json_is_null(json_object_get(json_object_get(doc, "measured"), "sm")));
    json_decref(doc);
    free(r);
}

/* Outside text (a GPU name from a capture, errors quoting it, the command
 * line) never drives the terminal, and never voids the JSON document. */
static void test_outside_text_is_escaped(void **state)
{
    gdu_p2p_report *r = two_gpus();
    const char *evil = "RTX\033]0;owned\007\033[31m\xff";
    snprintf(r->gpu[0].name, sizeof r->gpu[0].name, "%s", evil);
    snprintf(r->pair[0][1].verdict.reason, sizeof r->pair[0][1].verdict.reason, "%s", evil);
    snprintf(r->rm_error, sizeof r->rm_error, "%s", evil);
    snprintf(r->bench_error, sizeof r->bench_error, "%s", evil);
    snprintf(r->command_line, sizeof r->command_line, "gdunlock p2p %s", evil);
    char *t = render_report(r);
    assert_null(strchr(t, '\033'));
    assert_null(strchr(t, '\007'));
    assert_non_null(strstr(t, "0    RTX\\x1b]0;owned\\x07\\x1b[31m\\xff"));
    assert_non_null(strstr(t, "RM caps unavailable: RTX\\x1b]"));
    assert_non_null(strstr(t, "Measurement stopped: RTX\\x1b]"));
    assert_non_null(strstr(t, "command: gdunlock p2p RTX\\x1b]"));
    free(t);
    json_t *doc = gdu_p2p_report_json(r);
    assert_non_null(doc);
    const char *name =
        json_string_value(json_object_get(json_array_get(json_object_get(doc, "gpus"), 0), "name"));
    assert_string_equal(name, "RTX\033]0;owned\007\033[31m\xef\xbf\xbd");
    assert_non_null(json_string_value(json_object_get(doc, "rm_caps_error")));
    json_decref(doc);
    free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matrix_layout),
        cmocka_unit_test(test_report_refused_pair),
        cmocka_unit_test(test_report_one_gpu),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_report_sm),
        cmocka_unit_test(test_json_sm),
        cmocka_unit_test(test_outside_text_is_escaped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
