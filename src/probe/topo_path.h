/* The PCIe path between two PCI devices, classified as nvidia-smi topo does:
 *   X    the same device
 *   PIX  through at most one PCIe switch (no host bridge)
 *   PXB  through several PCIe switches (no host bridge)
 *   PHB  through a PCIe host bridge (root complex) on one root bus
 *   NODE between root complexes of one NUMA node
 *   SYS  across the interconnect between NUMA nodes
 * computed from canonical sysfs paths (/sys/devices/pci0000:00/<bdf>/<bdf>...). */
#ifndef GDUNLOCK_PROBE_TOPO_PATH_H
#define GDUNLOCK_PROBE_TOPO_PATH_H

#include <stddef.h>

typedef enum {
    GDU_PATH_X = 0,
    GDU_PATH_PIX,
    GDU_PATH_PXB,
    GDU_PATH_PHB,
    GDU_PATH_NODE,
    GDU_PATH_SYS,
    GDU_PATH_UNKNOWN,
} gdu_path_kind;

enum { GDU_PATH_MAX_BRIDGES = 16 };

typedef struct gdu_pcie_path {
    gdu_path_kind kind;
    size_t n_bridges;                       /* bridges traffic passes, nearest to a first */
    char bridges[GDU_PATH_MAX_BRIDGES][16]; /* their BDFs */
} gdu_pcie_path;

/* a/b: canonical sysfs paths; numa_a/numa_b: their NUMA nodes (-1 unknown). */
void gdu_pcie_path_classify(const char *a, int numa_a, const char *b, int numa_b,
                            gdu_pcie_path *out);

const char *gdu_path_kind_name(gdu_path_kind k);

/* The PCI BDF nearest the end of a sysfs path ("0000:00:04.0" for
 * /sys/devices/pci0000:00/0000:00:04.0/virtio1/block/vda). Returns 0 or -ENOENT. */
int gdu_sysfs_path_last_bdf(const char *path, char *bdf, size_t len);

#endif
