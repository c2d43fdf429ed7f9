/* PCI devices of the examined machine, read with libpci from
 * <sysroot>/sys/bus/pci (config space, extended capabilities, BAR sizes) and
 * from the sysfs files libpci does not cover (link state, canonical path). */
#ifndef GDUNLOCK_PROBE_PCI_PROBE_H
#define GDUNLOCK_PROBE_PCI_PROBE_H

#include "probe/sysroot.h"
#include "probe/topo_path.h"
#include "util/pci_resource.h"
#include "util/tri.h"

#include <stdbool.h>
#include <stdint.h>

enum { GDU_PCI_VENDOR_NVIDIA = 0x10de };

/* What a config-space read told: known, or unknown because only the first
 * 64/256 bytes were readable (extended config needs root on a live machine). */
typedef enum { GDU_CFG_UNKNOWN = 0, GDU_CFG_ABSENT, GDU_CFG_PRESENT } gdu_cfg_state;

typedef struct gdu_pci_dev {
    char bdf[16];   /* "0000:01:00.0" */
    char path[512]; /* canonical sysfs path, "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0" */
    unsigned vendor, device;
    unsigned class_code; /* base class << 8 | subclass, e.g. 0x0302 */
    int numa_node;       /* -1 when the machine has no NUMA information */
    uint64_t bar_size
        [GDU_PCI_BARS]; /* memory BARs from the resource file; 0 unused or I/O (gdu_pci_bar1) */
    size_t config_len;  /* readable config-space bytes: 64, 256 or 4096 */
    int cur_gen, cur_width, max_gen, max_width; /* 0 when unknown */
    gdu_cfg_state acs;
    uint16_t acs_cap, acs_ctrl;
    gdu_cfg_state rebar;
    uint64_t rebar_max
        [6];         /* per BAR register: the largest size ReBAR offers, bytes (0: not resizable) */
    int iommu_group; /* -1 when none */
    char driver[32]; /* bound kernel driver, "" when none */
} gdu_pci_dev;

typedef struct gdu_pci {
    gdu_pci_dev *devs;
    size_t n;
} gdu_pci;

/* Scans every PCI device. A missing /sys/bus/pci gives an empty list, not an
 * error. Returns 0, or -errno with a reason in why. */
int gdu_pci_scan(gdu_sysroot *sr, gdu_pci *out, char *why, size_t why_len);
void gdu_pci_free(gdu_pci *pci);

const gdu_pci_dev *gdu_pci_find(const gdu_pci *pci, const char *bdf);
bool gdu_pci_is_nvidia_gpu(const gdu_pci_dev *d);
bool gdu_pci_is_nic(const gdu_pci_dev *d);

/* The ACS control bits that force peer-to-peer traffic up to the root complex
 * (Request Redirect, Completion Redirect, Egress Control). */
bool gdu_pci_acs_redirects(const gdu_pci_dev *d);
/* "SrcValid ReqRedir CmpltRedir" style list of the enabled ACS controls. */
const char *gdu_pci_acs_describe(uint16_t ctrl, char *buf, size_t len);

/* The PCIe path between two functions by address (UNKNOWN when either is missing). */
void gdu_pci_path(const gdu_pci *pci, const char *bdf_a, const char *bdf_b, gdu_pcie_path *out);

/* YES when a switch port on a PIX/PXB path redirects P2P requests (the BDFs
 * of those that do, space-separated, in redirecting), UNKNOWN when some
 * bridge's extended config was unreadable, else NO (always NO through a host
 * bridge). */
gdu_tri gdu_pci_path_acs_redirect(const gdu_pci *pci, const gdu_pcie_path *path, char *redirecting,
                                  size_t len);

#endif
