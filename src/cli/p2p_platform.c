/* The platform facts behind a pair's P2P verdict, read with doctor's probes:
 * BAR1 sizes, the PCIe path class, ACS on the bridges of that path, and
 * whether the IOMMU translates the GPUs' DMA. */
#include "cli/p2p_report.h"

#include "doctor/doctor_pcie.h"
#include "doctor/doctor_system.h"
#include "p2p/p2p_terms.h"

#include <stdio.h>
#include <stdlib.h>

/* The IOMMU as one GPU's own group sees it (the system-wide mode only when
 * the GPU has no group). */
static gdu_p2p_iommu iommu_of(gdu_sysroot *sr, const gdu_pci_dev *d, gdu_iommu_mode system)
{
    char type[32];
    if (d->iommu_group < 0)
        return system == GDU_IOMMU_NONE ? GDU_P2P_IOMMU_OFF : GDU_P2P_IOMMU_UNKNOWN;
    if (gdu_iommu_group_type(sr, d->iommu_group, type, sizeof type) != 0)
        return GDU_P2P_IOMMU_UNKNOWN;
    return gdu_p2p_iommu_of_mode(gdu_iommu_type_mode(type));
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
        int index;
        if (dev[i] != NULL)
            r->bar1_bytes[i] = gdu_pci_nvidia_bar1(dev[i], &index);
    }
    for (int i = 0; i < r->n; i++)
        for (int j = 0; j < r->n; j++) {
            if (i == j || dev[i] == NULL || dev[j] == NULL)
                continue;
            gdu_p2p_facts *f = &r->pair[i][j].facts;
            gdu_pcie_path path;
            gdu_pci_path(&sys->pci, bdf[i], bdf[j], &path);
            f->topo = gdu_p2p_topo_of_path(path.kind);
            f->acs_redirect = gdu_pci_path_acs_redirect(&sys->pci, &path, NULL, 0);
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
