/* Decoding of the RM's P2P caps (NV0000 GET_P2P_CAPS_V2) into names: the
 * connection type a pair uses and the per-capability statuses. */
#ifndef GDUNLOCK_RM_P2P_CAPS_H
#define GDUNLOCK_RM_P2P_CAPS_H

#include "driverabi/ctrl0000_p2p.h"

#include <stddef.h>
#include <stdint.h>

/* What the RM answered for one ordered GPU pair. */
typedef struct gdu_p2p_rm_caps {
    uint32_t caps;                            /* GDU_P2P_CAPS_* bits */
    uint8_t status[GDU_P2P_CAPS_INDEX_COUNT]; /* GDU_P2P_CAPS_STATUS_* per capability */
    uint32_t optimal_read_ces, optimal_write_ces;
} gdu_p2p_rm_caps;

/* The path peer copies take between two GPUs. */
typedef enum gdu_p2p_link {
    GDU_P2P_LINK_NONE = 0, /* no P2P: copies are staged through host memory */
    GDU_P2P_LINK_NVLINK,
    GDU_P2P_LINK_NVLINK_INDIRECT, /* through NVSwitch */
    GDU_P2P_LINK_C2C,
    GDU_P2P_LINK_PCIE_BAR1,    /* peer memory reached through its (resized) BAR1 */
    GDU_P2P_LINK_PCIE_MAILBOX, /* the RM's "proprietary" PCIe P2P */
    GDU_P2P_LINK_UNKNOWN,      /* P2P works but the RM did not say over what */
} gdu_p2p_link;

/* The connection type the caps bits name (the RM sets exactly one family). */
gdu_p2p_link gdu_p2p_caps_link(uint32_t caps);

/* "NVLink", "PCIe BAR1", ... for tables; "nvlink", "pcie_bar1", ... for JSON. */
const char *gdu_p2p_link_name(gdu_p2p_link link);
const char *gdu_p2p_link_id(gdu_p2p_link link);

/* Names of the set bits of caps ("writes", "reads", "nvlink", ...), in bit
 * order, into names[0..cap). Returns how many bits are set (may exceed cap);
 * unknown bits are named "bit<N>" from a static table. */
size_t gdu_p2p_caps_bit_names(uint32_t caps, const char **names, size_t cap);

/* "read", "write", "nvlink", "atomics", "prop", "loopback", "pci", "c2c",
 * "pci_bar1" for a GDU_P2P_CAPS_INDEX_*; NULL out of range. */
const char *gdu_p2p_caps_index_name(unsigned index);

/* "ok", "chipset_not_supported", "gpu_not_supported",
 * "ioh_topology_not_supported", "disabled_by_regkey", "not_supported";
 * "unknown" for any other value. */
const char *gdu_p2p_caps_status_id(uint8_t status);

/* A sentence for a status ("the GPU does not allow it (SKU or board lock)"). */
const char *gdu_p2p_caps_status_text(uint8_t status);

/* True when the RM lets the pair read or write each other's memory (over
 * PCIe the RM allows P2P when either direction of access is allowed). */
int gdu_p2p_caps_allowed(const gdu_p2p_rm_caps *caps);

#endif
