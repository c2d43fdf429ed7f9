/* gdu_p2p_reason over the fixtures in tests/fixtures/p2p/reason/: each file
 * holds one pair's facts (as a machine would show them) and the expected
 * cause, path and words of the reason, fix and warning. */
#include "p2p/p2p_reason.h"

#include <dirent.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define FIXTURE_DIR GDUNLOCK_FIXTURES "/p2p/reason"

static gdu_tri tri(json_t *v)
{
    return json_is_true(v) ? GDU_TRI_YES : json_is_false(v) ? GDU_TRI_NO : GDU_TRI_UNKNOWN;
}

/* Inverse of the decoders: the fixture names bits and statuses as the tool prints them. */
static uint32_t caps_bit(const char *name)
{
    for (unsigned bit = 0; bit < 32; bit++) {
        const char *n[1];
        gdu_p2p_caps_bit_names(1u << bit, n, 1);
        if (strcmp(n[0], name) == 0)
            return 1u << bit;
    }
    fail_msg("unknown caps bit %s", name);
    return 0;
}

static uint8_t status_code(const char *id)
{
    for (unsigned s = 0; s < 16; s++)
        if (strcmp(gdu_p2p_caps_status_id((uint8_t)s), id) == 0)
            return (uint8_t)s;
    fail_msg("unknown status %s", id);
    return 0;
}

static gdu_p2p_topo topo(const char *name)
{
    for (int t = GDU_P2P_TOPO_UNKNOWN; t <= GDU_P2P_TOPO_SYS; t++)
        if (strcmp(gdu_p2p_topo_name((gdu_p2p_topo)t), name) == 0)
            return (gdu_p2p_topo)t;
    return GDU_P2P_TOPO_UNKNOWN;
}

static gdu_p2p_iommu iommu(const char *name)
{
    if (name == NULL)
        return GDU_P2P_IOMMU_UNKNOWN;
    if (strcmp(name, "off") == 0)
        return GDU_P2P_IOMMU_OFF;
    if (strcmp(name, "passthrough") == 0)
        return GDU_P2P_IOMMU_PASSTHROUGH;
    if (strcmp(name, "translated") == 0)
        return GDU_P2P_IOMMU_TRANSLATED;
    return GDU_P2P_IOMMU_UNKNOWN;
}

static void load_facts(json_t *j, gdu_p2p_facts *f)
{
    gdu_p2p_facts_init(f);
    f->cuda_can_access = tri(json_object_get(j, "cuda_can_access"));
    f->enable_failed = tri(json_object_get(j, "enable_failed"));
    f->data_corrupt = tri(json_object_get(j, "data_corrupt"));
    f->acs_redirect = tri(json_object_get(j, "acs_redirect"));
    f->geforce = tri(json_object_get(j, "geforce"));
    f->cc_major = (int)json_integer_value(json_object_get(j, "cc_major"));
    f->topo = topo(json_string_value(json_object_get(j, "topo")) ?: "?");
    f->iommu = iommu(json_string_value(json_object_get(j, "iommu")));
    for (size_t k = 0; k < 2; k++) {
        f->bar1_bytes[k] =
            (uint64_t)json_integer_value(json_array_get(json_object_get(j, "bar1_bytes"), k));
        f->vram_bytes[k] =
            (uint64_t)json_integer_value(json_array_get(json_object_get(j, "vram_bytes"), k));
    }
    json_t *rm = json_object_get(j, "rm");
    if (!json_is_object(rm))
        return;
    f->rm_caps_known = 1;
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(rm, "caps"), i, v) f->rm.caps |=
        caps_bit(json_string_value(v));
    for (unsigned k = 0; k < GDU_P2P_CAPS_INDEX_COUNT; k++) {
        const char *s = json_string_value(
            json_object_get(json_object_get(rm, "status"), gdu_p2p_caps_index_name(k)));
        assert_non_null(s);
        f->rm.status[k] = status_code(s);
    }
}

static void expect_has(const char *file, const char *what, const char *text, json_t *want)
{
    const char *w = json_string_value(want);
    if (w == NULL)
        return;
    if (w[0] == '\0') {
        if (text[0] != '\0')
            fail_msg("%s: %s should be empty, is '%s'", file, what, text);
        return;
    }
    if (strstr(text, w) == NULL)
        fail_msg("%s: %s '%s' lacks '%s'", file, what, text, w);
}

static gdu_p2p_route_state route_state(const char *file, const char *id)
{
    for (int s = GDU_P2P_ROUTE_NOT_RUN; s <= GDU_P2P_ROUTE_NO_PEER; s++)
        if (id != NULL && strcmp(gdu_p2p_route_state_id((gdu_p2p_route_state)s), id) == 0)
            return (gdu_p2p_route_state)s;
    fail_msg("%s: unknown route state %s", file, id ? id : "(none)");
    return GDU_P2P_ROUTE_NOT_RUN;
}

/* "routes": {"sm_write": {"state": "fault", "expect": {"cause": ..., ...}}, ...}:
 * each route's own reason from the same facts. */
static void check_routes(const char *file, const gdu_p2p_facts *f, json_t *routes)
{
    for (int r = 0; r < GDU_P2P_ROUTES; r++) {
        json_t *route = json_object_get(routes, gdu_p2p_route_id((gdu_p2p_route)r));
        if (route == NULL)
            continue;
        gdu_p2p_route_state st =
            route_state(file, json_string_value(json_object_get(route, "state")));
        gdu_p2p_verdict v;
        gdu_p2p_route_reason(f, 0, (gdu_p2p_route)r, st, &v);
        json_t *e = json_object_get(route, "expect");
        const char *cause = json_string_value(json_object_get(e, "cause"));
        if (strcmp(gdu_p2p_cause_id(v.cause), cause) != 0)
            fail_msg("%s: route %s: cause %s, expected %s (reason: %s)", file,
                     gdu_p2p_route_id((gdu_p2p_route)r), gdu_p2p_cause_id(v.cause), cause,
                     v.reason);
        expect_has(file, gdu_p2p_route_id((gdu_p2p_route)r), v.reason,
                   json_object_get(e, "reason_has"));
        expect_has(file, "route fix", v.fix, json_object_get(e, "fix_has"));
        if (v.cause != GDU_P2P_CAUSE_NONE && st != GDU_P2P_ROUTE_NOT_RUN)
            assert_true(strlen(v.fix) > 10);
    }
}

static void check_fixture(const char *file)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", FIXTURE_DIR, file);
    json_error_t err;
    json_t *doc = json_load_file(path, 0, &err);
    if (doc == NULL)
        fail_msg("%s: %s", file, err.text);
    gdu_p2p_facts f;
    load_facts(json_object_get(doc, "facts"), &f);
    gdu_p2p_verdict v;
    gdu_p2p_reason(&f, &v);
    json_t *e = json_object_get(doc, "expect");
    const char *cause = json_string_value(json_object_get(e, "cause"));
    const char *link = json_string_value(json_object_get(e, "link"));
    if (strcmp(gdu_p2p_cause_id(v.cause), cause) != 0)
        fail_msg("%s: cause %s, expected %s (reason: %s)", file, gdu_p2p_cause_id(v.cause), cause,
                 v.reason);
    if (strcmp(gdu_p2p_link_id(v.link), link) != 0)
        fail_msg("%s: link %s, expected %s", file, gdu_p2p_link_id(v.link), link);
    expect_has(file, "reason", v.reason, json_object_get(e, "reason_has"));
    expect_has(file, "fix", v.fix, json_object_get(e, "fix_has"));
    expect_has(file, "warning", v.warning, json_object_get(e, "warning_has"));
    /* Every refusal says what to do. */
    if (v.cause != GDU_P2P_CAUSE_NONE)
        assert_true(strlen(v.fix) > 10);
    check_routes(file, &f, json_object_get(doc, "routes"));
    json_decref(doc);
}

static void test_every_fixture(void **state)
{
    DIR *d = opendir(FIXTURE_DIR);
    assert_non_null(d);
    struct dirent *de;
    int count = 0;
    while ((de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        if (len > 5 && strcmp(de->d_name + len - 5, ".json") == 0) {
            check_fixture(de->d_name);
            count++;
        }
    }
    closedir(d);
    assert_true(count >= 14);
}

static void test_nothing_known(void **state)
{
    gdu_p2p_facts f;
    gdu_p2p_verdict v;
    gdu_p2p_facts_init(&f);
    gdu_p2p_reason(&f, &v);
    assert_int_equal(v.cause, GDU_P2P_CAUSE_UNKNOWN);
    assert_int_equal(v.link, GDU_P2P_LINK_NONE);
    assert_non_null(strstr(v.fix, "doctor"));
}

/* Without CUDA's answer the RM's decides. */
static void test_rm_only(void **state)
{
    gdu_p2p_facts f;
    gdu_p2p_verdict v;
    gdu_p2p_facts_init(&f);
    f.rm_caps_known = 1;
    f.rm.caps = GDU_P2P_CAPS_NVLINK | GDU_P2P_CAPS_READS | GDU_P2P_CAPS_WRITES;
    gdu_p2p_reason(&f, &v);
    assert_int_equal(v.cause, GDU_P2P_CAUSE_NONE);
    assert_int_equal(v.link, GDU_P2P_LINK_NVLINK);
}

/* CUDA allows P2P but the RM's caps name no connection: the path is unknown. */
static void test_cuda_yes_rm_silent(void **state)
{
    gdu_p2p_facts f;
    gdu_p2p_verdict v;
    gdu_p2p_facts_init(&f);
    f.cuda_can_access = GDU_TRI_YES;
    f.rm_caps_known = 1;
    memset(f.rm.status, GDU_P2P_CAPS_STATUS_NOT_SUPPORTED, sizeof f.rm.status);
    gdu_p2p_reason(&f, &v);
    assert_int_equal(v.cause, GDU_P2P_CAUSE_NONE);
    assert_int_equal(v.link, GDU_P2P_LINK_UNKNOWN);
}

/* Inside one GPU the P2P facts say nothing: the GPU's health is the question. */
static void test_route_within_gpu(void **state)
{
    gdu_p2p_facts f;
    gdu_p2p_verdict v;
    gdu_p2p_facts_init(&f);
    f.geforce = GDU_TRI_YES;
    gdu_p2p_route_reason(&f, 1, GDU_P2P_ROUTE_SM_WRITE, GDU_P2P_ROUTE_FAULT, &v);
    assert_int_equal(v.cause, GDU_P2P_CAUSE_UNKNOWN);
    assert_non_null(strstr(v.reason, "within one GPU"));
    assert_non_null(strstr(v.fix, "Xid"));
    gdu_p2p_route_reason(&f, 1, GDU_P2P_ROUTE_SM_READ, GDU_P2P_ROUTE_WRONG, &v);
    assert_non_null(strstr(v.reason, "within one GPU completed with wrong data"));
    /* No peer access in this direction though the pair has P2P. */
    f.cuda_can_access = GDU_TRI_YES;
    gdu_p2p_route_reason(&f, 0, GDU_P2P_ROUTE_SM_READ, GDU_P2P_ROUTE_NO_PEER, &v);
    assert_int_equal(v.cause, GDU_P2P_CAUSE_UNKNOWN);
    assert_non_null(strstr(v.reason, "not enabled in this direction"));
    assert_string_equal(gdu_p2p_route_id(GDU_P2P_ROUTE_SM_READ), "sm_read");
    assert_string_equal(gdu_p2p_route_id((gdu_p2p_route)9), "unknown");
    assert_string_equal(gdu_p2p_route_state_id(GDU_P2P_ROUTE_NO_PEER), "no_peer");
    assert_string_equal(gdu_p2p_route_state_id((gdu_p2p_route_state)9), "unknown");
}

static void test_names(void **state)
{
    assert_string_equal(gdu_p2p_cause_id(GDU_P2P_CAUSE_REBAR), "rebar");
    assert_string_equal(gdu_p2p_cause_id((gdu_p2p_cause)999), "unknown");
    assert_string_equal(gdu_p2p_topo_name(GDU_P2P_TOPO_SYS), "SYS");
    assert_string_equal(gdu_p2p_topo_name((gdu_p2p_topo)-3), "?");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_fixture), cmocka_unit_test(test_nothing_known),
        cmocka_unit_test(test_rm_only),       cmocka_unit_test(test_cuda_yes_rm_silent),
        cmocka_unit_test(test_names),         cmocka_unit_test(test_route_within_gpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
