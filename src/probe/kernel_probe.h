/* The running kernel as procfs, sysfs and /boot show it, for cuFile's PCI
 * P2PDMA mode: its release, whether it was built with CONFIG_PCI_P2PDMA (its
 * configuration in /boot, when there), and whether NVMe native multipath is
 * on (P2PDMA does not work with it, NVIDIA's GDS troubleshooting guide);
 * for GPUDirect RDMA's DMA-BUF route, whether it has dma-buf. */
#ifndef GDUNLOCK_PROBE_KERNEL_PROBE_H
#define GDUNLOCK_PROBE_KERNEL_PROBE_H

#include "probe/sysroot.h"
#include "util/tri.h"

typedef struct gdu_kernel {
    char release[64];       /* /proc/sys/kernel/osrelease, "" unknown */
    int major, minor;       /* 0 unknown */
    char config[96];        /* the configuration read, "/boot/config-<release>"; "" none */
    gdu_tri p2pdma;         /* CONFIG_PCI_P2PDMA in it */
    gdu_tri dma_buf;        /* CONFIG_DMA_SHARED_BUFFER in it (the NIC's DMA-BUF route) */
    gdu_tri nvme_multipath; /* /sys/module/nvme_core/parameters/multipath is Y */
} gdu_kernel;

void gdu_kernel_probe(gdu_sysroot *sr, gdu_kernel *out);

#endif
