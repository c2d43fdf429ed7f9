#include "p2p/p2p_reason.h"

#include "util/units.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define FIX_PATCHED_DRIVER                                                                         \
    "run 'gdunlock p2p unlock --check': it says what this machine needs for BAR1 P2P (the open "   \
    "module of your version with gdunlock's edits, registry keys, or what blocks it) and the "     \
    "commands"
#define FIX_TOPOLOGY                                                                               \
    "put both GPUs under one CPU socket (ideally one PCIe switch), or link them with NVLink"
#define FIX_REBAR                                                                                  \
    "enable Above 4G Decoding and Resizable BAR in the BIOS and load nvidia with "                 \
    "NVreg_EnableResizableBar=1 so that BAR1 covers all GPU memory"

const char *gdu_p2p_cause_id(gdu_p2p_cause cause)
{
    static const char *const ids[] = {
        [GDU_P2P_CAUSE_NONE] = "none",
        [GDU_P2P_CAUSE_SKU_LOCK] = "sku_lock",
        [GDU_P2P_CAUSE_ARCH_HAL] = "arch_hal",
        [GDU_P2P_CAUSE_REBAR] = "rebar",
        [GDU_P2P_CAUSE_GMMU_APERTURE] = "gmmu_aperture",
        [GDU_P2P_CAUSE_REGKEY] = "regkey",
        [GDU_P2P_CAUSE_TOPOLOGY] = "topology",
        [GDU_P2P_CAUSE_CHIPSET] = "chipset",
        [GDU_P2P_CAUSE_ACS] = "acs",
        [GDU_P2P_CAUSE_IOMMU] = "iommu",
        [GDU_P2P_CAUSE_DRIVER] = "driver",
        [GDU_P2P_CAUSE_UNKNOWN] = "unknown",
    };
    return (unsigned)cause < sizeof ids / sizeof ids[0] ? ids[cause] : "unknown";
}

/* Index (0 or 1) of a GPU whose BAR1 is smaller than its memory, or -1. */
static int small_bar1_gpu(const gdu_p2p_facts *f)
{
    for (int i = 0; i < 2; i++)
        if (f->bar1_bytes[i] != 0 && f->vram_bytes[i] != 0 && f->bar1_bytes[i] < f->vram_bytes[i])
            return i;
    return -1;
}

/* BAR1 P2P is the PCIe path for GeForce (mailbox locked) and for Hopper and
 * later; older professional GPUs use mailbox P2P, where BAR1 size is moot. */
static int bar1_p2p_candidate(const gdu_p2p_facts *f)
{
    return f->geforce == GDU_TRI_YES || f->cc_major >= 9;
}

static void describe_small_bar1(const gdu_p2p_facts *f, int gpu, char *out, size_t len)
{
    char bar1[32], vram[32];
    snprintf(out, len, "BAR1 of the %s GPU is %s but its memory is %s (Resizable BAR is off)",
             gpu == 0 ? "source" : "destination",
             gdu_format_bytes(f->bar1_bytes[gpu], bar1, sizeof bar1),
             gdu_format_bytes(f->vram_bytes[gpu], vram, sizeof vram));
}

/* The status that explains a refusal best: registry keys and per-GPU locks
 * are more specific than topology and chipset, which beat "not supported". */
static uint8_t refusal_status(const gdu_p2p_rm_caps *rm)
{
    static const uint8_t order[] = {
        GDU_P2P_CAPS_STATUS_DISABLED_BY_REGKEY,
        GDU_P2P_CAPS_STATUS_GPU_NOT_SUPPORTED,
        GDU_P2P_CAPS_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED,
        GDU_P2P_CAPS_STATUS_CHIPSET_NOT_SUPPORTED,
    };
    uint8_t r = rm->status[GDU_P2P_CAPS_INDEX_READ], w = rm->status[GDU_P2P_CAPS_INDEX_WRITE];
    for (size_t i = 0; i < sizeof order; i++)
        if (r == order[i] || w == order[i])
            return order[i];
    return GDU_P2P_CAPS_STATUS_NOT_SUPPORTED;
}

__attribute__((format(printf, 4, 5))) static void set(gdu_p2p_verdict *v, gdu_p2p_cause cause,
                                                      const char *fix, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    v->cause = cause;
    v->link = GDU_P2P_LINK_NONE;
    vsnprintf(v->reason, sizeof v->reason, fmt, ap);
    snprintf(v->fix, sizeof v->fix, "%s", fix);
    va_end(ap);
}

static void working_warnings(const gdu_p2p_facts *f, gdu_p2p_verdict *v)
{
    int pcie = v->link == GDU_P2P_LINK_PCIE_BAR1 || v->link == GDU_P2P_LINK_PCIE_MAILBOX;
    if (pcie && f->acs_redirect == GDU_TRI_YES)
        snprintf(v->warning, sizeof v->warning,
                 "ACS redirects P2P requests to the root complex: lower bandwidth; disable ACS "
                 "on the bridges between the GPUs");
    else if (pcie && f->topo == GDU_P2P_TOPO_SYS)
        snprintf(v->warning, sizeof v->warning,
                 "the path crosses CPU sockets: expect a fraction of PCIe bandwidth");
    else if (pcie && f->iommu == GDU_P2P_IOMMU_TRANSLATED)
        snprintf(
            v->warning, sizeof v->warning,
            "the IOMMU translates peer DMA: if copies fail or corrupt data, boot with iommu=pt");
}

/* Transfers completed with wrong data; subject says which ("peer copies
 * over NVLink"). ACS and the IOMMU are the system causes that do this. */
static void wrong_data(const gdu_p2p_facts *f, gdu_p2p_verdict *v, const char *subject)
{
    if (f->acs_redirect == GDU_TRI_YES)
        set(v, GDU_P2P_CAUSE_ACS,
            "disable ACS in the BIOS, or clear the ACS control bits of the bridges between the "
            "GPUs (setpci), then re-run",
            "%s completed with wrong data: ACS redirects P2P requests and the root complex does "
            "not forward them",
            subject);
    else if (f->iommu == GDU_P2P_IOMMU_TRANSLATED)
        set(v, GDU_P2P_CAUSE_IOMMU,
            "boot with iommu=pt (intel_iommu=on iommu=pt or amd_iommu=pt), or disable the IOMMU",
            "%s completed with wrong data: the IOMMU translates device DMA and the peer's BAR is "
            "not mapped for it",
            subject);
    else
        set(v, GDU_P2P_CAUSE_UNKNOWN,
            "check ACS and the IOMMU with 'gdunlock doctor' (run as root to read ACS); keep peer "
            "access disabled until then",
            "%s completed with wrong data", subject);
}

/* P2P is advertised but using it failed or corrupted data. */
static int broken_in_use(const gdu_p2p_facts *f, gdu_p2p_verdict *v, gdu_p2p_link link)
{
    const char *path =
        link == GDU_P2P_LINK_UNKNOWN ? "an unreported path" : gdu_p2p_link_name(link);
    if (f->enable_failed == GDU_TRI_YES) {
        set(v, GDU_P2P_CAUSE_GMMU_APERTURE,
            FIX_PATCHED_DRIVER
            " (it maps peer memory through the SYS_NONCOH aperture instead of PEER)",
            "P2P over %s is advertised but mapping the peer's memory failed (on GeForce the GMMU "
            "refuses the PEER aperture)",
            path);
        return 1;
    }
    if (f->data_corrupt != GDU_TRI_YES)
        return 0;
    char subject[96];
    snprintf(subject, sizeof subject, "peer copies over %s", path);
    wrong_data(f, v, subject);
    return 1;
}

/* The refusal whose cause the RM's status names: false when it names none,
 * or a chipset refusal across CPU sockets (the topology is the cause).
 * small: the GPU whose BAR1 is short of its memory (-1 none), bar1 why. */
static bool refusal_named(const gdu_p2p_facts *f, gdu_p2p_verdict *v, int small, const char *bar1)
{
    switch (refusal_status(&f->rm)) {
    case GDU_P2P_CAPS_STATUS_DISABLED_BY_REGKEY:
        set(v, GDU_P2P_CAUSE_REGKEY,
            "remove the ForceP2P / RMForceP2PType / RMPcieP2PType entries from "
            "NVreg_RegistryDwords (modprobe.d) and reload the driver",
            "the driver reports P2P %s", "disabled by a registry key");
        return true;
    case GDU_P2P_CAPS_STATUS_GPU_NOT_SUPPORTED:
        if (f->geforce == GDU_TRI_NO) {
            set(v, GDU_P2P_CAUSE_SKU_LOCK, "none in software: this board has P2P disabled",
                "the driver reports P2P %s", "disabled for this GPU (board setting)");
            return true;
        }
        set(v, GDU_P2P_CAUSE_SKU_LOCK, FIX_PATCHED_DRIVER,
            "the driver disables PCIe P2P for this GPU (the %s of mailbox P2P) and the stock "
            "driver has no BAR1 P2P to offer instead",
            "GeForce SKU lock");
        if (small >= 0) {
            size_t n = strlen(v->fix);
            snprintf(v->fix + n, sizeof v->fix - n, "; %s", "also " FIX_REBAR);
            n = strlen(v->reason);
            snprintf(v->reason + n, sizeof v->reason - n, "; %s", bar1);
        }
        return true;
    case GDU_P2P_CAPS_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED:
        set(v, GDU_P2P_CAUSE_TOPOLOGY, FIX_TOPOLOGY, "the driver refuses P2P: %s",
            "the GPUs hang off different I/O hubs / CPU sockets");
        return true;
    case GDU_P2P_CAPS_STATUS_CHIPSET_NOT_SUPPORTED:
        if (f->topo == GDU_P2P_TOPO_SYS)
            return false;
        set(v, GDU_P2P_CAUSE_CHIPSET,
            "put both GPUs behind one PCIe switch, or force it with "
            "NVreg_RegistryDwords=\"ForceP2P=0x11\" (at your own risk: the root complex must "
            "forward peer requests)",
            "the driver refuses P2P: %s",
            "no common PCIe switch and the CPU's root complex is not on its P2P allow list");
        return true;
    default:
        return false;
    }
}

/* The RM refused the pair: the cause its status names, else the platform's. */
static void refused_by_rm(const gdu_p2p_facts *f, gdu_p2p_verdict *v)
{
    char bar1[160] = "";
    int small = small_bar1_gpu(f);
    if (small >= 0)
        describe_small_bar1(f, small, bar1, sizeof bar1);
    if (refusal_named(f, v, small, bar1))
        return;
    if (f->topo == GDU_P2P_TOPO_SYS) {
        set(v, GDU_P2P_CAUSE_TOPOLOGY, FIX_TOPOLOGY, "the driver refuses P2P: %s",
            "the path crosses CPU sockets (SYS)");
    } else if (small >= 0 && bar1_p2p_candidate(f)) {
        set(v, GDU_P2P_CAUSE_REBAR, FIX_REBAR, "BAR1 P2P needs all GPU memory in BAR1: %s", bar1);
    } else if (f->geforce == GDU_TRI_YES) {
        set(v, GDU_P2P_CAUSE_ARCH_HAL, FIX_PATCHED_DRIVER,
            "the driver has no PCIe P2P for this GeForce GPU: %s",
            "mailbox P2P is locked and the stock driver binds BAR1 P2P only for some "
            "architectures");
    } else if (f->acs_redirect == GDU_TRI_YES) {
        set(v, GDU_P2P_CAUSE_ACS, "disable ACS in the BIOS or on the bridges between the GPUs",
            "the driver refuses P2P and %s", "ACS redirects P2P requests on the path");
    } else {
        set(v, GDU_P2P_CAUSE_UNKNOWN, "run 'gdunlock doctor' for the full picture",
            "the driver reports P2P %s for this pair", "not supported");
    }
}

/* Without the RM's answer: infer from the platform facts alone. */
static void refused_without_rm(const gdu_p2p_facts *f, gdu_p2p_verdict *v)
{
    char bar1[160];
    int small = small_bar1_gpu(f);
    if (f->topo == GDU_P2P_TOPO_SYS) {
        set(v, GDU_P2P_CAUSE_TOPOLOGY, FIX_TOPOLOGY, "CUDA refuses peer access; %s",
            "the path crosses CPU sockets (SYS)");
    } else if (small >= 0 && bar1_p2p_candidate(f)) {
        describe_small_bar1(f, small, bar1, sizeof bar1);
        set(v, GDU_P2P_CAUSE_REBAR, FIX_REBAR, "CUDA refuses peer access; %s", bar1);
    } else if (f->geforce == GDU_TRI_YES) {
        set(v, GDU_P2P_CAUSE_SKU_LOCK, FIX_PATCHED_DRIVER,
            "CUDA refuses peer access on %s (the stock driver's SKU lock; RM caps unavailable)",
            "GeForce");
    } else {
        set(v, GDU_P2P_CAUSE_UNKNOWN, "run 'gdunlock doctor' for the full picture",
            "CUDA refuses peer access%s", " (RM caps unavailable)");
    }
}

void gdu_p2p_reason(const gdu_p2p_facts *f, gdu_p2p_verdict *v)
{
    memset(v, 0, sizeof *v);
    if (f->cuda_can_access == GDU_TRI_UNKNOWN && !f->rm_caps_known) {
        set(v, GDU_P2P_CAUSE_UNKNOWN,
            "run doctor (or gdunlock p2p) on the machine itself with the NVIDIA driver's "
            "libcuda installed",
            "neither CUDA nor the RM answered for this pair%s", "");
        v->undetermined = true;
        return;
    }
    int rm_allows = f->rm_caps_known && gdu_p2p_caps_allowed(&f->rm);
    int works =
        f->cuda_can_access == GDU_TRI_YES || (f->cuda_can_access == GDU_TRI_UNKNOWN && rm_allows);
    if (works) {
        gdu_p2p_link link = f->rm_caps_known ? gdu_p2p_caps_link(f->rm.caps) : GDU_P2P_LINK_UNKNOWN;
        if (link == GDU_P2P_LINK_NONE)
            link = GDU_P2P_LINK_UNKNOWN;
        if (broken_in_use(f, v, link))
            return;
        v->cause = GDU_P2P_CAUSE_NONE;
        v->link = link;
        if (link == GDU_P2P_LINK_UNKNOWN)
            snprintf(v->reason, sizeof v->reason, "P2P works (the RM's caps do not say over what)");
        else
            snprintf(v->reason, sizeof v->reason, "P2P over %s", gdu_p2p_link_name(link));
        working_warnings(f, v);
        /* Without the RM's answer CUDA's native peer atomics still tell NVLink from PCIe. */
        if (!f->rm_caps_known && f->cuda_can_access == GDU_TRI_YES &&
            f->native_atomics == GDU_TRI_YES) {
            v->link = GDU_P2P_LINK_NVLINK;
            snprintf(v->reason, sizeof v->reason,
                     "P2P over NVLink (inferred: the RM's caps are unavailable, but CUDA reports "
                     "native peer atomics, which it offers over NVLink only)");
        }
        return;
    }
    if (rm_allows)
        set(v, GDU_P2P_CAUSE_DRIVER,
            "make sure libcuda and the kernel module come from the same driver release",
            "the RM allows P2P but CUDA refuses it: %s", "user-space and kernel driver disagree");
    else if (f->rm_caps_known)
        refused_by_rm(f, v);
    else
        refused_without_rm(f, v);
}

void gdu_p2p_verdict_name_unlock(gdu_p2p_verdict *v, const gdu_p2p_facts *f, const char *advice)
{
    if (advice == NULL || advice[0] == '\0' || f->geforce != GDU_TRI_YES)
        return;
    switch (v->cause) {
    case GDU_P2P_CAUSE_SKU_LOCK:
    case GDU_P2P_CAUSE_ARCH_HAL:
    case GDU_P2P_CAUSE_GMMU_APERTURE:
    case GDU_P2P_CAUSE_REBAR:
        snprintf(v->fix, sizeof v->fix, "%s", advice);
        return;
    default:
        return;
    }
}

const char *gdu_p2p_verdict_class(const gdu_p2p_verdict *v)
{
    if (v->undetermined)
        return "unknown";
    switch (v->link) {
    case GDU_P2P_LINK_NVLINK:
    case GDU_P2P_LINK_NVLINK_INDIRECT:
    case GDU_P2P_LINK_C2C:
        return "NVLink";
    case GDU_P2P_LINK_PCIE_BAR1:
        return "BAR1";
    case GDU_P2P_LINK_PCIE_MAILBOX:
    case GDU_P2P_LINK_UNKNOWN:
        return "PCIe";
    default:
        return "staged only";
    }
}

static const char *route_subject(gdu_p2p_route route)
{
    return route == GDU_P2P_ROUTE_SM_WRITE  ? "SM stores into the peer's memory"
           : route == GDU_P2P_ROUTE_SM_READ ? "SM loads from the peer's memory"
                                            : "copy-engine peer copies";
}

#define FIX_GPU_HEALTH                                                                             \
    "not a P2P matter: check the GPU's health (nvidia-smi -q for ECC errors, Xid lines in "        \
    "dmesg) and the driver installation"

/* An SM route faulted though peer access is enabled for it. */
static void sm_fault(const gdu_p2p_facts *f, gdu_p2p_verdict *v, const char *subject)
{
    if (f->geforce == GDU_TRI_YES)
        set(v, GDU_P2P_CAUSE_GMMU_APERTURE,
            FIX_PATCHED_DRIVER
            " (it maps peer memory through the SYS_NONCOH aperture instead of PEER)",
            "%s fault while peer access is enabled: on GeForce the GMMU refuses the PEER aperture "
            "that peer mappings use",
            subject);
    else if (f->iommu == GDU_P2P_IOMMU_TRANSLATED)
        set(v, GDU_P2P_CAUSE_IOMMU,
            "boot with iommu=pt (intel_iommu=on iommu=pt or amd_iommu=pt), or disable the IOMMU",
            "%s fault: the IOMMU translates device DMA and the peer's BAR is not mapped for this "
            "GPU",
            subject);
    else if (f->acs_redirect == GDU_TRI_YES)
        set(v, GDU_P2P_CAUSE_ACS, "disable ACS in the BIOS or on the bridges between the GPUs",
            "%s fault: ACS redirects P2P requests on the path", subject);
    else
        set(v, GDU_P2P_CAUSE_UNKNOWN,
            "keep this pair on copy-engine copies (cudaMemcpyPeer) and NCCL off its P2P transport "
            "(NCCL_P2P_DISABLE=1) until the cause is known; 'gdunlock doctor' shows the path",
            "%s fault although peer access is enabled", subject);
}

void gdu_p2p_route_reason(const gdu_p2p_facts *f, int within_gpu, gdu_p2p_route route,
                          gdu_p2p_route_state state, gdu_p2p_verdict *v)
{
    const char *subject = route_subject(route);
    memset(v, 0, sizeof *v);
    switch (state) {
    case GDU_P2P_ROUTE_OK:
        v->cause = GDU_P2P_CAUSE_NONE;
        snprintf(v->reason, sizeof v->reason, "the data read back is what was written");
        return;
    case GDU_P2P_ROUTE_NO_PEER: {
        gdu_p2p_verdict pair;
        gdu_p2p_reason(f, &pair);
        if (pair.cause == GDU_P2P_CAUSE_NONE) {
            set(v, GDU_P2P_CAUSE_UNKNOWN, "run 'gdunlock doctor' for the full picture",
                "%s need peer access, which was not enabled in this direction", subject);
            return;
        }
        *v = pair;
        snprintf(v->reason, sizeof v->reason, "%s need peer access, which this pair lacks: %.300s",
                 subject, pair.reason);
        return;
    }
    case GDU_P2P_ROUTE_WRONG:
        if (within_gpu)
            set(v, GDU_P2P_CAUSE_UNKNOWN, FIX_GPU_HEALTH, "%s",
                "copies within one GPU completed with wrong data");
        else
            wrong_data(f, v, subject);
        return;
    case GDU_P2P_ROUTE_FAULT:
        if (within_gpu)
            set(v, GDU_P2P_CAUSE_UNKNOWN, FIX_GPU_HEALTH, "%s",
                "the SM kernel faulted within one GPU");
        else
            sm_fault(f, v, subject);
        return;
    case GDU_P2P_ROUTE_NOT_RUN:
    default:
        set(v, GDU_P2P_CAUSE_UNKNOWN, "", "%s", "not measured");
        return;
    }
}
