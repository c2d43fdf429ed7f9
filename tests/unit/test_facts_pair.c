/* A GPU pair's facts (facts/pair_facts.h) from the fixture sysroots of
 * tests/fixtures/doctor: the platform's from the captured PCI tree and IOMMU
 * groups, each GPU's and the pair's from the recorded CUDA and RM answers,
 * and the verdict they lead to. */
#include "facts/pair_facts.h"
#include "p2p/p2p_reason.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define SYSROOT(name) GDUNLOCK_FIXTURES "/doctor/" name

typedef struct {
    gdu_sysroot sr;
    gdu_snapshot s;
    gdu_gpu_view gpus[GDU_MAX_GPUS];
    size_t n;
} machine;

static machine *take(const char *root)
{
    machine *m = calloc(1, sizeof *m);
    assert_non_null(m);
    assert_int_equal(gdu_sysroot_init(&m->sr, root), 0);
    gdu_snapshot_take(&m->sr, NULL, 0, &m->s);
    m->n = gdu_snapshot_gpus(&m->s, m->gpus, GDU_MAX_GPUS);
    return m;
}

static void done(machine *m)
{
    gdu_snapshot_free(&m->s);
    gdu_sysroot_free(&m->sr);
    free(m);
}

/* Two RTX 4090 behind one switch, BAR1 32 GiB over 24 GiB, the stock
 * driver's refusal recorded: the SKU lock, and no ReBAR fix. */
static void stock_geforce_pair(void **state)
{
    machine *m = take(SYSROOT("rtx4090x2-stock"));
    assert_int_equal(m->n, 2);
    gdu_p2p_facts f;
    gdu_pcie_path path;
    gdu_pair_facts(&m->s, &m->gpus[0], &m->gpus[1], &f, &path);
    assert_int_equal(f.bar1_bytes[0], 32ull << 30);
    assert_int_equal(f.bar1_bytes[1], 32ull << 30);
    assert_int_equal(f.vram_bytes[1], 24ull << 30);
    assert_int_equal(f.topo, GDU_P2P_TOPO_PIX);
    assert_int_equal(path.kind, GDU_PATH_PIX);
    assert_int_not_equal(f.acs_redirect, GDU_TRI_YES);
    assert_int_equal(f.geforce, GDU_TRI_YES);
    assert_int_equal(f.cc_major, 8);
    assert_true(f.rm_caps_known);
    gdu_p2p_facts back;
    gdu_pair_facts(&m->s, &m->gpus[1], &m->gpus[0], &back, NULL);
    assert_int_equal(back.topo, f.topo);
    gdu_p2p_verdict v;
    gdu_p2p_reason(&f, &v);
    assert_int_equal(v.cause, GDU_P2P_CAUSE_SKU_LOCK);
    assert_null(strstr(v.fix, "Resizable BAR")); /* 32 GiB BAR1 covers 24 GiB */
    /* The GPU CUDA numbers 1 is the view doctor calls GPU1. */
    gdu_gpu_view by_ordinal;
    assert_int_equal(gdu_snapshot_gpu_by_ordinal(&m->s, 1, &by_ordinal), 0);
    assert_string_equal(by_ordinal.bdf, m->gpus[1].bdf);
    assert_int_equal(gdu_snapshot_gpu_by_ordinal(&m->s, 7, &by_ordinal), -ENOENT);
    done(m);
}

/* A GPU the PCI tree lacks: nothing of the platform is known. */
static void gpu_not_in_tree(void **state)
{
    machine *m = take(SYSROOT("rtx4090x2-stock"));
    gdu_gpu_view away = m->gpus[1];
    away.pci = NULL;
    away.bar1 = 0;
    snprintf(away.bdf, sizeof away.bdf, "0000:77:00.0");
    gdu_p2p_facts f;
    gdu_pair_facts(&m->s, &m->gpus[0], &away, &f, NULL);
    assert_int_equal(f.bar1_bytes[1], 0);
    assert_int_equal(f.topo, GDU_P2P_TOPO_UNKNOWN);
    assert_int_equal(f.acs_redirect, GDU_TRI_UNKNOWN);
    assert_int_equal(f.iommu, GDU_P2P_IOMMU_UNKNOWN);
    done(m);
}

/* Each GPU's own IOMMU group decides: one translating group is enough. */
static void iommu_by_group(void **state)
{
    machine *m = take(SYSROOT("rtx3060-iommu-dma"));
    assert_int_equal(m->n, 1);
    gdu_p2p_facts f;
    gdu_pair_facts(&m->s, &m->gpus[0], &m->gpus[0], &f, NULL);
    assert_int_equal(f.iommu, GDU_P2P_IOMMU_TRANSLATED);
    done(m);
    m = take(SYSROOT("rtx4090x2-stock"));
    gdu_pair_facts(&m->s, &m->gpus[0], &m->gpus[1], &f, NULL);
    assert_int_equal(f.iommu, GDU_P2P_IOMMU_OFF);
    done(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(stock_geforce_pair),
        cmocka_unit_test(gpu_not_in_tree),
        cmocka_unit_test(iommu_by_group),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
