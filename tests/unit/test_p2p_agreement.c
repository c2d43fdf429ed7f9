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

/* The p2p command's report for the machine a fixture recorded: what
 * gdu_p2p_collect_cuda and gdu_p2p_collect_rm would have asked, from the
 * fixture's live answers; the platform and the verdicts as the command
 * gathers and decides them. */
static gdu_p2p_report *p2p_report_of(const gdu_live *live, const char *sysroot)
{
    gdu_p2p_report *r = calloc(1, sizeof *r);
    assert_non_null(r);
    r->n = (int)(live->n_gpus < GDU_P2P_MAX_GPUS ? live->n_gpus : GDU_P2P_MAX_GPUS);
    for (int i = 0; i < r->n; i++) {
        const gdu_live_gpu *g = &live->gpus[i];
        gdu_p2p_gpu *p = &r->gpu[i];
        p->ordinal = g->ordinal;
        assert_true(snprintf(p->name, sizeof p->name, "%s", g->name) < (int)sizeof p->name);
        snprintf(p->pci_bus_id, sizeof p->pci_bus_id, "%s", g->bdf);
        assert_int_equal(sscanf(g->bdf, "%x:%x:%x", &p->domain, &p->bus, &p->device), 3);
        p->memory_bytes = g->total_mem;
        p->cc_major = g->cc_major;
        p->cc_minor = g->cc_minor;
    }
    for (int i = 0; i < r->n; i++)
        for (int j = 0; j < r->n; j++) {
            gdu_p2p_pair_report *p = &r->pair[i][j];
            gdu_p2p_facts_init(&p->facts);
            const gdu_live_pair *lp =
                gdu_live_pair_find(live, r->gpu[i].ordinal, r->gpu[j].ordinal);
            if (i == j || lp == NULL)
                continue;
            p->cuda.can_access = lp->can_access;
            p->cuda.native_atomics = lp->native_atomics;
            p->rm_known = lp->rm_known;
            p->rm = lp->rm;
        }
    gdu_p2p_collect_platform(r, sysroot);
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
    gdu_p2p_report *r = p2p_report_of(&sys->live, dir);
    int compared = 0;
    for (size_t k = 0; k < report.n_pairs; k++) {
        const gdu_p2p_pair *d = &report.pairs[k];
        int i = p2p_index(r, report.gpus[d->a].cuda_ordinal);
        int j = p2p_index(r, report.gpus[d->b].cuda_ordinal);
        /* Undetermined in doctor: neither CUDA nor the RM answered, and the
         * p2p command asks CUDA itself. */
        if (d->undetermined || i < 0 || j < 0 || r->pair[i][j].cuda.can_access < 0)
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
