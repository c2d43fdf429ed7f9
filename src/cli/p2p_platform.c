/* The platform facts behind a pair's P2P verdict, read with doctor's probes:
 * BAR1 sizes, the PCIe path class, ACS on the bridges of that path, and
 * whether the IOMMU translates the GPUs' DMA. */
#include "cli/p2p_report.h"

#include "probe/doctor_pcie.h"
#include "probe/doctor_system.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* NVIDIA's "BAR1" is the GPU's second memory BAR: PCI resource 1 where BAR0
 * is 32-bit (GeForce), resource 2 where BAR0 is 64-bit (the H200 here:
 * 16 MiB, then 256 GiB at resource 2). */
static uint64_t bar1_size(const gdu_pci_dev *d)
{
    int seen = 0;
    for (int k = 0; k < 6; k++)
        if (d->bar_size[k] != 0 && ++seen == 2)
            return d->bar_size[k];
    return 0;
}

static gdu_p2p_topo topo_of(gdu_path_kind k)
{
    switch (k) {
    case GDU_PATH_PIX: return GDU_P2P_TOPO_PIX;
    case GDU_PATH_PXB: return GDU_P2P_TOPO_PXB;
    case GDU_PATH_PHB: return GDU_P2P_TOPO_PHB;
    case GDU_PATH_NODE: return GDU_P2P_TOPO_NODE;
    case GDU_PATH_SYS: return GDU_P2P_TOPO_SYS;
    default: return GDU_P2P_TOPO_UNKNOWN;
    }
}

static gdu_p2p_iommu iommu_of(gdu_sysroot *sr, const gdu_pci_dev *d, gdu_iommu_mode system)
{
    char type[32];
    if (d->iommu_group < 0)
        return system == GDU_IOMMU_NONE ? GDU_P2P_IOMMU_OFF : GDU_P2P_IOMMU_UNKNOWN;
    if (gdu_iommu_group_type(sr, d->iommu_group, type, sizeof type) != 0)
        return GDU_P2P_IOMMU_UNKNOWN;
    if (strcmp(type, "identity") == 0)
        return GDU_P2P_IOMMU_PASSTHROUGH;
    if (strncmp(type, "DMA", 3) == 0)
        return GDU_P2P_IOMMU_TRANSLATED;
    return GDU_P2P_IOMMU_UNKNOWN;
}

void gdu_p2p_collect_platform(gdu_p2p_report *r, const char *sysroot)
{
    gdu_sysroot sr;
    char why[256];
    if (gdu_sysroot_init(&sr, sysroot) != 0)
        return;
    /* Only the PCI part of doctor's system view: no live-driver queries. */
    gdu_system *sys = calloc(1, sizeof *sys);
    if (sys == NULL || gdu_pci_scan(&sr, &sys->pci, why, sizeof why) != 0) {
        free(sys);
        gdu_sysroot_free(&sr);
        return;
    }
    sys->sr = &sr;
    gdu_iommu iommu;
    gdu_iommu_probe(&sr, &iommu);
    const gdu_pci_dev *dev[GDU_P2P_MAX_GPUS] = {0};
    char bdf[GDU_P2P_MAX_GPUS][16];
    for (int i = 0; i < r->n; i++) {
        snprintf(bdf[i], sizeof bdf[i], "%04x:%02x:%02x.0", r->gpu[i].domain & 0xffffu,
                 r->gpu[i].bus & 0xffu, r->gpu[i].device & 0x1fu);
        dev[i] = gdu_pci_find(&sys->pci, bdf[i]);
        if (dev[i] != NULL)
            r->bar1_bytes[i] = bar1_size(dev[i]);
    }
    for (int i = 0; i < r->n; i++)
        for (int j = 0; j < r->n; j++) {
            if (i == j || dev[i] == NULL || dev[j] == NULL)
                continue;
            gdu_p2p_facts *f = &r->pair[i][j].facts;
            gdu_pcie_path path;
            gdu_system_path(sys, bdf[i], bdf[j], &path);
            f->topo = topo_of(path.kind);
            f->acs_redirect = gdu_path_acs_redirect(sys, &path, NULL, 0);
            gdu_p2p_iommu a = iommu_of(&sr, dev[i], iommu.mode);
            gdu_p2p_iommu b = iommu_of(&sr, dev[j], iommu.mode);
            f->iommu = a == GDU_P2P_IOMMU_TRANSLATED || b == GDU_P2P_IOMMU_TRANSLATED
                           ? GDU_P2P_IOMMU_TRANSLATED
                       : a == b ? a
                                : GDU_P2P_IOMMU_UNKNOWN;
        }
    gdu_pci_free(&sys->pci);
    free(sys);
    gdu_sysroot_free(&sr);
}
