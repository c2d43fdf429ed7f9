/* The platform facts behind each pair's P2P verdict, through the p2p
 * layer's gatherer over the PCI tree and the IOMMU read through sysroot. */
#include "p2p/p2p_report.h"

#include "facts/pair_facts.h"
#include "util/pci_addr.h"

#include <stdio.h>

void gdu_p2p_collect_platform(gdu_p2p_report *r, const char *sysroot)
{
    gdu_sysroot sr;
    gdu_pci pci;
    char why[256];
    if (gdu_sysroot_init(&sr, sysroot) != 0)
        return;
    /* Only the PCI tree and the IOMMU: no live-driver queries. */
    if (gdu_pci_scan(&sr, &pci, why, sizeof why) != 0) {
        gdu_sysroot_free(&sr);
        return;
    }
    gdu_iommu iommu;
    gdu_iommu_probe(&sr, &iommu);
    const gdu_p2p_platform platform = {&pci, &iommu};
    char bdf[GDU_P2P_MAX_GPUS][16];
    for (int i = 0; i < r->n; i++) {
        gdu_pci_addr_format(bdf[i], sizeof bdf[i], r->gpu[i].domain, r->gpu[i].bus,
                            r->gpu[i].device, 0);
        const gdu_pci_dev *dev = gdu_pci_find(&pci, bdf[i]);
        int index;
        if (dev != NULL)
            r->bar1_bytes[i] = gdu_pci_bar1(dev->bar_size, &index);
    }
    for (int i = 0; i < r->n; i++)
        for (int j = 0; j < r->n; j++)
            if (i != j)
                gdu_p2p_facts_platform(&platform, bdf[i], bdf[j], &r->pair[i][j].facts, NULL);
    gdu_pci_free(&pci);
    gdu_iommu_free(&iommu);
    gdu_sysroot_free(&sr);
}
