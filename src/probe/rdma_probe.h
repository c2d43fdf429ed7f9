/* The RDMA side of GPUDirect RDMA as sysfs shows it: the RDMA devices
 * (/sys/class/infiniband) with their PCI function and first port, and the
 * peer-memory client NCCL looks for (the three files ncclIbGdrSupport tests,
 * transport/net_ib.cc:872-874 of NCCL 2.28.9; docs/rdma-model.md). */
#ifndef GDUNLOCK_PROBE_RDMA_PROBE_H
#define GDUNLOCK_PROBE_RDMA_PROBE_H

#include "probe/sysroot.h"

#include <stdbool.h>
#include <stddef.h>

enum { GDU_RDMA_MAX_DEVS = 16 };

typedef struct gdu_rdma_dev {
    char name[32];       /* "mlx5_0" */
    char bdf[16];        /* its PCI function, "" unknown */
    char link_layer[16]; /* ports/1/link_layer: "InfiniBand", "Ethernet" (RoCE), "" unknown */
    char state[24];      /* ports/1/state: "4: ACTIVE", "" unknown */
} gdu_rdma_dev;

typedef struct gdu_rdma {
    bool class_present; /* /sys/class/infiniband exists (the RDMA core is loaded) */
    gdu_rdma_dev devs[GDU_RDMA_MAX_DEVS];
    size_t n_devs;
    /* The peer-memory client: each file's first line ("" absent). */
    char nv_mem[64];    /* /sys/kernel/mm/memory_peers/nv_mem/version */
    char nv_mem_nc[64]; /* /sys/kernel/mm/memory_peers/nv_mem_nc/version */
    char peermem[64];   /* /sys/module/nvidia_peermem/version */
} gdu_rdma;

void gdu_rdma_probe(gdu_sysroot *sr, gdu_rdma *out);

/* Whether NCCL would find a peer-memory client (any of the three files). */
bool gdu_rdma_peer_memory(const gdu_rdma *r);

#endif
