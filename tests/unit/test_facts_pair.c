/* The p2p command's platform facts read through doctor's probes from its
 * fixture sysroots, and the verdicts they lead to together with the RM's
 * and CUDA's answers recorded in those fixtures. */
#include "p2p/p2p_collect.h"
#include "p2p/p2p_report.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define SYSROOT(name) GDUNLOCK_FIXTURES "/doctor/" name

/* Two RTX 4090 at 0000:03:00.0 and 0000:04:00.0, as in doctor's fixtures. */
static gdu_p2p_report *rtx4090_pair(void)
{
    gdu_p2p_report *r = calloc(1, sizeof *r);
    r->n = 2;
    for (int i = 0; i < 2; i++) {
        r->gpu[i] = (gdu_p2p_gpu){.ordinal = i,
                                  .bus = 3u + (unsigned)i,
                                  .memory_bytes = 24ull << 30,
                                  .cc_major = 8,
                                  .cc_minor = 9};
        snprintf(r->gpu[i].name, sizeof r->gpu[i].name, "NVIDIA GeForce RTX 4090");
        for (int j = 0; j < 2; j++)
            gdu_p2p_facts_init(&r->pair[i][j].facts);
    }
    return r;
}

static void test_facts_from_sysroot(void **state)
{
    gdu_p2p_report *r = rtx4090_pair();
    gdu_p2p_collect_platform(r, SYSROOT("rtx4090x2-stock"));
    assert_int_equal(r->bar1_bytes[0], 32ull << 30);
    assert_int_equal(r->bar1_bytes[1], 32ull << 30);
    const gdu_p2p_facts *f = &r->pair[0][1].facts;
    assert_true(f->topo == GDU_P2P_TOPO_PIX || f->topo == GDU_P2P_TOPO_PXB);
    assert_int_equal(r->pair[1][0].facts.topo, f->topo);
    assert_int_not_equal(f->acs_redirect, GDU_TRI_YES);
    free(r);
}

static void test_stock_driver_verdict(void **state)
{
    gdu_p2p_report *r = rtx4090_pair();
    gdu_p2p_collect_platform(r, SYSROOT("rtx4090x2-stock"));
    /* What the stock driver answers for a GeForce pair (doctor's fixture). */
    for (int i = 0; i < 2; i++) {
        gdu_p2p_pair_report *p = &r->pair[i][1 - i];
        p->rm_known = 1;
        memset(p->rm.status, GDU_P2P_CAPS_STATUS_NOT_SUPPORTED, sizeof p->rm.status);
        p->rm.status[GDU_P2P_CAPS_INDEX_READ] = GDU_P2P_CAPS_STATUS_GPU_NOT_SUPPORTED;
        p->rm.status[GDU_P2P_CAPS_INDEX_WRITE] = GDU_P2P_CAPS_STATUS_GPU_NOT_SUPPORTED;
    }
    gdu_p2p_decide(r);
    const gdu_p2p_verdict *v = &r->pair[0][1].verdict;
    assert_int_equal(v->cause, GDU_P2P_CAUSE_SKU_LOCK);
    assert_int_equal(r->pair[0][1].facts.geforce, GDU_TRI_YES);
    assert_int_equal(r->pair[0][1].facts.vram_bytes[1], 24ull << 30);
    assert_null(strstr(v->fix, "Resizable BAR")); /* 32 GiB BAR1 covers 24 GiB */
    free(r);
}

static void test_gpu_not_in_tree(void **state)
{
    gdu_p2p_report *r = rtx4090_pair();
    r->gpu[1].bus = 0x77;
    gdu_p2p_collect_platform(r, SYSROOT("rtx4090x2-stock"));
    assert_int_equal(r->bar1_bytes[1], 0);
    assert_int_equal(r->pair[0][1].facts.topo, GDU_P2P_TOPO_UNKNOWN);
    assert_int_equal(r->pair[0][1].facts.acs_redirect, GDU_TRI_UNKNOWN);
    free(r);
}

static void test_missing_sysroot(void **state)
{
    gdu_p2p_report *r = rtx4090_pair();
    gdu_p2p_collect_platform(r, "/nonexistent/sysroot");
    assert_int_equal(r->bar1_bytes[0], 0);
    assert_int_equal(r->pair[0][1].facts.iommu, GDU_P2P_IOMMU_UNKNOWN);
    free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_facts_from_sysroot),
        cmocka_unit_test(test_stock_driver_verdict),
        cmocka_unit_test(test_gpu_not_in_tree),
        cmocka_unit_test(test_missing_sysroot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
