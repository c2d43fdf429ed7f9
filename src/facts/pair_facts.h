/* The facts a GPU pair's P2P verdict (p2p/p2p_reason.h) rests on, and their
 * one gatherer, for doctor and for gdunlock p2p alike, so that both give the
 * same answer: the platform's facts from a snapshot's PCI tree and IOMMU
 * groups, and each GPU's and the pair's from what CUDA and the RM said.
 * What cannot be read stays unknown. */
#ifndef GDUNLOCK_FACTS_PAIR_FACTS_H
#define GDUNLOCK_FACTS_PAIR_FACTS_H

#include "facts/p2p_caps.h"
#include "probe/iommu_probe.h"
#include "probe/pci_probe.h"
#include "probe/topo_path.h"
#include "util/tri.h"

#include <stdint.h>

/* PCIe distance between the two GPUs, as nvidia-smi topo names it. */
typedef enum gdu_p2p_topo {
    GDU_P2P_TOPO_UNKNOWN = 0,
    GDU_P2P_TOPO_PIX,  /* one PCIe switch (a single bridge) */
    GDU_P2P_TOPO_PXB,  /* several PCIe switches, no host bridge */
    GDU_P2P_TOPO_PHB,  /* through one CPU's host bridge */
    GDU_P2P_TOPO_NODE, /* host bridges of one NUMA node */
    GDU_P2P_TOPO_SYS,  /* across CPU sockets (QPI/UPI/Infinity Fabric) */
} gdu_p2p_topo;

typedef enum gdu_p2p_iommu {
    GDU_P2P_IOMMU_UNKNOWN = 0,
    GDU_P2P_IOMMU_OFF,         /* no IOMMU groups */
    GDU_P2P_IOMMU_PASSTHROUGH, /* group type "identity" (iommu=pt) */
    GDU_P2P_IOMMU_TRANSLATED,  /* group type "DMA" / "DMA-FQ" */
} gdu_p2p_iommu;

typedef struct gdu_p2p_facts {
    gdu_tri cuda_can_access; /* cuDeviceCanAccessPeer(src, dst) */
    gdu_tri native_atomics;  /* CUDA's native peer atomics, which it offers over NVLink only */
    int rm_caps_known;       /* rm holds the RM's answer */
    gdu_p2p_rm_caps rm;
    gdu_tri enable_failed; /* cuCtxEnablePeerAccess or the first peer copy failed */
    gdu_tri data_corrupt;  /* peer copies completed but the data came out wrong */
    gdu_p2p_topo topo;
    uint64_t bar1_bytes[2]; /* BAR1 size of src and dst; 0 = unknown */
    uint64_t vram_bytes[2]; /* memory size of src and dst; 0 = unknown */
    gdu_tri acs_redirect;   /* a bridge between them redirects P2P requests upstream */
    gdu_p2p_iommu iommu;
    gdu_tri geforce; /* either GPU is a GeForce / consumer board */
    int cc_major;    /* compute capability of the older GPU; 0 = unknown */
} gdu_p2p_facts;

/* Initialises facts to "nothing known". */
void gdu_p2p_facts_init(gdu_p2p_facts *facts);

/* "PIX", "SYS", ... ; "?" when unknown. */
const char *gdu_p2p_topo_name(gdu_p2p_topo topo);

/* One machine's platform, read once. */
typedef struct gdu_p2p_platform {
    const gdu_pci *pci;
    const gdu_iommu *iommu; /* each GPU's group's mode, and the system's */
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
