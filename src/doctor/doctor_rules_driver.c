/* Findings about the NVIDIA driver, CUDA and each GPU. */
#include "doctor/doctor.h"

#include "util/units.h"

#include <stdio.h>
#include <string.h>

enum { MIN_DRIVER_MAJOR = 555 }; /* nvidia-fs's persistent pinning API, which the shim targets */

/* driver.version: new enough for the persistent pinning API the shim
 * targets (a GeForce needs the shim; others do not). */
static void version_finding(const gdu_driver *d, const char *version, bool any_geforce,
                            gdu_report *r)
{
    gdu_finding *f;
    int major = d->version.major;
    if (major == 0 && d->module_version[0])
        sscanf(d->module_version, "%d", &major);
    if (major > 0 && major < MIN_DRIVER_MAJOR) {
        f = gdu_report_add(r, "driver.version", "driver", any_geforce ? GDU_ST_FAIL : GDU_ST_WARN,
                           "driver %s is older than %d", version, MIN_DRIVER_MAJOR);
        gdu_finding_evidence(f,
                             "nvidia-fs uses the driver's persistent P2P pinning API from %d "
                             "on; the gdunlock shim targets that path",
                             MIN_DRIVER_MAJOR);
        if (!any_geforce)
            gdu_finding_evidence(f, "professional/datacenter GPUs do not need the shim: stock "
                                    "GDS works with this driver");
        gdu_finding_fix(f, "install driver %d or newer (open kernel module)", MIN_DRIVER_MAJOR);
    } else if (major > 0) {
        f = gdu_report_add(r, "driver.version", "driver", GDU_ST_OK, "driver %s is %d or newer",
                           version, MIN_DRIVER_MAJOR);
    }
}

/* driver.flavour: the open kernel module or the proprietary one. The
 * version line names the open module; the module's taint flags say "P"
 * for a proprietary license. */
static void flavour_finding(const gdu_driver *d, gdu_report *r)
{
    gdu_finding *f;
    bool taint_known = d->taint[0] != '\0';
    bool proprietary =
        d->version.version[0] ? !d->version.open_module : strchr(d->taint, 'P') != NULL;
    if (d->version.version[0] == '\0' && !taint_known) {
        f = gdu_report_add(r, "driver.flavour", "driver", GDU_ST_UNKNOWN,
                           "open or proprietary kernel module: unknown");
        gdu_finding_evidence(
            f, "/proc/driver/nvidia/version and /sys/module/nvidia/taint are unreadable");
    } else if (!proprietary) {
        f = gdu_report_add(r, "driver.flavour", "driver", GDU_ST_OK, "open kernel module");
    } else {
        f = gdu_report_add(r, "driver.flavour", "driver", GDU_ST_WARN, "proprietary kernel module");
        gdu_finding_evidence(f, "BAR1-P2P-patched drivers exist only as open kernel modules; "
                                "GeForce GSP-era features need the open module");
        gdu_finding_fix(
            f, "install the open kernel module flavour of the same driver "
               "(e.g. nvidia-driver-<ver>-open, or the .run installer with -m=kernel-open)");
    }
    if (d->version.version[0])
        gdu_finding_evidence(f, "the NVRM version line %s \"Open Kernel Module\"",
                             d->version.open_module ? "says" : "does not say");
    if (taint_known)
        gdu_finding_evidence(f, "/sys/module/nvidia/taint: %s (%s)", d->taint,
                             strchr(d->taint, 'P') ? "P: proprietary license"
                                                   : "no P: GPL-compatible license");
}

/* driver.gsp: which GPUs run the GSP firmware. */
static void gsp_finding(const gdu_driver *d, gdu_report *r)
{
    size_t gsp = 0;
    for (size_t i = 0; i < d->n_gpus; i++)
        if (d->gpus[i].firmware[0] && strcmp(d->gpus[i].firmware, "N/A") != 0)
            gsp++;
    if (d->n_gpus == 0)
        return;
    gdu_finding *f = gdu_report_add(r, "driver.gsp", "driver", GDU_ST_OK,
                                    "GSP firmware on %zu of %zu GPUs", gsp, d->n_gpus);
    for (size_t i = 0; i < d->n_gpus; i++)
        gdu_finding_evidence(f, "%s: GPU Firmware: %s", d->gpus[i].bdf,
                             d->gpus[i].firmware[0] ? d->gpus[i].firmware : "(not listed)");
}

/* any_geforce: some GPU is (or may be) a GeForce, which needs the shim. */
static void driver_findings(const gdu_snapshot *sys, bool any_geforce, gdu_report *r)
{
    const gdu_driver *d = &sys->driver;
    if (!d->loaded) {
        gdu_finding *f = gdu_report_add(r, "driver.loaded", "driver", GDU_ST_FAIL,
                                        "no NVIDIA kernel driver is loaded");
        gdu_finding_evidence(f, "/proc/driver/nvidia/version and /sys/module/nvidia are absent");
        gdu_finding_evidence(f, "without it no NVIDIA GPU can be used here: GPUDirect Storage "
                                "and P2P are impossible on this machine as it is");
        gdu_finding_fix(f,
                        "install the NVIDIA driver (open kernel module %d or newer) and load "
                        "it with 'modprobe nvidia'; on a machine without an NVIDIA GPU there "
                        "is nothing to fix",
                        MIN_DRIVER_MAJOR);
        return;
    }
    const char *version = d->version.version[0] ? d->version.version : d->module_version;
    gdu_finding *f =
        gdu_report_add(r, "driver.loaded", "driver", GDU_ST_OK, "NVIDIA driver %s is loaded",
                       version[0] ? version : "(version unknown)");
    if (d->module_version[0])
        gdu_finding_evidence(f, "/sys/module/nvidia/version: %s", d->module_version);
    if (d->version.version[0])
        gdu_finding_evidence(f, "/proc/driver/nvidia/version: %s%s", d->version.version,
                             d->version.open_module ? " (Open Kernel Module)" : "");

    version_finding(d, version, any_geforce, r);
    flavour_finding(d, r);
    gsp_finding(d, r);
    f = gdu_report_add(r, "driver.params", "driver", GDU_ST_OK, "driver parameters");
    if (d->enable_resizable_bar >= 0)
        gdu_finding_evidence(f, "EnableResizableBar: %d", d->enable_resizable_bar);
    else
        gdu_finding_evidence(f, "EnableResizableBar: not listed in /proc/driver/nvidia/params");
    gdu_finding_evidence(f, "RegistryDwords: \"%s\"", d->registry_dwords);
}

/* A replay's live answers: read, absent, or refused (with the field that was wrong). */
static void capture_finding(const gdu_snapshot *sys, gdu_report *r)
{
    gdu_finding *f;
    if (sys->live.origin == GDU_LIVE_CAPTURED) {
        f = gdu_report_add(r, "capture.live", "driver", GDU_ST_OK,
                           "live answers read from " GDU_LIVE_FILE);
        gdu_finding_evidence(f, "captured as user %d", sys->live.euid);
        return;
    }
    if (sys->live_error[0]) {
        f = gdu_report_add(r, "capture.live", "driver", GDU_ST_FAIL,
                           GDU_LIVE_FILE " is unusable: its answers are not used");
        gdu_finding_evidence(f, "%s", sys->live_error);
    } else {
        f = gdu_report_add(r, "capture.live", "driver", GDU_ST_UNKNOWN,
                           "no " GDU_LIVE_FILE ": the running driver's answers are unknown");
        gdu_finding_evidence(f, "CUDA's GPUs and peers, the RM's P2P caps, libcufile and O_DIRECT "
                                "come only from the live machine");
    }
    gdu_finding_fix(f, "capture the machine again with 'gdunlock doctor --capture DIR [PATH]' "
                       "(doctor writes " GDU_LIVE_FILE "; it is not meant to be edited)");
}

static void cuda_finding(const gdu_snapshot *sys, gdu_report *r)
{
    const gdu_live *l = &sys->live;
    gdu_finding *f;
    if (!sys->live_machine)
        capture_finding(sys, r);
    if (l->origin == GDU_LIVE_ABSENT) {
        f = gdu_report_add(r, "cuda.driver", "driver", GDU_ST_UNKNOWN, "CUDA's view: not captured");
        gdu_finding_evidence(
            f, "%s", sys->live_error[0] ? sys->live_error : "the sysroot has no " GDU_LIVE_FILE);
        gdu_finding_fix(f,
                        "capture the machine with 'gdunlock doctor --capture DIR' to include it");
        return;
    }
    if (!l->cuda_ok) {
        f = gdu_report_add(r, "cuda.driver", "driver", GDU_ST_FAIL, "libcuda cannot be used");
        gdu_finding_evidence(f, "%s", l->cuda_why);
        gdu_finding_fix(f, "install the NVIDIA driver's user-space libraries (libcuda.so.1) of "
                           "the same version as the kernel module");
        return;
    }
    f = gdu_report_add(r, "cuda.driver", "driver", GDU_ST_OK,
                       "CUDA driver API %d.%d sees %zu GPU(s)", l->cuda_version / 1000,
                       l->cuda_version % 1000 / 10, l->n_gpus);
    for (size_t i = 0; i < l->n_gpus; i++)
        gdu_finding_evidence(f, "CUDA device %d: %s at %s, compute %d.%d", l->gpus[i].ordinal,
                             l->gpus[i].name, l->gpus[i].bdf, l->gpus[i].cc_major,
                             l->gpus[i].cc_minor);
}

/* gpuN.bar1: how much of the GPU's memory its BAR1 window lets GPUDirect
 * pin at once, and what could widen it. */
static void bar1_finding(const gdu_gpu_view *g, gdu_report *r)
{
    char id[48], a[32], b[32];
    gdu_finding *f;
    snprintf(id, sizeof id, "gpu%d.bar1", g->index);
    if (g->bar1 == 0) {
        f = gdu_report_add(r, id, "gpu", GDU_ST_UNKNOWN, "GPU%d BAR1 size unknown", g->index);
        gdu_finding_evidence(f, "no resource file for %s", g->bdf);
    } else if (g->memory == 0) {
        f = gdu_report_add(r, id, "gpu", GDU_ST_UNKNOWN, "GPU%d BAR1 is %s; memory size unknown",
                           g->index, gdu_format_bytes(g->bar1, a, sizeof a));
        gdu_finding_evidence(f, "the memory size comes from CUDA, which was not asked");
    } else if (g->bar1 >= g->memory) {
        f = gdu_report_add(r, id, "gpu", GDU_ST_OK,
                           "GPU%d BAR1 %s covers all %s of memory: all of it can be pinned for "
                           "GPUDirect at once",
                           g->index, gdu_format_bytes(g->bar1, a, sizeof a),
                           gdu_format_bytes(g->memory, b, sizeof b));
    } else {
        f = gdu_report_add(r, id, "gpu", GDU_ST_WARN,
                           "GPU%d BAR1 is a %s window on %s of memory: at most that much (less "
                           "the driver's own use) can be pinned for GPUDirect at once",
                           g->index, gdu_format_bytes(g->bar1, a, sizeof a),
                           gdu_format_bytes(g->memory, b, sizeof b));
        gdu_finding_fix(f, "%s", GDU_FIX_REBAR);
    }
    if (g->pci && g->bar1 != 0) {
        int index;
        gdu_pci_bar1(g->pci->bar_size, &index);
        gdu_finding_evidence(f, "/sys/bus/pci/devices/%s/resource region %d: %s", g->bdf, index,
                             gdu_format_bytes(g->bar1, a, sizeof a));
        if (g->pci->rebar == GDU_CFG_UNKNOWN)
            gdu_finding_evidence(f, "Resizable BAR capability: unknown (extended config space "
                                    "needs root: run as root)");
        else if (g->pci->rebar == GDU_CFG_ABSENT || g->rebar_max == 0)
            gdu_finding_evidence(f, "Resizable BAR capability: none for BAR1");
        else
            gdu_finding_evidence(f, "Resizable BAR capability: BAR1 up to %s",
                                 gdu_format_bytes(g->rebar_max, a, sizeof a));
    }

    if (g->cuda != NULL && g->cuda->rm_bar1_known)
        gdu_finding_evidence(f,
                             "RM counts BAR1 %s, %s of it unused now: every process's nvidia-fs "
                             "pins, CPU mappings, USERD and the console take from it (doctor's "
                             "own CUDA context included)",
                             gdu_format_bytes(g->cuda->rm_bar1_total, a, sizeof a),
                             gdu_format_bytes(g->cuda->rm_bar1_available, b, sizeof b));
    else if (g->cuda != NULL && g->cuda->rm_bar1_why[0])
        gdu_finding_evidence(f, "RM's BAR1 figures: %s", g->cuda->rm_bar1_why);
}

/* gpuN.link: the PCIe link's generation and width against its maximum. */
static void link_finding(const gdu_gpu_view *g, gdu_report *r)
{
    char id[48];
    gdu_finding *f;
    snprintf(id, sizeof id, "gpu%d.link", g->index);
    if (g->pci == NULL || g->pci->cur_gen == 0 || g->pci->max_gen == 0) {
        f = gdu_report_add(r, id, "gpu", GDU_ST_UNKNOWN, "GPU%d PCIe link unknown", g->index);
        return;
    }
    const gdu_pci_dev *p = g->pci;
    gdu_status st = p->cur_width < p->max_width ? GDU_ST_WARN : GDU_ST_OK;
    f = gdu_report_add(r, id, "gpu", st, "GPU%d PCIe link Gen%d x%d (max Gen%d x%d)", g->index,
                       p->cur_gen, p->cur_width, p->max_gen, p->max_width);
    if (p->cur_gen < p->max_gen)
        gdu_finding_evidence(f, "a lower generation than the maximum is normal while the GPU is "
                                "idle (power saving); check again under load");
    if (st == GDU_ST_WARN)
        gdu_finding_fix(f,
                        "the link runs narrower than it can: reseat the card, use a full x%d "
                        "slot, check BIOS lane bifurcation",
                        p->max_width);
}

static void gpu_findings(const gdu_gpu_view *g, gdu_report *r)
{
    char id[48];
    const char *kind = g->geforce == GDU_TRI_YES  ? "GeForce"
                       : g->geforce == GDU_TRI_NO ? "professional/datacenter"
                                                  : "kind unknown";
    snprintf(id, sizeof id, "gpu%d.identity", g->index);
    gdu_finding *f = gdu_report_add(r, id, "gpu", GDU_ST_OK, "GPU%d %s: %s (%s)", g->index, g->bdf,
                                    g->name[0] ? g->name : "name unknown", kind);
    if (g->info && g->info->uuid[0])
        gdu_finding_evidence(f, "UUID %s", g->info->uuid);
    if (g->cuda)
        gdu_finding_evidence(f, "CUDA device %d, compute capability %d.%d", g->cuda->ordinal,
                             g->cuda->cc_major, g->cuda->cc_minor);

    bar1_finding(g, r);
    link_finding(g, r);
}

void gdu_doctor_rules_driver(const gdu_snapshot *sys, const gdu_gpu_view *gpus, size_t n_gpus,
                             gdu_report *r)
{
    bool any_geforce = n_gpus == 0;
    for (size_t i = 0; i < n_gpus; i++)
        any_geforce |= gpus[i].geforce != GDU_TRI_NO;
    driver_findings(sys, any_geforce, r);
    if (!sys->driver.loaded)
        return;
    cuda_finding(sys, r);
    if (n_gpus == 0) {
        gdu_finding *f = gdu_report_add(r, "gpu.count", "gpu", GDU_ST_FAIL,
                                        "no NVIDIA GPU found on the PCI bus");
        if (sys->pci_error[0])
            gdu_finding_evidence(f, "%s", sys->pci_error);
    } else if (sys->pci_error[0]) {
        gdu_finding *f = gdu_report_add(r, "pcie.scan", "pcie", GDU_ST_FAIL,
                                        "the PCI devices could not be read; the GPUs are the "
                                        "driver's list, without PCIe paths");
        gdu_finding_evidence(f, "%s", sys->pci_error);
    }
    for (size_t i = 0; i < n_gpus; i++)
        gpu_findings(&gpus[i], r);
}
