/* The facts a GPU pair's P2P verdict (p2p/p2p_reason.h) rests on, and their
 * one gatherer, for doctor and for gdunlock p2p alike, so that both give the
 * same answer: the platform's facts from a snapshot's PCI tree and IOMMU
 * groups, and each GPU's and the pair's from what CUDA and the RM said.
 * What cannot be read stays unknown. */
#ifndef GDUNLOCK_FACTS_PAIR_FACTS_H
#define GDUNLOCK_FACTS_PAIR_FACTS_H

#include "rm/p2p_caps.h"
#include "facts/snapshot.h"
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

/* The facts of the ordered pair from GPU a to GPU b of a snapshot: the
 * platform's (BAR1 sizes, the PCIe path class, ACS on that path, the IOMMU as
 * each GPU's own group sees it: translated if either translates), each GPU's
 * (memory, the older compute capability, GeForce: yes when either is, no
 * when neither is) and what CUDA and the RM answered for the pair. path (may
 * be NULL) gets the PCIe path between them. */
void gdu_pair_facts(const gdu_snapshot *s, const gdu_gpu_view *a, const gdu_gpu_view *b,
                    gdu_p2p_facts *f, gdu_pcie_path *path);

#endif
