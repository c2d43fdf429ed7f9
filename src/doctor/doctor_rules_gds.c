/* Findings and the verdict for GPUDirect Storage: nvidia-fs, libcufile,
 * cufile.json, the GPU kind, the IOMMU, and the storage under the path. */
#include "doctor/doctor.h"
#include "doctor/doctor_pcie.h"

#include "util/units.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How a filesystem can take part in GDS. */
typedef enum { FS_DIRECT, FS_DIRECT_NETWORK, FS_COMPAT } fs_class;

static fs_class classify_fs(const gdu_mount *m, char *why, size_t len)
{
    const char *t = m->fstype;
    if (strcmp(t, "ext4") == 0) {
        if (strstr(m->super_options, "data=journal") ||
            strstr(m->super_options, "data=writeback")) {
            snprintf(why, len, "ext4 mounted with %s: GDS needs data=ordered",
                     strstr(m->super_options, "data=journal") ? "data=journal" : "data=writeback");
            return FS_COMPAT;
        }
        snprintf(why, len, "ext4 in data=ordered mode can go direct");
        return FS_DIRECT;
    }
    if (strcmp(t, "xfs") == 0) {
        snprintf(why, len, "xfs can go direct");
        return FS_DIRECT;
    }
    if (strncmp(t, "nfs", 3) == 0) {
        if (strstr(m->super_options, "proto=rdma")) {
            snprintf(why, len, "NFS over RDMA can go direct (through the NIC, not an NVMe)");
            return FS_DIRECT_NETWORK;
        }
        snprintf(why, len, "NFS over TCP (no proto=rdma): no direct path");
        return FS_COMPAT;
    }
    static const char *const network[] = {"lustre", "wekafs", "gpfs", "beegfs"};
    for (size_t i = 0; i < sizeof network / sizeof network[0]; i++)
        if (strcmp(t, network[i]) == 0) {
            snprintf(why, len, "%s has its own GDS client: direct only through its RDMA setup", t);
            return FS_DIRECT_NETWORK;
        }
    snprintf(why, len,
             "%s has no GDS direct path (cuFile supports ext4, xfs, NFS over RDMA and "
             "a few distributed filesystems)",
             t);
    return FS_COMPAT;
}

static void nvfs_findings(const gdu_snapshot *sys, gdu_report *r)
{
    const gdu_driver *d = &sys->driver;
    gdu_finding *f;
    if (!d->nvfs_loaded && r->direct_path == GDU_PATH_P2PDMA) {
        f = gdu_report_add(r, "nvidia_fs.loaded", "nvidia-fs", GDU_ST_OK,
                           "nvidia-fs is not loaded, and not needed: cuFile goes through the "
                           "kernel's PCI P2PDMA");
        gdu_finding_evidence(f, "/proc/driver/nvidia-fs and /sys/module/nvidia_fs are absent");
        gdu_report_note(r, "cuFile's direct path here is the kernel's PCI P2PDMA (%s)",
                        r->direct_path_why);
    } else if (!d->nvfs_loaded) {
        f = gdu_report_add(r, "nvidia_fs.loaded", "nvidia-fs", GDU_ST_FAIL,
                           "nvidia-fs is not loaded");
        gdu_finding_evidence(f, "/proc/driver/nvidia-fs and /sys/module/nvidia_fs are absent");
        gdu_finding_fix(f, "install nvidia-fs (the nvidia-gds / nvidia-fs-dkms package, or build "
                           "github.com/NVIDIA/gds-nvidia-fs) and run 'modprobe nvidia-fs', or "
                           "meet the P2PDMA preconditions doctor lists");
        gdu_report_reason(r, GDU_GDS_COMPAT,
                          "nvidia-fs is not loaded and cuFile's P2PDMA path is %s: cuFile falls "
                          "back to its compat (POSIX read + copy) path",
                          r->direct_path == GDU_PATH_UNDECIDED ? "not confirmed" : "not possible");
        if (sys->cufile.use_pci_p2pdma == 1)
            gdu_report_note(r, "cufile.json asks for the kernel's PCI P2PDMA: %s",
                            r->direct_path_why);
    } else {
        f = gdu_report_add(r, "nvidia_fs.loaded", "nvidia-fs", GDU_ST_OK, "nvidia-fs %s is loaded",
                           d->nvfs_version[0] ? d->nvfs_version : "(version unknown)");
        if (!d->nvfs_stats_readable) {
            gdu_finding_evidence(f, "%s is not readable", GDU_NVFS_STATS_PATH);
        } else if (sys->nvfs_stats_parsed) {
            const gdu_nvfs_stats *s = &sys->nvfs;
            gdu_finding_evidence(f, "%s: reads %llu ok %llu, BAR1 maps %llu ok %llu, %zu GPU(s)",
                                 GDU_NVFS_STATS_PATH,
                                 (unsigned long long)s->value[GDU_NVFS_READS_N],
                                 (unsigned long long)s->value[GDU_NVFS_READS_OK],
                                 (unsigned long long)s->value[GDU_NVFS_BAR1_N],
                                 (unsigned long long)s->value[GDU_NVFS_BAR1_OK], s->n_gpus);
        } else {
            gdu_finding_evidence(f, "%s is readable but not in a known format",
                                 GDU_NVFS_STATS_PATH);
        }
    }
    f = gdu_report_add(r, "nvidia_peermem.loaded", "nvidia-fs", GDU_ST_OK, "nvidia_peermem is %s",
                       d->peermem_loaded ? "loaded" : "not loaded");
    gdu_finding_evidence(f, "only GPUDirect RDMA with network cards needs it, not local NVMe");
}

/* How to get evidence doctor lacks: live it could not be read here; in a
 * replay the capture does not hold it. */
static const char *how_to_get(const gdu_snapshot *sys)
{
    return sys->live_machine ? "run doctor as root, or check why it cannot be read"
                             : "capture the machine again with 'gdunlock doctor "
                               "--capture DIR [PATH]'";
}

/* cufile.config: the cufile.json cuFile reads, and the settings of it
 * that decide the path. */
static void config_finding(const gdu_cufile_config *c, gdu_report *r)
{
    gdu_finding *f;
    if (!c->found) {
        f = gdu_report_add(r, "cufile.config", "cufile", GDU_ST_WARN, "no cufile.json at %s",
                           c->path);
        gdu_finding_evidence(f, "%s: %s; cuFile uses its built-in defaults", c->path, c->error);
        return;
    }
    if (!c->parsed) {
        f = gdu_report_add(r, "cufile.config", "cufile", GDU_ST_FAIL, "%s cannot be used", c->path);
        gdu_finding_evidence(f, "%s", c->error);
        gdu_finding_fix(f, "repair the JSON in %s (// comments are allowed)", c->path);
        /* Its settings (allow_compat_mode above all) decide the path; what
         * cuFile makes of a file doctor cannot read is not known here. */
        gdu_report_unknown(r, GDU_GDS_IMPOSSIBLE,
                           "%s cannot be used (%s): the settings cuFile takes from it are "
                           "unknown; repair it",
                           c->path, c->error);
        return;
    }
    f = gdu_report_add(r, "cufile.config", "cufile", GDU_ST_OK, "cufile.json in effect: %s",
                       c->path);
    gdu_finding_evidence(f, "allow_compat_mode: %s",
                         c->allow_compat_mode < 0 ? "not set"
                         : c->allow_compat_mode   ? "true"
                                                  : "false");
    gdu_finding_evidence(f, "use_pci_p2pdma: %s",
                         c->use_pci_p2pdma < 0 ? "not set"
                         : c->use_pci_p2pdma   ? "true"
                                               : "false");
    if (c->max_direct_io_size_kb >= 0)
        gdu_finding_evidence(f, "max_direct_io_size_kb: %lld", c->max_direct_io_size_kb);
    if (c->max_device_pinned_mem_size_kb >= 0)
        gdu_finding_evidence(f, "max_device_pinned_mem_size_kb: %lld",
                             c->max_device_pinned_mem_size_kb);
    if (c->max_device_cache_size_kb >= 0)
        gdu_finding_evidence(f, "max_device_cache_size_kb: %lld", c->max_device_cache_size_kb);
}

static void cufile_findings(const gdu_snapshot *sys, gdu_report *r)
{
    const gdu_live *l = &sys->live;
    gdu_finding *f;
    if (l->origin == GDU_LIVE_ABSENT) {
        f = gdu_report_add(r, "cufile.library", "cufile", GDU_ST_UNKNOWN,
                           "libcufile: not captured");
        gdu_finding_evidence(
            f, "%s", sys->live_error[0] ? sys->live_error : "the sysroot has no " GDU_LIVE_FILE);
        gdu_finding_fix(f, "%s", how_to_get(sys));
        gdu_report_unknown(
            r, GDU_GDS_IMPOSSIBLE, "whether libcufile is installed is not known (%s): %s",
            sys->live_error[0] ? GDU_LIVE_FILE " is unusable" : "the capture has no " GDU_LIVE_FILE,
            how_to_get(sys));
    } else if (!l->cufile_found) {
        f = gdu_report_add(r, "cufile.library", "cufile", GDU_ST_FAIL,
                           "libcufile is not installed");
        gdu_finding_evidence(f, "%s", l->cufile_why);
        gdu_finding_fix(f, "install libcufile (the CUDA toolkit's libcufile-<ver> package or pip "
                           "nvidia-cufile), or point GDUNLOCK_LIBCUFILE at it");
        gdu_report_reason(r, GDU_GDS_IMPOSSIBLE,
                          "libcufile is not installed: nothing here can "
                          "use cuFile");
    } else {
        f = gdu_report_add(r, "cufile.library", "cufile", GDU_ST_OK, "libcufile %s",
                           l->cufile_version[0] ? l->cufile_version : "(version unknown)");
        gdu_finding_evidence(f, "loaded from %s", l->cufile_path);
    }
    config_finding(&sys->cufile, r);
}

static void iommu_finding(const gdu_snapshot *sys, gdu_report *r)
{
    const gdu_iommu *io = &sys->iommu;
    gdu_status st = io->mode == GDU_IOMMU_TRANSLATED ? GDU_ST_FAIL
                    : io->mode == GDU_IOMMU_UNKNOWN  ? GDU_ST_UNKNOWN
                                                     : GDU_ST_OK;
    gdu_finding *f =
        gdu_report_add(r, "iommu.mode", "iommu", st, "IOMMU: %s", gdu_iommu_mode_name(io->mode));
    gdu_finding_evidence(f, "%zu IOMMU group(s): %zu identity, %zu DMA/DMA-FQ", io->n_groups,
                         io->n_identity, io->n_translated);
    gdu_finding_evidence(f, "kernel command line: iommu=%s intel_iommu=%s amd_iommu=%s",
                         io->iommu[0] ? io->iommu : "(unset)",
                         io->intel_iommu[0] ? io->intel_iommu : "(unset)",
                         io->amd_iommu[0] ? io->amd_iommu : "(unset)");
    if (st == GDU_ST_FAIL) {
        gdu_finding_fix(f, "%s", GDU_FIX_IOMMU);
        gdu_report_reason(r, GDU_GDS_COMPAT,
                          "the IOMMU translates device DMA (groups of type DMA): nvidia-fs's "
                          "peer DMA needs it off or in passthrough");
    } else if (st == GDU_ST_UNKNOWN) {
        gdu_report_unknown(
            r, GDU_GDS_COMPAT,
            "the IOMMU's mode is unknown (no group's /sys/kernel/iommu_groups/N/type "
            "could be read): %s",
            how_to_get(sys));
    }
}

/* The GPU kind decides whether stock libcuda serves nvidia-fs. */
static void gpu_kind_reasons(const gdu_snapshot *sys, const gdu_gpu_view *gpus, size_t n,
                             gdu_report *r)
{
    size_t geforce = 0, pro = 0;
    int unknown = -1;
    for (size_t i = 0; i < n; i++) {
        geforce += gpus[i].geforce == GDU_TRI_YES;
        pro += gpus[i].geforce == GDU_TRI_NO;
        if (gpus[i].geforce == GDU_TRI_UNKNOWN && unknown < 0)
            unknown = gpus[i].index;
    }
    if (pro > 0 || n == 0)
        return;
    /* The module's version when /proc/driver/nvidia/version is missing. */
    const gdu_driver *d = &sys->driver;
    int major = d->version.major > 0 ? d->version.major : atoi(d->module_version);
    bool old = major > 0 && major < 555;
    if (geforce == 0) {
        gdu_report_unknown(r, major == 0 || old ? GDU_GDS_COMPAT : GDU_GDS_DIRECT_GDUNLOCK,
                           "whether GPU%d is a GeForce (which needs the gdunlock shim) is unknown: "
                           "neither CUDA's name nor the driver's Model is known; %s",
                           unknown, how_to_get(sys));
        return;
    }
    gdu_report_reason(r, GDU_GDS_DIRECT_GDUNLOCK,
                      "GeForce GPU: libcuda does not create the ThirdPartyP2P object nvidia-fs "
                      "pins GPU memory through; the gdunlock shim creates it "
                      "('gdunlock run -- CMD')");
    if (old)
        gdu_report_reason(r, GDU_GDS_COMPAT,
                          "driver %s is older than 555: the shim's pinning path is missing, so "
                          "a GeForce GPU stays on the compat path",
                          d->version.version[0] ? d->version.version : d->module_version);
    else if (major == 0)
        gdu_report_unknown(r, GDU_GDS_COMPAT,
                           "the driver's version is unknown, and a GeForce GPU needs 555 or newer "
                           "for the shim's pinning path: %s",
                           how_to_get(sys));
}

/* A small BAR1 window caps how much GPU memory can be pinned for DMA at once. */
static void bar1_notes(const gdu_gpu_view *gpus, size_t n, gdu_report *r)
{
    char a[32], b[32];
    for (size_t i = 0; i < n; i++) {
        const gdu_gpu_view *g = &gpus[i];
        bool small = g->bar1 != 0 && (g->memory ? g->bar1 < g->memory : g->bar1 <= 256ull << 20);
        char rm[96] = "";
        if (small && g->cuda != NULL && g->cuda->rm_bar1_known)
            snprintf(rm, sizeof rm, "; RM counts %s of it unused now, for every process together",
                     gdu_format_bytes(g->cuda->rm_bar1_available, b, sizeof b));
        if (small)
            gdu_report_note(r,
                            "GPU%d's BAR1 is a %s window%s%s: cuFile can register at most that "
                            "much GPU memory at once (Resizable BAR is off)%s",
                            g->index, gdu_format_bytes(g->bar1, a, sizeof a),
                            g->memory ? " on " : "",
                            g->memory ? gdu_format_bytes(g->memory, b, sizeof b) : "", rm);
    }
}

/* The GPU nearest to a PCI function and the path to it. Returns its index or -1. */
static int nearest_gpu(const gdu_snapshot *sys, const gdu_gpu_view *gpus, size_t n, const char *bdf,
                       gdu_pcie_path *best)
{
    int idx = -1;
    for (size_t i = 0; i < n; i++) {
        gdu_pcie_path p;
        gdu_pci_path(&sys->pci, gpus[i].bdf, bdf, &p);
        if (idx < 0 || p.kind < best->kind) {
            *best = p;
            idx = (int)i;
        }
    }
    return idx;
}

/* Checks the PCIe path from the nearest GPU to each NVMe controller named. */
static void nvme_paths(const gdu_snapshot *sys, const gdu_gpu_view *gpus, size_t n,
                       const char (*bdfs)[16], size_t n_bdfs, gdu_report *r)
{
    for (size_t k = 0; k < n_bdfs; k++) {
        gdu_pcie_path path;
        int g = nearest_gpu(sys, gpus, n, bdfs[k], &path);
        if (g < 0)
            return;
        char id[48], what[96];
        snprintf(id, sizeof id, "pcie.gpu%d-%s", gpus[g].index, bdfs[k]);
        snprintf(what, sizeof what, "GPU%d <-> NVMe %s", gpus[g].index, bdfs[k]);
        gdu_tri acs = gdu_path_finding(sys, r, id, what, &path);
        if (acs == GDU_TRI_YES)
            gdu_report_reason(r, GDU_GDS_COMPAT,
                              "ACS on a bridge between GPU%d and NVMe %s redirects peer "
                              "traffic to the root complex",
                              gpus[g].index, bdfs[k]);
        else if (path.kind == GDU_PATH_UNKNOWN)
            gdu_report_unknown(r, GDU_GDS_COMPAT,
                               "the PCIe path between GPU%d and NVMe %s is unknown (not both are "
                               "in the PCI tree): %s",
                               gpus[g].index, bdfs[k][0] ? bdfs[k] : "(no PCI address)",
                               how_to_get(sys));
        else if (acs == GDU_TRI_UNKNOWN)
            gdu_report_unknown(r, GDU_GDS_COMPAT,
                               "ACS on the bridges between GPU%d and NVMe %s is unknown: extended "
                               "config space needs root (%s)",
                               gpus[g].index, bdfs[k],
                               sys->live_machine ? "run doctor as root"
                                                 : "capture the machine as root");
        else if (path.kind == GDU_PATH_SYS)
            gdu_report_note(r,
                            "NVMe %s sits on the other CPU socket from GPU%d (SYS): direct "
                            "transfers cross the socket link and run slower",
                            bdfs[k], gpus[g].index);
    }
}

static void no_path_storage(const gdu_snapshot *sys, const gdu_gpu_view *gpus, size_t n,
                            gdu_report *r)
{
    gdu_finding *f =
        gdu_report_add(r, "storage.nvme", "storage", sys->nvme.n ? GDU_ST_OK : GDU_ST_FAIL,
                       "%zu NVMe controller(s)", sys->nvme.n);
    char bdfs[GDU_MAX_NVME][16];
    size_t n_bdfs = 0;
    for (size_t i = 0; i < sys->nvme.n; i++) {
        const gdu_nvme *c = &sys->nvme.ctrl[i];
        gdu_finding_evidence(f, "%s %s at %s, %zu namespace(s)", c->name, c->model,
                             c->bdf[0] ? c->bdf : "(not PCI)", c->n_ns);
        if (c->bdf[0])
            snprintf(bdfs[n_bdfs++], sizeof bdfs[0], "%s", c->bdf);
    }
    if (sys->nvme.n == 0) {
        gdu_finding_fix(f, "GDS reads NVMe drives (or RDMA filesystems); add an NVMe drive");
        gdu_report_reason(r, GDU_GDS_COMPAT, "no NVMe drive: nothing here can be read direct");
        return;
    }
    nvme_paths(sys, gpus, n, (const char(*)[16])bdfs, n_bdfs, r);
}

/* O_DIRECT on the path, tried live; in a replay, the capture's answer for it,
 * or for another path on the same filesystem (it is a property of the
 * filesystem). */
static void o_direct_finding(const gdu_snapshot *sys, const gdu_mount *m, const char *path,
                             const gdu_live_path *lp, gdu_report *r)
{
    gdu_finding *f;
    const gdu_live_path *same = NULL;
    for (size_t i = 0; (lp == NULL || lp->o_direct < 0) && i < sys->live.n_paths; i++)
        if (sys->live.paths[i].o_direct >= 0 &&
            gdu_mount_for_path(&sys->mounts, sys->live.paths[i].path) == m)
            same = &sys->live.paths[i];
    if (same != NULL) {
        f = gdu_report_add(r, "storage.o_direct", "storage",
                           same->o_direct ? GDU_ST_OK : GDU_ST_FAIL, "O_DIRECT %s on %s",
                           same->o_direct ? "opens work" : "is refused", m->mount_point);
        gdu_finding_evidence(f, "tried on %s, on the same filesystem", same->path);
        lp = same;
    }
    if (lp == NULL || lp->o_direct < 0) {
        f = gdu_report_add(r, "storage.o_direct", "storage", GDU_ST_UNKNOWN, "O_DIRECT: not tried");
        if (lp != NULL && lp->o_direct_error[0])
            gdu_finding_evidence(f, "the attempt failed: %s", lp->o_direct_error);
        gdu_report_unknown(r, GDU_GDS_COMPAT, "whether %s takes O_DIRECT is unknown (%s): %s", path,
                           lp != NULL && lp->o_direct_error[0] ? lp->o_direct_error
                                                               : "not tried on this filesystem",
                           how_to_get(sys));
    } else if (lp->o_direct == 1) {
        if (same == NULL)
            gdu_report_add(r, "storage.o_direct", "storage", GDU_ST_OK, "O_DIRECT opens work on %s",
                           path);
    } else {
        if (same == NULL) {
            f = gdu_report_add(r, "storage.o_direct", "storage", GDU_ST_FAIL,
                               "the filesystem refuses O_DIRECT");
            gdu_finding_evidence(f, "open(O_DIRECT): %s", lp->o_direct_error);
        }
        gdu_report_reason(r, GDU_GDS_COMPAT, "O_DIRECT is refused on %s", path);
    }
}

/* storage.block: the block device under m, down to its disks (NVMe or
 * not, and the GPUs' paths to the NVMe ones). top: the device's name (or
 * its numbers when unknown). Returns the snapshot's device, or NULL. */
static const gdu_block *block_finding(const gdu_snapshot *sys, const gdu_gpu_view *gpus, size_t n,
                                      const gdu_mount *m, const char *path, char top[32],
                                      gdu_report *r)
{
    gdu_finding *f;
    const gdu_block *block = gdu_snapshot_block(sys, m->major, m->minor);
    snprintf(top, 32, "%u:%u", m->major, m->minor);
    if (block != NULL && block->found) {
        const gdu_block_chain chain = block->chain;
        snprintf(top, 32, "%s", chain.top);
        size_t nvme = 0;
        for (size_t i = 0; i < chain.n_disks; i++)
            nvme += gdu_disk_is_nvme(chain.disks[i]);
        f = gdu_report_add(r, "storage.block", "storage",
                           nvme == chain.n_disks && nvme > 0 ? GDU_ST_OK : GDU_ST_FAIL,
                           "block device %u:%u: %s", m->major, m->minor, chain.layers);
        for (size_t i = 0; i < chain.n_disks; i++)
            gdu_finding_evidence(f, "disk %s at PCI %s%s", chain.disks[i],
                                 chain.disk_bdf[i][0] ? chain.disk_bdf[i] : "(none)",
                                 gdu_disk_is_nvme(chain.disks[i]) ? " (NVMe)" : " (not NVMe)");
        if (nvme != chain.n_disks || nvme == 0) {
            gdu_finding_fix(f, "GDS reads NVMe drives directly; move the data to an NVMe-backed "
                               "filesystem");
            gdu_report_reason(r, GDU_GDS_COMPAT, "the filesystem is not on NVMe (%s)",
                              chain.layers);
        } else {
            nvme_paths(sys, gpus, n, (const char(*)[16])chain.disk_bdf, chain.n_disks, r);
        }
    } else {
        f = gdu_report_add(r, "storage.block", "storage", GDU_ST_UNKNOWN,
                           "block device %u:%u: not found", m->major, m->minor);
        gdu_finding_evidence(f, "/sys/dev/block/%u:%u is missing", m->major, m->minor);
        gdu_finding_fix(f, "%s", how_to_get(sys));
        gdu_report_unknown(r, GDU_GDS_COMPAT,
                           "the block device %u:%u under %s is unknown (no /sys/dev/block/%u:%u): "
                           "whether it is on NVMe, and the PCIe path to it, are not known; %s",
                           m->major, m->minor, path, m->major, m->minor, how_to_get(sys));
    }
    return block;
}

/* storage.udev: whether udev's data names the volume, which cuFile needs
 * to register a file on it. */
static void udev_finding(const gdu_block *block, const gdu_mount *m, const char *top, gdu_report *r)
{
    bool udev = block != NULL && block->udev_fs_usage;
    gdu_finding *f =
        gdu_report_add(r, "storage.udev", "storage", udev ? GDU_ST_OK : GDU_ST_FAIL,
                       udev ? "udev identifies the volume (ID_FS_USAGE)"
                            : "cuFile cannot identify the volume: no udev ID_FS_USAGE");
    gdu_finding_evidence(f, "/run/udev/data/b%u:%u %s", m->major, m->minor,
                         udev ? "has E:ID_FS_USAGE" : "is missing or lacks E:ID_FS_USAGE");
    if (!udev) {
        gdu_finding_evidence(f, "cuFileHandleRegister then fails with "
                                "CU_FILE_HANDLE_NOT_REGISTERED (5027), \"udev property not "
                                "found: ID_FS_USAGE\", even in compat mode");
        gdu_finding_fix(f,
                        "run systemd-udevd (or 'udevadm trigger --action=add "
                        "/sys/class/block/%s') so that /run/udev/data is populated; in "
                        "containers bind-mount /run/udev from the host",
                        top);
        gdu_report_reason(r, GDU_GDS_IMPOSSIBLE,
                          "cuFile cannot register files on this filesystem (error 5027): "
                          "udev has no ID_FS_USAGE for %s (%u:%u)",
                          top, m->major, m->minor);
    }
}

static void path_storage(const gdu_snapshot *sys, const gdu_gpu_view *gpus, size_t n,
                         const char *path, gdu_report *r)
{
    const gdu_mount *m = gdu_mount_for_path(&sys->mounts, path);
    gdu_finding *f;
    if (m == NULL) {
        f = gdu_report_add(r, "storage.filesystem", "storage", GDU_ST_UNKNOWN,
                           "no mount found for %s", path);
        gdu_finding_evidence(f, sys->mounts.n ? "/proc/self/mountinfo has no entry covering it"
                                              : "/proc/self/mountinfo is missing or empty");
        gdu_report_unknown(r, GDU_GDS_IMPOSSIBLE,
                           "the filesystem under %s is unknown (no mount in /proc/self/mountinfo "
                           "covers it): %s",
                           path, how_to_get(sys));
        return;
    }
    char why[192];
    fs_class cls = classify_fs(m, why, sizeof why);
    f = gdu_report_add(r, "storage.filesystem", "storage",
                       cls == FS_COMPAT ? GDU_ST_FAIL : GDU_ST_OK, "%s is on %s (%s) mounted at %s",
                       path, m->fstype, m->source, m->mount_point);
    gdu_finding_evidence(f, "%s", why);
    gdu_finding_evidence(f, "mount options: %s; super options: %s", m->options, m->super_options);
    if (cls == FS_COMPAT) {
        gdu_finding_fix(
            f, "put the file on an ext4 (data=ordered) or xfs filesystem on an NVMe drive");
        gdu_report_reason(r, GDU_GDS_COMPAT, "%s", why);
    }
    const gdu_live_path *lp = gdu_live_path_find(&sys->live, path);
    if (lp != NULL && lp->fs_magic)
        gdu_finding_evidence(f, "statfs f_type 0x%llx", lp->fs_magic);

    /* A block device (not tmpfs, NFS, ...): what lies under it, and udev's data for it. */
    if (cls == FS_DIRECT_NETWORK || m->major == 0) {
        o_direct_finding(sys, m, path, lp, r);
        return;
    }
    char top[32];
    const gdu_block *block = block_finding(sys, gpus, n, m, path, top, r);
    udev_finding(block, m, top, r);
    o_direct_finding(sys, m, path, lp, r);
}

void gdu_doctor_rules_gds(const gdu_snapshot *sys, const gdu_gpu_view *gpus, size_t n_gpus,
                          const char *path, gdu_report *r)
{
    snprintf(r->gds_target, sizeof r->gds_target, "%s", path ? path : "any NVMe drive");
    if (!sys->driver.loaded) {
        gdu_report_reason(r, GDU_GDS_IMPOSSIBLE, "no NVIDIA driver is loaded");
        return;
    }
    if (n_gpus == 0)
        gdu_report_reason(r, GDU_GDS_IMPOSSIBLE, "no NVIDIA GPU found");
    gpu_kind_reasons(sys, gpus, n_gpus, r);
    bar1_notes(gpus, n_gpus, r);
    nvfs_findings(sys, r);
    cufile_findings(sys, r);
    iommu_finding(sys, r);
    if (path != NULL)
        path_storage(sys, gpus, n_gpus, path, r);
    else
        no_path_storage(sys, gpus, n_gpus, r);
    if (r->gds == GDU_GDS_COMPAT && sys->cufile.parsed && sys->cufile.allow_compat_mode == 0)
        gdu_report_reason(r, GDU_GDS_IMPOSSIBLE,
                          "allow_compat_mode is false in %s: where direct is impossible cuFile "
                          "returns errors instead of falling back",
                          sys->cufile.path);
    gdu_report_settle(r);
}
