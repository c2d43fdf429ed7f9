/* NV01_ROOT (client) control NV0000_CTRL_CMD_SYSTEM_GET_P2P_CAPS_V2: the RM's
 * peer-to-peer capabilities of a set of GPUs (we always ask about one ordered
 * pair). Numbers and layout from ctrl0000system.h of open-gpu-kernel-modules
 * 580.142; the control is non-privileged and served by the kernel RM. */
#ifndef GDUNLOCK_DRIVERABI_CTRL0000_P2P_H
#define GDUNLOCK_DRIVERABI_CTRL0000_P2P_H

#include <stddef.h>
#include <stdint.h>

#define GDU_NV0000_CTRL_CMD_SYSTEM_GET_P2P_CAPS_V2 0x12bu
#define GDU_NV0000_MAX_ATTACHED_GPUS 32u
#define GDU_NV0000_P2P_INVALID_PEER 0xffffffffu

/* Indices into p2pCapsStatus[]: one status per capability. READ and WRITE carry
 * the cause when P2P is refused; the others are OK or NOT_SUPPORTED. */
enum {
    GDU_P2P_CAPS_INDEX_READ = 0,
    GDU_P2P_CAPS_INDEX_WRITE = 1,
    GDU_P2P_CAPS_INDEX_NVLINK = 2,
    GDU_P2P_CAPS_INDEX_ATOMICS = 3,
    GDU_P2P_CAPS_INDEX_PROP = 4, /* PCIe "proprietary" = mailbox P2P */
    GDU_P2P_CAPS_INDEX_LOOPBACK = 5,
    GDU_P2P_CAPS_INDEX_PCI = 6,
    GDU_P2P_CAPS_INDEX_C2C = 7,
    GDU_P2P_CAPS_INDEX_PCI_BAR1 = 8,
    GDU_P2P_CAPS_INDEX_COUNT = 9,
};

/* Single-bit fields of p2pCaps. */
enum {
    GDU_P2P_CAPS_WRITES = 1u << 0,
    GDU_P2P_CAPS_READS = 1u << 1,
    GDU_P2P_CAPS_PROP = 1u << 2,
    GDU_P2P_CAPS_NVLINK = 1u << 3,
    GDU_P2P_CAPS_ATOMICS = 1u << 4,
    GDU_P2P_CAPS_LOOPBACK = 1u << 5,
    GDU_P2P_CAPS_PCI = 1u << 6,
    GDU_P2P_CAPS_INDIRECT_WRITES = 1u << 7,
    GDU_P2P_CAPS_INDIRECT_READS = 1u << 8,
    GDU_P2P_CAPS_INDIRECT_ATOMICS = 1u << 9,
    GDU_P2P_CAPS_INDIRECT_NVLINK = 1u << 10,
    /* bit 11 is unused in 580 */
    GDU_P2P_CAPS_C2C = 1u << 12,
    GDU_P2P_CAPS_PCI_BAR1 = 1u << 13,
};

/* Per-capability status codes (NV0000_P2P_CAPS_STATUS_*). */
enum {
    GDU_P2P_CAPS_STATUS_OK = 0x00,
    GDU_P2P_CAPS_STATUS_CHIPSET_NOT_SUPPORTED = 0x01,
    GDU_P2P_CAPS_STATUS_GPU_NOT_SUPPORTED = 0x02,
    GDU_P2P_CAPS_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED = 0x03,
    GDU_P2P_CAPS_STATUS_DISABLED_BY_REGKEY = 0x04,
    GDU_P2P_CAPS_STATUS_NOT_SUPPORTED = 0x05,
};

typedef struct gdu_nv0000_p2p_caps_v2_params {
    uint32_t gpuIds[GDU_NV0000_MAX_ATTACHED_GPUS];   /* in: first gpuCount entries */
    uint32_t gpuCount;                               /* in */
    uint32_t p2pCaps;                                /* out: GDU_P2P_CAPS_* bits */
    uint32_t p2pOptimalReadCEs;                      /* out: CE mask (NVLink) */
    uint32_t p2pOptimalWriteCEs;                     /* out: CE mask (NVLink) */
    uint8_t p2pCapsStatus[GDU_P2P_CAPS_INDEX_COUNT]; /* out: GDU_P2P_CAPS_STATUS_* */
    uint32_t busPeerIds[GDU_NV0000_MAX_ATTACHED_GPUS * GDU_NV0000_MAX_ATTACHED_GPUS];
    uint32_t busEgmPeerIds[GDU_NV0000_MAX_ATTACHED_GPUS * GDU_NV0000_MAX_ATTACHED_GPUS];
} gdu_nv0000_p2p_caps_v2_params;

_Static_assert(offsetof(gdu_nv0000_p2p_caps_v2_params, gpuCount) == 128, "gpuCount offset");
_Static_assert(offsetof(gdu_nv0000_p2p_caps_v2_params, p2pCaps) == 132, "p2pCaps offset");
_Static_assert(offsetof(gdu_nv0000_p2p_caps_v2_params, p2pOptimalReadCEs) == 136, "readCEs offset");
_Static_assert(offsetof(gdu_nv0000_p2p_caps_v2_params, p2pOptimalWriteCEs) == 140,
               "writeCEs offset");
_Static_assert(offsetof(gdu_nv0000_p2p_caps_v2_params, p2pCapsStatus) == 144, "status offset");
_Static_assert(offsetof(gdu_nv0000_p2p_caps_v2_params, busPeerIds) == 156, "busPeerIds offset");
_Static_assert(offsetof(gdu_nv0000_p2p_caps_v2_params, busEgmPeerIds) == 4252,
               "busEgmPeerIds offset");
_Static_assert(sizeof(gdu_nv0000_p2p_caps_v2_params) == 8348, "GET_P2P_CAPS_V2 params size");

#endif
