#include "p2p/p2p_terms.h"

gdu_p2p_topo gdu_p2p_topo_of_path(gdu_path_kind k)
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

gdu_p2p_iommu gdu_p2p_iommu_of_mode(gdu_iommu_mode m)
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
