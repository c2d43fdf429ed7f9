#include "facts/pair_facts.h"

#include "probe/driver_probe.h"

#include <string.h>

void gdu_p2p_facts_init(gdu_p2p_facts *facts)
{
    memset(facts, 0, sizeof *facts);
    facts->cuda_can_access = GDU_TRI_UNKNOWN;
    facts->native_atomics = GDU_TRI_UNKNOWN;
    facts->enable_failed = GDU_TRI_UNKNOWN;
    facts->data_corrupt = GDU_TRI_UNKNOWN;
    facts->acs_redirect = GDU_TRI_UNKNOWN;
    facts->geforce = GDU_TRI_UNKNOWN;
}

const char *gdu_p2p_topo_name(gdu_p2p_topo topo)
{
    static const char *const names[] = {"?", "PIX", "PXB", "PHB", "NODE", "SYS"};
    return (unsigned)topo < sizeof names / sizeof names[0] ? names[topo] : "?";
}

/* X (one device) counts as the nearest class, PIX. */
static gdu_p2p_topo topo_of_path(gdu_path_kind k)
{
    switch (k) {
    case GDU_PATH_X:
    case GDU_PATH_PIX:
        return GDU_P2P_TOPO_PIX;
    case GDU_PATH_PXB:
        return GDU_P2P_TOPO_PXB;
    case GDU_PATH_PHB:
        return GDU_P2P_TOPO_PHB;
    case GDU_PATH_NODE:
        return GDU_P2P_TOPO_NODE;
    case GDU_PATH_SYS:
        return GDU_P2P_TOPO_SYS;
    default:
        return GDU_P2P_TOPO_UNKNOWN;
    }
}

static gdu_p2p_iommu iommu_of_mode(gdu_iommu_mode m)
{
    switch (m) {
    case GDU_IOMMU_NONE:
        return GDU_P2P_IOMMU_OFF;
    case GDU_IOMMU_PASSTHROUGH:
        return GDU_P2P_IOMMU_PASSTHROUGH;
    case GDU_IOMMU_TRANSLATED:
        return GDU_P2P_IOMMU_TRANSLATED;
    default:
        return GDU_P2P_IOMMU_UNKNOWN;
    }
}

/* The IOMMU as one GPU's own group sees it; for a GPU without a group the
 * system-wide mode only when there is no IOMMU at all, for one missing from
 * the PCI tree nothing. */
static gdu_p2p_iommu iommu_of(const gdu_p2p_platform *pl, const gdu_pci_dev *d)
{
    if (d == NULL)
        return GDU_P2P_IOMMU_UNKNOWN;
    if (d->iommu_group < 0)
        return pl->iommu->mode == GDU_IOMMU_NONE ? GDU_P2P_IOMMU_OFF : GDU_P2P_IOMMU_UNKNOWN;
    return iommu_of_mode(gdu_iommu_group_mode(pl->iommu, d->iommu_group));
}

void gdu_p2p_facts_platform(const gdu_p2p_platform *pl, const char *bdf_a, const char *bdf_b,
                            gdu_p2p_facts *f, gdu_pcie_path *path)
{
    const gdu_pci_dev *a = gdu_pci_find(pl->pci, bdf_a), *b = gdu_pci_find(pl->pci, bdf_b);
    gdu_pcie_path between;
    gdu_pci_path(pl->pci, bdf_a, bdf_b, &between);
    if (path != NULL)
        *path = between;
    int index;
    f->bar1_bytes[0] = a ? gdu_pci_bar1(a->bar_size, &index) : 0;
    f->bar1_bytes[1] = b ? gdu_pci_bar1(b->bar_size, &index) : 0;
    f->topo = topo_of_path(between.kind);
    f->acs_redirect =
        a && b ? gdu_pci_path_acs_redirect(pl->pci, &between, NULL, 0) : GDU_TRI_UNKNOWN;
    gdu_p2p_iommu ia = iommu_of(pl, a), ib = iommu_of(pl, b);
    f->iommu = ia == GDU_P2P_IOMMU_TRANSLATED || ib == GDU_P2P_IOMMU_TRANSLATED
                   ? GDU_P2P_IOMMU_TRANSLATED
               : ia == ib ? ia
                          : GDU_P2P_IOMMU_UNKNOWN;
}

void gdu_p2p_facts_answers(const gdu_p2p_gpu_facts *a, const gdu_p2p_gpu_facts *b,
                           const gdu_p2p_answers *ans, gdu_p2p_facts *f)
{
    f->cuda_can_access = ans->can_access;
    f->native_atomics = ans->native_atomics;
    f->rm_caps_known = ans->rm_known;
    f->rm = ans->rm;
    f->vram_bytes[0] = a->memory;
    f->vram_bytes[1] = b->memory;
    gdu_tri ga = gdu_gpu_name_geforce(a->name), gb = gdu_gpu_name_geforce(b->name);
    f->geforce = ga == GDU_TRI_YES || gb == GDU_TRI_YES ? GDU_TRI_YES
                 : ga == GDU_TRI_NO && gb == GDU_TRI_NO ? GDU_TRI_NO
                                                        : GDU_TRI_UNKNOWN;
    f->cc_major = a->cc_major == 0 || b->cc_major == 0 ? 0
                  : a->cc_major < b->cc_major          ? a->cc_major
                                                       : b->cc_major;
}
