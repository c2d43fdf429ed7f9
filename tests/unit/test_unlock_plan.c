/* gdunlock p2p unlock --check's plan on the fixture sysroots: one per plan
 * and per blocking fact (tests/fixtures/unlock, derived by its
 * make-fixtures.py), doctor's GeForce captures and the recorded H200 one;
 * and the version table alone. */
#include "unlockplan/unlock_plan.h"
#include "unlock/unlock_run.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

static gdu_unlock_check *check_of(const char *dir)
{
    char root[512];
    snprintf(root, sizeof root, GDUNLOCK_FIXTURES "/%s", dir);
    assert_int_equal(access(root, R_OK), 0);
    gdu_sysroot sr;
    assert_int_equal(gdu_sysroot_init(&sr, root), 0);
    gdu_snapshot *s = malloc(sizeof *s);
    gdu_unlock_check *c = malloc(sizeof *c);
    assert_non_null(s);
    assert_non_null(c);
    gdu_snapshot_take(&sr, NULL, 0, s);
    gdu_unlock_check_run(s, c);
    gdu_snapshot_free(s);
    free(s);
    gdu_sysroot_free(&sr);
    return c;
}

static bool has_note(const gdu_unlock_notes *n, const char *fact, const char *fix)
{
    for (size_t i = 0; i < n->n; i++)
        if (strstr(n->note[i].fact, fact) && (fix == NULL || strstr(n->note[i].fix, fix)))
            return true;
    return false;
}

static void version_table(void **state)
{
    char why[384];
    assert_true(gdu_driver_version_cmp("580.95.05", "580.159.04") < 0);
    assert_true(gdu_driver_version_cmp("590.44.01", "590.44.01") == 0);
    assert_true(gdu_driver_version_cmp("575.51.02", "570.86.16") > 0);
    assert_int_equal(gdu_chip_family_of(8, 9), GDU_CHIP_ADA);
    assert_int_equal(gdu_chip_family_of(8, 6), GDU_CHIP_AMPERE);
    assert_int_equal(gdu_chip_family_of(7, 5), GDU_CHIP_TURING);
    assert_int_equal(gdu_chip_family_of(7, 0), GDU_CHIP_PRE_TURING);
    assert_int_equal(gdu_chip_family_of(12, 0), GDU_CHIP_BLACKWELL_CONSUMER);
    assert_int_equal(gdu_chip_family_of(9, 0), GDU_CHIP_HOPPER);
    /* Turing, Ampere, Ada: a patched module on every release the edits know */
    assert_int_equal(gdu_unlock_module_plan(GDU_CHIP_AMPERE, "550.54.15", why, sizeof why),
                     GDU_UNLOCK_PATCHED);
    /* the 535 branch decides static BAR1 another way: the edits refuse it */
    assert_int_equal(gdu_unlock_module_plan(GDU_CHIP_AMPERE, "535.261.03", why, sizeof why),
                     GDU_UNLOCK_IMPOSSIBLE);
    assert_non_null(strstr(why, "oldest release the edits know (550.54.15)"));
    assert_int_equal(gdu_unlock_module_plan(GDU_CHIP_ADA, "595.45.04", why, sizeof why),
                     GDU_UNLOCK_PATCHED);
    assert_int_equal(gdu_unlock_module_plan(GDU_CHIP_ADA, "530.41.03", why, sizeof why),
                     GDU_UNLOCK_IMPOSSIBLE);
    /* GB20x: by the upstream thresholds */
    assert_int_equal(gdu_unlock_module_plan(GDU_CHIP_BLACKWELL_CONSUMER, "565.77", why, sizeof why),
                     GDU_UNLOCK_IMPOSSIBLE);
    assert_int_equal(
        gdu_unlock_module_plan(GDU_CHIP_BLACKWELL_CONSUMER, "570.86.16", why, sizeof why),
        GDU_UNLOCK_REGKEYS);
    assert_string_equal(gdu_unlock_registry_dwords("570.86.16"), "RMForceP2PType=2");
    assert_string_equal(gdu_unlock_registry_dwords("575.51.02"),
                        "RMForceP2PType=1;RMPcieP2PType=1");
    assert_int_equal(
        gdu_unlock_module_plan(GDU_CHIP_BLACKWELL_CONSUMER, "575.51.02", why, sizeof why),
        GDU_UNLOCK_REGKEYS);
    assert_int_equal(
        gdu_unlock_module_plan(GDU_CHIP_BLACKWELL_CONSUMER, "580.95.05", why, sizeof why),
        GDU_UNLOCK_REGKEYS);
    assert_int_equal(
        gdu_unlock_module_plan(GDU_CHIP_BLACKWELL_CONSUMER, "590.44.01", why, sizeof why),
        GDU_UNLOCK_NOTHING);
    /* unknown version: no plan guessed */
    assert_int_equal(gdu_unlock_module_plan(GDU_CHIP_ADA, "", why, sizeof why), GDU_UNLOCK_UNKNOWN);
    assert_int_equal(gdu_unlock_module_plan(GDU_CHIP_ADA, "abc", why, sizeof why),
                     GDU_UNLOCK_UNKNOWN);
}

/* The accelerator machine (recorded): datacenter GPUs over NVLink. */
static void h200_nothing(void **state)
{
    gdu_unlock_check *c = check_of("doctor/h200-vm");
    assert_int_equal(c->plan, GDU_UNLOCK_NOTHING);
    assert_int_equal(c->n_gpus, 2);
    assert_int_equal(c->gpus[0].family, GDU_CHIP_HOPPER);
    assert_int_equal(c->gpus[0].geforce, GDU_TRI_NO);
    assert_non_null(strstr(c->gpus[0].why, "not a GeForce"));
    assert_int_equal(c->pairs[0].works, GDU_TRI_YES);
    assert_non_null(strstr(c->why, "over NVLink"));
    assert_int_equal(c->blockers.n, 0);
    assert_int_equal(c->missing.n, 0); /* nothing to build: no toolchain asked for */
    assert_string_equal(c->next, "");
    free(c);
    /* without the RM's caps, CUDA's native peer atomics still say NVLink */
    c = check_of("unlock/h200-vm-no-rm-caps");
    assert_int_equal(c->plan, GDU_UNLOCK_NOTHING);
    assert_non_null(strstr(c->why, "over NVLink (inferred"));
    free(c);
}

static void ada_patched(void **state)
{
    gdu_unlock_check *c = check_of("unlock/rtx4090x2-patched-module");
    assert_int_equal(c->plan, GDU_UNLOCK_PATCHED);
    assert_int_equal(c->gpus[0].family, GDU_CHIP_ADA);
    assert_int_equal(c->pairs[0].plan, GDU_UNLOCK_PATCHED);
    assert_int_equal(c->blockers.n, 0);
    assert_int_equal(c->missing.n, 0);
    assert_int_equal(c->env.secure_boot, GDU_TRI_NO);
    assert_string_equal(c->env.headers, "/usr/src/linux-headers-6.8.0-45-generic");
    assert_non_null(strstr(c->next, "--build --out DIR"));
    assert_string_equal(c->registry_dwords, "");
    free(c);
    /* doctor's stock capture: the same plan, its toolchain unknown */
    c = check_of("doctor/rtx4090x2-stock");
    assert_int_equal(c->plan, GDU_UNLOCK_PATCHED);
    assert_true(has_note(&c->missing, "kernel headers: unknown", "linux-headers"));
    free(c);
}

static void gb20x_registry_keys_and_nothing(void **state)
{
    gdu_unlock_check *c = check_of("unlock/rtx5090x2-registry-keys");
    assert_int_equal(c->plan, GDU_UNLOCK_REGKEYS);
    assert_int_equal(c->gpus[0].family, GDU_CHIP_BLACKWELL_CONSUMER);
    assert_string_equal(c->registry_dwords, "RMForceP2PType=1;RMPcieP2PType=1");
    assert_string_equal(c->next, "sudo gdunlock p2p unlock --install");
    free(c);
    c = check_of("unlock/rtx5090x2-nothing");
    assert_int_equal(c->plan, GDU_UNLOCK_NOTHING);
    assert_non_null(strstr(c->why, "PCIe BAR1"));
    free(c);
    c = check_of("doctor/rtx4090x2-patched"); /* P2P works: nothing more to do */
    assert_int_equal(c->plan, GDU_UNLOCK_NOTHING);
    free(c);
}

/* Each blocking fact makes the plan impossible and names its fix. */
static void impossible_with_fix(void **state)
{
    static const struct {
        const char *fixture, *fact, *fix;
    } cases[] = {
        {"unlock/rtx4090x2-proprietary", "proprietary", "open kernel module"},
        {"doctor/proprietary-535", "proprietary", "open kernel module"},
        {"unlock/rtx4090x2-old-driver", "older than the oldest release", "from 550.54.15 on"},
        {"unlock/rtx4090x2-small-bar1", "BAR1 is 256.00 MiB but video memory is 24.00 GiB",
         "Resizable BAR in the BIOS"},
        {"doctor/rtx3060-no-rebar", "BAR1 is 256.00 MiB", "Resizable BAR in the BIOS"},
        {"unlock/rtx4090x2-display", "drives a display (card0-DP-1 connected)",
         "another GPU or the integrated graphics"},
        {"unlock/rtx4090x2-acs-redirect", "ACS on 0000:02:00.0 0000:02:01.0 redirects",
         "disable ACS"},
        {"unlock/rtx4090x2-iommu-dma", "IOMMU translates", "iommu=pt"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gdu_unlock_check *c = check_of(cases[i].fixture);
        if (c->plan != GDU_UNLOCK_IMPOSSIBLE ||
            !has_note(&c->blockers, cases[i].fact, cases[i].fix))
            fail_msg("%s: plan %s, first blocker '%s'", cases[i].fixture,
                     gdu_unlock_plan_id(c->plan), c->blockers.n ? c->blockers.note[0].fact : "");
        free(c);
    }
}

/* What --build / --install need and the machine lacks. */
static void missing_prerequisites(void **state)
{
    gdu_unlock_check *c = check_of("unlock/rtx4090x2-no-toolchain");
    assert_int_equal(c->plan, GDU_UNLOCK_PATCHED);
    assert_true(has_note(&c->missing, "kernel headers: none", "linux-headers-$(uname -r)"));
    assert_true(has_note(&c->missing, "DKMS: not found", "install dkms"));
    assert_true(has_note(&c->missing, "no cc/gcc, no make", "build-essential"));
    free(c);
    c = check_of("unlock/rtx4090x2-secure-boot-no-key");
    assert_int_equal(c->env.secure_boot, GDU_TRI_YES);
    assert_true(
        has_note(&c->missing, "Secure Boot is on and DKMS has no signing key", "mokutil --import"));
    free(c);
    c = check_of("unlock/rtx4090x2-secure-boot-key");
    assert_int_equal(c->env.signing_key, GDU_TRI_YES);
    assert_int_equal(c->missing.n, 0);
    free(c);
}

static void newer_driver_says_so(void **state)
{
    gdu_unlock_check *c = check_of("unlock/rtx4090x2-newer-driver");
    assert_int_equal(c->plan, GDU_UNLOCK_PATCHED);
    assert_non_null(strstr(c->why, "newer than those the edits were checked on"));
    free(c);
}

static void pair_advice(void **state)
{
    char advice[512];
    gdu_unlock_check *c = check_of("unlock/rtx4090x2-patched-module");
    assert_true(gdu_unlock_pair_advice(c, "0000:04:00.0", "0000:03:00.0", advice, sizeof advice));
    assert_non_null(strstr(advice, "plan 'patched module'"));
    assert_non_null(strstr(advice, "gdunlock p2p unlock --build --out DIR"));
    free(c);
    c = check_of("unlock/rtx4090x2-iommu-dma");
    assert_true(gdu_unlock_pair_advice(c, "0000:03:00.0", "0000:04:00.0", advice, sizeof advice));
    assert_non_null(strstr(advice, "plan 'impossible here'"));
    assert_non_null(strstr(advice, "iommu=pt"));
    free(c);
    c = check_of("doctor/h200-vm");
    assert_false(gdu_unlock_pair_advice(c, "0000:00:06.0", "0000:00:07.0", advice, sizeof advice));
    free(c);
}

/* The edits' manifest (src/unlock/edits/manifest.tsv, the build side's)
 * and this plan agree: the same oldest release; edits only for the
 * families the plan patches; on every NVIDIA release from the oldest on,
 * some edit is needed for those families (the plan says "patched module"),
 * none for GB20x (registry keys or nothing). Skipped where the build side
 * is not in the tree. */
#define EDITS GDUNLOCK_FIXTURES "/../../src/unlock/edits/"

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return NULL;
    char *text = calloc(1, 1 << 20);
    assert_non_null(text);
    size_t n = fread(text, 1, (1 << 20) - 1, f);
    text[n] = '\0';
    fclose(f);
    return text;
}

/* The tab-separated field k (0-based) of line, into out. */
static void field(const char *line, int k, char *out, size_t len)
{
    for (int i = 0; i < k && line != NULL; i++) {
        line = strchr(line, '\t');
        line = line ? line + 1 : NULL;
    }
    size_t n = line ? strcspn(line, "\t\n") : 0;
    snprintf(out, len, "%.*s", (int)n, line ? line : "");
}

static bool in_range(const char *v, const char *from, const char *before)
{
    return (strcmp(from, "-") == 0 || gdu_driver_version_cmp(v, from) >= 0) &&
           (strcmp(before, "-") == 0 || gdu_driver_version_cmp(v, before) < 0);
}

static void agrees_with_manifest(void **state)
{
    char *manifest = read_text(EDITS "manifest.tsv"),
         *releases = read_text(EDITS "nvidia-releases.tsv");
    if (manifest == NULL || releases == NULL) {
        free(manifest);
        free(releases);
        skip();
    }
    char oldest[32] = "";
    for (char *line = manifest; *line;
         line += strcspn(line, "\n") + (line[strcspn(line, "\n")] != 0)) {
        if (strncmp(line, "@oldest\t", 8) == 0)
            field(line, 1, oldest, sizeof oldest);
        if (line[0] == '#' || line[0] == '@' || line[0] == '\n')
            continue;
        char chips[64];
        field(line, 6, chips, sizeof chips);
        if (strcmp(chips, "turing,ampere,ada") != 0)
            fail_msg("an edit for chips '%s': the plan patches Turing, Ampere and Ada only", chips);
    }
    assert_string_equal(oldest, GDU_UNLOCK_OLDEST_VERSION);
    size_t checked = 0;
    for (char *line = releases; *line;
         line += strcspn(line, "\n") + (line[strcspn(line, "\n")] != 0)) {
        char v[32], why[384];
        field(line, 0, v, sizeof v);
        if (line[0] == '#' || gdu_driver_version_cmp(v, oldest) < 0)
            continue;
        bool needed = false;
        for (char *e = manifest; *e; e += strcspn(e, "\n") + (e[strcspn(e, "\n")] != 0)) {
            char from[32], before[32];
            if (e[0] == '#' || e[0] == '@')
                continue;
            field(e, 4, from, sizeof from);
            field(e, 5, before, sizeof before);
            needed |= in_range(v, from, before);
        }
        gdu_unlock_plan ada = gdu_unlock_module_plan(GDU_CHIP_ADA, v, why, sizeof why);
        if (needed != (ada == GDU_UNLOCK_PATCHED))
            fail_msg("%s: the manifest %s edits, the plan for Ada is %s", v,
                     needed ? "has" : "has no", gdu_unlock_plan_id(ada));
        assert_int_not_equal(
            gdu_unlock_module_plan(GDU_CHIP_BLACKWELL_CONSUMER, v, why, sizeof why),
            GDU_UNLOCK_PATCHED);
        checked++;
    }
    assert_true(checked > 0);
    free(manifest);
    free(releases);
}

/* The report bundle's --status from the snapshot it already took. */
static void status_for_the_bundle(void **state)
{
    const char *root = GDUNLOCK_FIXTURES "/doctor/h200-vm";
    gdu_sysroot sr;
    assert_int_equal(gdu_sysroot_init(&sr, root), 0);
    gdu_snapshot *s = malloc(sizeof *s);
    assert_non_null(s);
    gdu_snapshot_take(&sr, NULL, 0, s);
    json_t *doc = gdu_unlock_status_report_json_of(s, root);
    assert_non_null(doc);
    json_t *status = json_object_get(doc, "status"), *matrix = json_object_get(doc, "matrix");
    assert_true(json_is_true(json_object_get(status, "loaded")));
    assert_string_equal(json_string_value(json_object_get(status, "version")), "580.159.04");
    assert_true(json_is_false(json_object_get(status, "patched")));
    json_t *verdict =
        json_object_get(json_array_get(json_object_get(matrix, "pairs"), 0), "verdict");
    assert_string_equal(json_string_value(json_object_get(verdict, "class")), "NVLink");
    assert_true(json_is_null(json_object_get(doc, "matrix_error")));
    json_decref(doc);
    gdu_snapshot_free(s);
    free(s);
    gdu_sysroot_free(&sr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(version_table),        cmocka_unit_test(h200_nothing),
        cmocka_unit_test(ada_patched),          cmocka_unit_test(gb20x_registry_keys_and_nothing),
        cmocka_unit_test(impossible_with_fix),  cmocka_unit_test(missing_prerequisites),
        cmocka_unit_test(newer_driver_says_so), cmocka_unit_test(pair_advice),
        cmocka_unit_test(agrees_with_manifest), cmocka_unit_test(status_for_the_bundle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
