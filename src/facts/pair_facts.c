#include "facts/pair_facts.h"

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
static gdu_p2p_iommu iommu_of(const gdu_iommu *io, const gdu_pci_dev *d)
{
    if (d == NULL)
        return GDU_P2P_IOMMU_UNKNOWN;
    if (d->iommu_group < 0)
        return io->mode == GDU_IOMMU_NONE ? GDU_P2P_IOMMU_OFF : GDU_P2P_IOMMU_UNKNOWN;
    return iommu_of_mode(gdu_iommu_group_mode(io, d->iommu_group));
}

void gdu_pair_facts(const gdu_snapshot *s, const gdu_gpu_view *a, const gdu_gpu_view *b,
                    gdu_p2p_facts *f, gdu_pcie_path *path)
{
    gdu_p2p_facts_init(f);
    gdu_pcie_path between;
    gdu_pci_path(&s->pci, a->bdf, b->bdf, &between);
    if (path != NULL)
        *path = between;
    f->bar1_bytes[0] = a->bar1;
    f->bar1_bytes[1] = b->bar1;
    f->topo = topo_of_path(between.kind);
    f->acs_redirect =
        a->pci && b->pci ? gdu_pci_path_acs_redirect(&s->pci, &between, NULL, 0) : GDU_TRI_UNKNOWN;
    gdu_p2p_iommu ia = iommu_of(&s->iommu, a->pci), ib = iommu_of(&s->iommu, b->pci);
    f->iommu = ia == GDU_P2P_IOMMU_TRANSLATED || ib == GDU_P2P_IOMMU_TRANSLATED
                   ? GDU_P2P_IOMMU_TRANSLATED
               : ia == ib ? ia
                          : GDU_P2P_IOMMU_UNKNOWN;

    f->vram_bytes[0] = a->memory;
    f->vram_bytes[1] = b->memory;
    f->geforce = a->geforce == GDU_TRI_YES || b->geforce == GDU_TRI_YES ? GDU_TRI_YES
                 : a->geforce == GDU_TRI_NO && b->geforce == GDU_TRI_NO ? GDU_TRI_NO
                                                                        : GDU_TRI_UNKNOWN;
    int cc_a = a->cuda ? a->cuda->cc_major : 0, cc_b = b->cuda ? b->cuda->cc_major : 0;
    f->cc_major = cc_a == 0 || cc_b == 0 ? 0 : cc_a < cc_b ? cc_a : cc_b;

    const gdu_live_pair *lp = a->cuda && b->cuda
                                  ? gdu_live_pair_find(&s->live, a->cuda->ordinal, b->cuda->ordinal)
                                  : NULL;
    if (lp != NULL) {
        f->cuda_can_access = gdu_tri_of(lp->can_access);
        f->native_atomics = gdu_tri_of(lp->native_atomics);
        f->rm_caps_known = lp->rm_known;
        f->rm = lp->rm;
    }
}
