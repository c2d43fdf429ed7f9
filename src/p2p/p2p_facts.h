/* The one gatherer of the facts a GPU pair's P2P verdict (p2p_reason.h)
 * rests on, for doctor and for gdunlock p2p alike, so that both give the
 * same answer: the platform's facts from the PCI tree read through a
 * sysroot, and each GPU's and the pair's from what CUDA and the RM said.
 * What cannot be read stays unknown. */
#ifndef GDUNLOCK_P2P_P2P_FACTS_H
#define GDUNLOCK_P2P_P2P_FACTS_H

#include "p2p/p2p_reason.h"
#include "probe/iommu_probe.h"
#include "probe/pci_probe.h"
#include "probe/sysroot.h"
#include "probe/topo_path.h"

#include <stdint.h>

/* One machine's platform, read once. */
typedef struct gdu_p2p_platform {
    gdu_sysroot *sr; /* where each GPU's IOMMU group type is read */
    const gdu_pci *pci;
    gdu_iommu_mode iommu; /* system-wide (gdu_iommu_probe): for a GPU without a group */
} gdu_p2p_platform;

/* The platform's facts of the pair from GPU bdf_a to GPU bdf_b: BAR1 sizes,
 * the PCIe path class, ACS on that path, and the IOMMU as each GPU's own
 * group sees it (translated if either translates). path (may be NULL) gets
 * the PCIe path between them. */
void gdu_p2p_facts_platform(const gdu_p2p_platform *pl, const char *bdf_a, const char *bdf_b,
                            gdu_p2p_facts *f, gdu_pcie_path *path);

/* One GPU as CUDA (or the driver) names it. */
typedef struct gdu_p2p_gpu_facts {
    const char *name; /* marketing name; NULL or "" unknown */
    uint64_t memory;  /* bytes; 0 unknown */
    int cc_major;     /* 0 unknown */
} gdu_p2p_gpu_facts;

/* What CUDA and the RM answered for the ordered pair. */
typedef struct gdu_p2p_answers {
    gdu_tri can_access;     /* cuDeviceCanAccessPeer */
    gdu_tri native_atomics; /* CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED */
    int rm_known;           /* rm holds the RM's answer */
    gdu_p2p_rm_caps rm;
} gdu_p2p_answers;

/* The GPUs' and the pair's facts: memory, the older compute capability,
 * GeForce (yes when either is, no when neither is, else unknown), and the
 * answers. */
void gdu_p2p_facts_answers(const gdu_p2p_gpu_facts *a, const gdu_p2p_gpu_facts *b,
                           const gdu_p2p_answers *ans, gdu_p2p_facts *f);

#endif
