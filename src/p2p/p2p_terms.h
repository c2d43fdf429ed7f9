/* The probes' answers (PCIe path class, IOMMU mode) in the p2p layer's
 * terms, for the P2P facts of doctor and of the p2p command alike. */
#ifndef GDUNLOCK_P2P_P2P_TERMS_H
#define GDUNLOCK_P2P_P2P_TERMS_H

#include "p2p/p2p_reason.h"
#include "probe/iommu_probe.h"
#include "probe/topo_path.h"

/* X (one device) counts as the nearest class, PIX. */
gdu_p2p_topo gdu_p2p_topo_of_path(gdu_path_kind k);

gdu_p2p_iommu gdu_p2p_iommu_of_mode(gdu_iommu_mode m);

#endif
