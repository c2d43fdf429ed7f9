/* GPUDirect RDMA between an RDMA adapter and GPU memory (NCCL over
 * InfiniBand or RoCE, ibverbs programs): each precondition a finding with its
 * evidence and fix, then one verdict finding (rdma.verdict). The model and
 * its sources: docs/rdma-model.md (NCCL 2.28.9, open-gpu-kernel-modules
 * 580.142). */
#include "doctor/doctor.h"
#include "doctor/doctor_pcie.h"

#include <stdio.h>
#include <string.h>

/* RM keeps this much BAR1 free of P2P pins (p2p.c:1030); NCCL's Simple
 * protocol buffer per channel and peer (init.cc:699 of NCCL 2.28.9). */
#define BAR1_RESERVE ((uint64_t)36 << 20)
#define NCCL_SIMPLE_BUFFER ((uint64_t)4 << 20)

/* Linux 5.12 added dma-buf memory regions to the RDMA core (ibv_reg_dmabuf_mr). */
enum { DMABUF_MR_MAJOR = 5, DMABUF_MR_MINOR = 12 };

typedef struct {
    bool blocked;       /* a path, IOMMU or route fact that stops GPUDirect RDMA */
    bool far;           /* NCCL's default distance rule turns it off */
    bool peer_memory;   /* route (a): NCCL finds a peer-memory client */
    bool dmabuf_kernel; /* route (b)'s kernel side */
    bool dmabuf_open;   /* ...and the open kernel module, whose export the shim makes */
    char why[320];      /* what blocks it */
} rdma_tally;

static void add_why(rdma_tally *t, const char *what)
{
    size_t used = strlen(t->why);
    if (used < sizeof t->why)
        snprintf(t->why + used, sizeof t->why - used, "%s%s", used ? "; " : "", what);
}

static bool has_devices(const gdu_snapshot *sys, gdu_report *r)
{
    const gdu_rdma *rd = &sys->rdma;
    if (rd->n_devs == 0) {
        gdu_finding *f = gdu_report_add(r, "rdma.devices", "rdma", GDU_ST_INFO,
                                        "RDMA devices: none (GPUDirect RDMA needs an InfiniBand "
                                        "or RoCE adapter)");
        gdu_finding_evidence(f, "/sys/class/infiniband %s",
                             rd->class_present ? "is empty" : "is absent (no RDMA core loaded)");
        gdu_finding_fix(f, "install an RDMA adapter and load its driver (mlx5_ib for ConnectX)");
        return false;
    }
    gdu_finding *f =
        gdu_report_add(r, "rdma.devices", "rdma", GDU_ST_OK, "RDMA devices: %zu", rd->n_devs);
    for (size_t i = 0; i < rd->n_devs; i++) {
        const gdu_rdma_dev *d = &rd->devs[i];
        gdu_finding_evidence(f, "%s at %s: port 1 %s, %s", d->name, d->bdf[0] ? d->bdf : "?",
                             d->state[0] ? d->state : "state unknown",
                             d->link_layer[0] ? d->link_layer : "link layer unknown");
    }
    return true;
}

static void peer_memory(const gdu_snapshot *sys, gdu_report *r, rdma_tally *t)
{
    const gdu_rdma *rd = &sys->rdma;
    t->peer_memory = gdu_rdma_peer_memory(rd);
    gdu_finding *f = gdu_report_add(
        r, "rdma.peer_memory", "rdma", t->peer_memory ? GDU_ST_OK : GDU_ST_WARN,
        "NCCL's peer-memory route (nvidia-peermem): %s", t->peer_memory ? "loaded" : "not loaded");
    gdu_finding_evidence(f, "/sys/kernel/mm/memory_peers/nv_mem/version: %s",
                         rd->nv_mem[0] ? rd->nv_mem : "absent");
    gdu_finding_evidence(f, "/sys/kernel/mm/memory_peers/nv_mem_nc/version: %s",
                         rd->nv_mem_nc[0] ? rd->nv_mem_nc : "absent");
    gdu_finding_evidence(f, "/sys/module/nvidia_peermem/version: %s",
                         rd->peermem[0] ? rd->peermem : "absent");
    gdu_finding_evidence(f, "NCCL sets NCCL_PTR_CUDA when any of them exists "
                            "(transport/net_ib.cc:872-874)");
    if (!t->peer_memory)
        gdu_finding_fix(f,
                        "install MLNX_OFED (DOCA-OFED) and run modprobe nvidia-peermem: the module "
                        "loads only against MLNX_OFED's ib_core (nvidia-peermem.c:641-681)");
}

static void dmabuf(const gdu_snapshot *sys, bool geforce, gdu_report *r, rdma_tally *t)
{
    const gdu_kernel *k = &sys->kernel;
    bool recent =
        k->major > DMABUF_MR_MAJOR || (k->major == DMABUF_MR_MAJOR && k->minor >= DMABUF_MR_MINOR);
    gdu_tri kernel = k->major == 0 ? GDU_TRI_UNKNOWN : !recent ? GDU_TRI_NO : k->dma_buf;
    t->dmabuf_kernel = kernel == GDU_TRI_YES;
    int open = sys->driver.version.version[0] ? sys->driver.version.open_module : -1;
    t->dmabuf_open = t->dmabuf_kernel && open == 1;
    gdu_status st = kernel == GDU_TRI_NO                 ? GDU_ST_WARN
                    : open == 0                          ? GDU_ST_WARN
                    : kernel == GDU_TRI_YES && open == 1 ? GDU_ST_OK
                                                         : GDU_ST_UNKNOWN;
    gdu_finding *f =
        gdu_report_add(r, "rdma.dmabuf", "rdma", st, "NCCL's DMA-BUF route, kernel and driver: %s",
                       st == GDU_ST_OK     ? "yes"
                       : st == GDU_ST_WARN ? "no"
                                           : "unknown");
    gdu_finding_evidence(f, "kernel %s%s", k->release[0] ? k->release : "release unknown",
                         k->major == 0 ? ""
                         : recent      ? " (5.12 or later: ibv_reg_dmabuf_mr)"
                                       : " (before 5.12: no dma-buf memory regions)");
    gdu_finding_evidence(f, "%s",
                         k->dma_buf == GDU_TRI_YES  ? "CONFIG_DMA_SHARED_BUFFER=y"
                         : k->dma_buf == GDU_TRI_NO ? "CONFIG_DMA_SHARED_BUFFER is not set"
                                                    : "kernel configuration not read");
    gdu_finding_evidence(f, "%s",
                         open == 1   ? "open kernel module: exports dma-bufs of video memory with "
                                       "no brand check (nv-dmabuf.c:1483, "
                                       "subdevice_ctrl_gpu_kernel.c:503-513)"
                         : open == 0 ? "proprietary kernel module: its DMA-BUF export is not "
                                       "readable source"
                                     : "driver flavour unknown");
    if (geforce)
        gdu_finding_evidence(f, "on GeForce libcuda does not advertise it (attribute 124) and "
                                "refuses the dma-buf; under 'gdunlock run --rdma' the shim answers "
                                "and makes the dma-bufs itself (docs/rdma-model.md, section 3)");
    if (st != GDU_ST_OK)
        gdu_finding_fix(f, "boot Linux 5.12 or later with CONFIG_DMA_SHARED_BUFFER, and install "
                           "NVIDIA's open kernel module");
}

/* The PCIe path from each GPU to its nearest RDMA device: ACS (a pcie finding,
 * shared with the other routes) and NCCL's distance rule. */
static void paths(const gdu_snapshot *sys, const gdu_gpu_view *gpus, size_t n, gdu_report *r,
                  rdma_tally *t)
{
    const gdu_rdma *rd = &sys->rdma;
    for (size_t g = 0; g < n; g++) {
        gdu_pcie_path best = {.kind = GDU_PATH_UNKNOWN};
        const gdu_rdma_dev *nic = NULL;
        for (size_t i = 0; i < rd->n_devs; i++) {
            gdu_pcie_path p;
            gdu_pci_path(&sys->pci, gpus[g].bdf, rd->devs[i].bdf, &p);
            if (nic == NULL || p.kind < best.kind) {
                best = p;
                nic = &rd->devs[i];
            }
        }
        char id[48], what[96];
        snprintf(id, sizeof id, "pcie.gpu%d-%s", gpus[g].index, nic->name);
        snprintf(what, sizeof what, "GPU%d <-> RDMA %s", gpus[g].index, nic->name);
        if (gdu_path_finding(sys, r, id, what, &best) == GDU_TRI_YES) {
            t->blocked = true;
            add_why(t, "ACS redirects the GPU-NIC traffic to the root complex");
        }
        /* ncclTopoCheckGdr: GDR only up to NCCL_NET_GDR_LEVEL, PXB by default
         * (graph/paths.cc:452-476). */
        bool near = best.kind <= GDU_PATH_PXB;
        snprintf(id, sizeof id, "rdma.gpu%d.distance", gpus[g].index);
        gdu_finding *f =
            gdu_report_add(r, id, "rdma",
                           best.kind == GDU_PATH_UNKNOWN ? GDU_ST_UNKNOWN
                           : near                        ? GDU_ST_OK
                                                         : GDU_ST_WARN,
                           "GPU%d and RDMA %s: %s, %s NCCL's default GPUDirect RDMA distance (PXB)",
                           gpus[g].index, nic->name, gdu_path_kind_name(best.kind),
                           best.kind == GDU_PATH_UNKNOWN ? "unknown against"
                           : near                        ? "within"
                                                         : "beyond");
        if (!near && best.kind != GDU_PATH_UNKNOWN) {
            t->far = true;
            gdu_finding_fix(f,
                            "put the GPU and the adapter under one PCIe switch; or, at a cost in "
                            "bandwidth, raise the limit with NCCL_NET_GDR_LEVEL=%s",
                            gdu_path_kind_name(best.kind));
        }
    }
}

static void iommu(const gdu_snapshot *sys, gdu_report *r, rdma_tally *t)
{
    bool translated = sys->iommu.mode == GDU_IOMMU_TRANSLATED;
    gdu_finding *f =
        gdu_report_add(r, "rdma.iommu", "rdma",
                       translated                             ? GDU_ST_FAIL
                       : sys->iommu.mode == GDU_IOMMU_UNKNOWN ? GDU_ST_UNKNOWN
                                                              : GDU_ST_OK,
                       "IOMMU on the GPU-NIC path: %s", gdu_iommu_mode_name(sys->iommu.mode));
    if (translated) {
        t->blocked = true;
        add_why(t, "the IOMMU translates: the adapter's DMA to BAR1 addresses is not mapped");
        gdu_finding_fix(f, "%s", GDU_FIX_IOMMU);
    }
}

static void bar1(const gdu_gpu_view *gpus, size_t n, gdu_report *r)
{
    for (size_t g = 0; g < n; g++) {
        char id[48];
        snprintf(id, sizeof id, "rdma.gpu%d.bar1", gpus[g].index);
        uint64_t b = gpus[g].bar1, mem = gpus[g].memory;
        bool covers = b != 0 && mem != 0 && b >= mem;
        gdu_finding *f =
            gdu_report_add(r, id, "rdma",
                           b == 0   ? GDU_ST_UNKNOWN
                           : covers ? GDU_ST_OK
                                    : GDU_ST_WARN,
                           "GPU%d BAR1 against what NCCL pins: %llu MiB%s", gpus[g].index,
                           (unsigned long long)(b >> 20), covers ? ", all of video memory" : "");
        if (b == 0 || covers)
            continue;
        uint64_t budget = b > BAR1_RESERVE ? b - BAR1_RESERVE : 0;
        gdu_finding_evidence(f,
                             "every pin through BAR1 (NCCL's registered buffers, cuFile's, other "
                             "processes') shares %llu MiB: RM keeps 36 MiB free (p2p.c:1030)",
                             (unsigned long long)(budget >> 20));
        gdu_finding_evidence(f,
                             "NCCL registers a 4 MiB Simple buffer per channel and peer "
                             "(init.cc:699), plus LL and LL128: %llu such buffers fit",
                             (unsigned long long)(budget / NCCL_SIMPLE_BUFFER));
        gdu_finding_fix(f, "%s", GDU_FIX_REBAR);
    }
}

/* The verdict: native, with `gdunlock run --rdma`, or the cause. */
static void verdict(bool geforce, gdu_report *r, const rdma_tally *t)
{
    gdu_finding *f;
    if (t->blocked) {
        f = gdu_report_add(r, "rdma.verdict", "rdma", GDU_ST_FAIL, "GPUDirect RDMA: blocked (%s)",
                           t->why);
        gdu_finding_fix(f, "see the failed findings above");
    } else if (!t->peer_memory && !(geforce ? t->dmabuf_open : t->dmabuf_kernel)) {
        f = gdu_report_add(r, "rdma.verdict", "rdma", GDU_ST_FAIL, "GPUDirect RDMA: no route (%s)",
                           geforce ? "no peer-memory client, and no DMA-BUF route for the shim: "
                                     "its export needs Linux 5.12 or later with dma-buf and the "
                                     "open kernel module"
                                   : "neither a peer-memory client nor dma-buf support");
        gdu_finding_fix(f,
                        "boot Linux 5.12 or later with CONFIG_DMA_SHARED_BUFFER%s, or install "
                        "MLNX_OFED (DOCA-OFED) and load nvidia-peermem%s",
                        geforce ? " and install NVIDIA's open kernel module" : "",
                        geforce ? "; then run the program under 'gdunlock run --rdma'" : "");
    } else if (geforce) {
        /* NCCL takes the DMA-BUF route where both are open (net_ib.cc:885-920). */
        f = gdu_report_add(r, "rdma.verdict", "rdma", t->far ? GDU_ST_WARN : GDU_ST_INFO,
                           "GPUDirect RDMA: with 'gdunlock run --rdma' through %s%s; not yet "
                           "shown on a GeForce",
                           t->dmabuf_open ? "the DMA-BUF route (the shim's export)"
                                          : "nvidia-peermem",
                           t->far ? ", once NCCL's distance rule allows it" : "");
        gdu_finding_fix(f, "run the program under 'gdunlock run --rdma', check with 'gdunlock "
                           "run --rdma -- gdunlock verify --rdma', and send 'gdunlock report'");
    } else {
        f = gdu_report_add(r, "rdma.verdict", "rdma", t->far ? GDU_ST_WARN : GDU_ST_OK,
                           "GPUDirect RDMA: native (%s)%s",
                           t->peer_memory ? "nvidia-peermem" : "DMA-BUF",
                           t->far ? ", once NCCL's distance rule allows it" : "");
        if (t->far)
            gdu_finding_fix(f, "see the distance finding above");
    }
}

void gdu_doctor_rules_rdma(const gdu_snapshot *sys, const gdu_gpu_view *gpus, size_t n_gpus,
                           gdu_report *r)
{
    if (!has_devices(sys, r) || n_gpus == 0)
        return;
    bool geforce = false;
    for (size_t g = 0; g < n_gpus; g++)
        geforce |= gpus[g].geforce == GDU_TRI_YES;
    rdma_tally t = {0};
    peer_memory(sys, r, &t);
    dmabuf(sys, geforce, r, &t);
    paths(sys, gpus, n_gpus, r, &t);
    iommu(sys, r, &t);
    bar1(gpus, n_gpus, r);
    verdict(geforce, r, &t);
}
