/* doctor and gdunlock p2p give the same P2P verdict. On every fixture
 * sysroot of tests/fixtures/doctor, for each GPU pair doctor can judge, the
 * verdict doctor reaches and the one the p2p command reaches on the same
 * machine (CUDA's and the RM's answers as the fixture recorded them, the
 * platform read from its tree) agree: link, cause, reason, fix, warning. */
#include "p2p/p2p_collect.h"
#include "p2p/p2p_report.h"
#include "doctor/doctor.h"

#include <dirent.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#define FIXTURES GDUNLOCK_FIXTURES "/doctor"

/* The p2p command's report for the machine a fixture recorded, from the
 * same snapshot doctor judged. */
static gdu_p2p_report *p2p_report_of(const gdu_snapshot *sys)
{
    gdu_p2p_report *r = calloc(1, sizeof *r);
    assert_non_null(r);
    int ordinals[GDU_P2P_MAX_GPUS], n = 0;
    for (size_t i = 0; i < sys->live.n_gpus && n < GDU_P2P_MAX_GPUS; i++)
        ordinals[n++] = sys->live.gpus[i].ordinal;
    char why[256];
    assert_int_equal(gdu_p2p_collect_facts(r, sys, ordinals, n, why, sizeof why), 0);
    gdu_p2p_decide(r);
    return r;
}

static int p2p_index(const gdu_p2p_report *r, int ordinal)
{
    for (int i = 0; i < r->n; i++)
        if (r->gpu[i].ordinal == ordinal)
            return i;
    return -1;
}

static void same_verdict(const char *fixture, const gdu_p2p_verdict *doctor,
                         const gdu_p2p_verdict *p2p)
{
    printf("%s: doctor \"%s\" [%s], p2p \"%s\" [%s]\n", fixture, doctor->reason, doctor->warning,
           p2p->reason, p2p->warning);
    assert_int_equal(doctor->link, p2p->link);
    assert_int_equal(doctor->cause, p2p->cause);
    assert_string_equal(doctor->reason, p2p->reason);
    assert_string_equal(doctor->fix, p2p->fix);
    assert_string_equal(doctor->warning, p2p->warning);
}

/* The pairs of one fixture that both commands can judge; returns how many.
 * without_rm: as if the RM had not answered (no P2P caps for any pair). */
static int compare_fixture(const char *name, bool without_rm)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/%s", FIXTURES, name);
    gdu_sysroot sr;
    assert_int_equal(gdu_sysroot_init(&sr, dir), 0);
    gdu_snapshot *sys = malloc(sizeof *sys);
    assert_non_null(sys);
    gdu_snapshot_take(&sr, NULL, 0, sys);
    for (size_t k = 0; without_rm && k < sys->live.n_pairs; k++)
        sys->live.pairs[k].rm_known = false;
    gdu_report report;
    gdu_doctor_diagnose(sys, NULL, &report);
    gdu_p2p_report *r = p2p_report_of(sys);
    int compared = 0;
    for (size_t k = 0; k < report.n_pairs; k++) {
        const gdu_p2p_pair *d = &report.pairs[k];
        int i = p2p_index(r, report.gpus[d->a].cuda_ordinal);
        int j = p2p_index(r, report.gpus[d->b].cuda_ordinal);
        /* Undetermined in doctor: neither CUDA nor the RM answered, and the
         * p2p command asks CUDA itself. */
        if (d->verdict.undetermined || i < 0 || j < 0 || r->pair[i][j].cuda.can_access < 0)
            continue;
        same_verdict(name, &d->verdict, &r->pair[i][j].verdict);
        compared++;
    }
    free(r);
    gdu_report_free(&report);
    gdu_snapshot_free(sys);
    free(sys);
    gdu_sysroot_free(&sr);
    return compared;
}

static void every_fixture(bool without_rm)
{
    DIR *d = opendir(FIXTURES);
    assert_non_null(d);
    int fixtures = 0, pairs = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char path[PATH_MAX];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", FIXTURES, e->d_name);
        if (e->d_name[0] == '.' || stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
            continue;
        pairs += compare_fixture(e->d_name, without_rm);
        fixtures++;
    }
    closedir(d);
    printf("%d pairs compared on %d fixtures\n", pairs, fixtures);
    assert_true(fixtures >= 20);
    assert_true(pairs >= 5);
}

static void test_every_fixture(void **state) { every_fixture(false); }

/* Without the RM's caps both infer the link from CUDA alone, the same way. */
static void test_every_fixture_without_rm(void **state) { every_fixture(true); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_fixture),
        cmocka_unit_test(test_every_fixture_without_rm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
