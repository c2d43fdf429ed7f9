/* cuFile's second direct path (CUDA 12.8 on): the kernel's PCI P2PDMA on
 * pages UVM makes of a static BAR1, no nvidia-fs. Every precondition by name
 * with its evidence and fix, from the snapshot (live or captured), then the
 * direct path cuFile would take here. Sources: open-gpu-kernel-modules
 * 580.142 (uvm_pmm_gpu.c:3462-3525 makes the pages only with
 * CONFIG_PCI_P2PDMA, off ARM64, for a static BAR1 that is not
 * write-combined; uvm_va_range_device_p2p.c:540-542 answers
 * UVM_ALLOC_DEVICE_P2P with NV_ERR_NOT_SUPPORTED for a GPU without them);
 * NVIDIA's GDS troubleshooting guide, "NVMe P2PDMA" (kernel 6.2 or newer,
 * open driver 565 or newer, NVMe multipath off, Ampere or newer datacenter
 * GPUs, use_pci_p2pdma in cufile.json). */
#include "doctor/doctor.h"

#include "util/units.h"

#include <stdio.h>
#include <string.h>

enum { MIN_MODULE = 565 };

typedef struct {
    int failed, unknown; /* preconditions that fail, that are unknown */
    char failing[256];   /* their names, for the direct path's why */
    char missing[256];
} tally;

static void add_name(char *list, size_t len, const char *name)
{
    size_t used = strlen(list);
    if (used < len)
        snprintf(list + used, len - used, "%s%s", used ? "; " : "", name);
}

/* One precondition's finding; st counted into t. */
static gdu_finding *precondition(gdu_report *r, tally *t, const char *id, const char *name,
                                 gdu_status st, const char *fix)
{
    gdu_finding *f = gdu_report_add(r, id, "p2pdma", st, "%s: %s", name,
                                    st == GDU_ST_OK     ? "yes"
                                    : st == GDU_ST_FAIL ? "no"
                                                        : "unknown");
    if (st == GDU_ST_FAIL) {
        t->failed++;
        add_name(t->failing, sizeof t->failing, name);
    } else if (st == GDU_ST_UNKNOWN) {
        t->unknown++;
        add_name(t->missing, sizeof t->missing, name);
    }
    if (st != GDU_ST_OK)
        gdu_finding_fix(f, "%s", fix);
    return f;
}

static void kernel_rules(const gdu_snapshot *sys, gdu_report *r, tally *t)
{
    const gdu_kernel *k = &sys->kernel;
    gdu_tri built = k->p2pdma;
    if (built == GDU_TRI_UNKNOWN && sys->live.kernel_p2pdma >= 0)
        built = gdu_tri_of(sys->live.kernel_p2pdma);
    gdu_finding *f = precondition(
        r, t, "p2pdma.kernel_config", "the kernel has PCI P2PDMA (CONFIG_PCI_P2PDMA)",
        built == GDU_TRI_YES  ? GDU_ST_OK
        : built == GDU_TRI_NO ? GDU_ST_FAIL
                              : GDU_ST_UNKNOWN,
        "boot a kernel built with CONFIG_PCI_P2PDMA=y (a build option: no module parameter or "
        "boot option turns it on)");
    if (k->p2pdma != GDU_TRI_UNKNOWN)
        gdu_finding_evidence(f, "%s: %s", k->config,
                             k->p2pdma == GDU_TRI_YES ? "CONFIG_PCI_P2PDMA=y"
                                                      : "# CONFIG_PCI_P2PDMA is not set");
    else
        gdu_finding_evidence(f, "%s",
                             k->config[0] ? "its configuration does not name it"
                                          : "no /boot/config-<release> to read");
    if (sys->live.kernel_p2pdma >= 0)
        gdu_finding_evidence(f, "/proc/kallsyms %s p2pdma_pgmap_ops",
                             sys->live.kernel_p2pdma ? "has" : "lacks");
    gdu_finding_evidence(f, "without it UVM makes no P2PDMA pages (uvm_pmm_gpu.c:3462-3466), and "
                            "UVM_ALLOC_DEVICE_P2P answers NV_ERR_NOT_SUPPORTED "
                            "(uvm_va_range_device_p2p.c:540-542)");

    bool recent = k->major > 6 || (k->major == 6 && k->minor >= 2);
    f = precondition(r, t, "p2pdma.kernel_version", "kernel 6.2 or newer",
                     k->major == 0 ? GDU_ST_UNKNOWN
                     : recent      ? GDU_ST_OK
                                   : GDU_ST_FAIL,
                     "boot Linux 6.2 or newer (NVIDIA's GDS documentation asks for it for "
                     "P2PDMA)");
    gdu_finding_evidence(f, "/proc/sys/kernel/osrelease: %s",
                         k->release[0] ? k->release : "(unreadable)");

    f = precondition(r, t, "p2pdma.nvme_multipath", "NVMe native multipath off",
                     k->nvme_multipath == GDU_TRI_NO    ? GDU_ST_OK
                     : k->nvme_multipath == GDU_TRI_YES ? GDU_ST_FAIL
                                                        : GDU_ST_UNKNOWN,
                     "add 'options nvme_core multipath=N' to /etc/modprobe.d/nvme.conf, rebuild "
                     "the initramfs and reboot (P2PDMA does not work with native multipath)");
    gdu_finding_evidence(f, "/sys/module/nvme_core/parameters/multipath: %s",
                         k->nvme_multipath == GDU_TRI_YES  ? "Y"
                         : k->nvme_multipath == GDU_TRI_NO ? "N"
                                                           : "unreadable (nvme_core not loaded?)");
}

static void driver_rule(const gdu_snapshot *sys, gdu_report *r, tally *t)
{
    const gdu_driver *d = &sys->driver;
    int major = d->version.major;
    if (major == 0 && d->module_version[0])
        sscanf(d->module_version, "%d", &major);
    bool known = major > 0 && d->version.version[0];
    bool ok = known && d->version.open_module && major >= MIN_MODULE;
    gdu_finding *f = precondition(
        r, t, "p2pdma.driver", "the open kernel module, 565 or newer",
        !known ? GDU_ST_UNKNOWN
        : ok   ? GDU_ST_OK
               : GDU_ST_FAIL,
        "install the open kernel module flavour of driver 565 or newer (its UVM makes the "
        "P2PDMA pages)");
    gdu_finding_evidence(f, "driver %s, %s", d->version.version[0] ? d->version.version : "?",
                         !d->version.version[0]   ? "flavour unknown"
                         : d->version.open_module ? "open kernel module"
                                                  : "proprietary kernel module");
}

/* p2pdma.gpuN.kind: a GPU libcufile offers P2PDMA on (an Ampere or newer
 * datacenter one). */
static void kind_rule(const gdu_gpu_view *g, gdu_report *r, tally *t)
{
    char id[64], name[96];
    int cc = g->cuda ? g->cuda->cc_major : 0;
    snprintf(id, sizeof id, "p2pdma.gpu%d.kind", g->index);
    snprintf(name, sizeof name, "GPU%d is one libcufile offers P2PDMA on", g->index);
    gdu_status st = g->geforce == GDU_TRI_YES  ? GDU_ST_FAIL
                    : g->geforce == GDU_TRI_NO ? (cc == 0   ? GDU_ST_UNKNOWN
                                                  : cc >= 8 ? GDU_ST_OK
                                                            : GDU_ST_FAIL)
                                               : GDU_ST_UNKNOWN;
    gdu_finding *f = precondition(r, t, id, name, st,
                                  "P2PDMA needs an Ampere or newer datacenter GPU; on this one "
                                  "use the nvidia-fs path");
    gdu_finding_evidence(f,
                         "%s, compute %d.x; NVIDIA lists A100, A40, L4, L40S, H100, H200, "
                         "B100, B200, B300, and libcufile checks each GPU in user space "
                         "(\"gpu attribute pci_p2pdma not supported\")",
                         g->name[0] ? g->name : "name unknown", cc);
}

/* p2pdma.gpuN.static_bar1: BAR1 maps all of the GPU's memory at once. */
static void static_bar1_rule(const gdu_snapshot *sys, const gdu_gpu_view *g, gdu_report *r,
                             tally *t)
{
    char id[64], name[96], a[32], b[32];
    unsigned long key;
    gdu_status st;
    const gdu_live_gpu *l = g->cuda;
    snprintf(id, sizeof id, "p2pdma.gpu%d.static_bar1", g->index);
    snprintf(name, sizeof name, "GPU%d's BAR1 maps all its memory at once (static BAR1)", g->index);
    if (l != NULL && l->rm_static_known) {
        bool covers = l->rm_static_bar1 && (g->memory == 0 || l->rm_static_size >= g->memory);
        st = l->rm_static_bar1 && covers ? GDU_ST_OK : GDU_ST_FAIL;
    } else {
        /* Without RM's answer: a BAR1 smaller than memory cannot be static. */
        st = g->bar1 != 0 && g->memory != 0 && g->bar1 < g->memory ? GDU_ST_FAIL : GDU_ST_UNKNOWN;
    }
    gdu_finding *f =
        precondition(r, t, id, name, st,
                     "enable Resizable BAR so that BAR1 covers video memory, and load nvidia "
                     "with NVreg_RegistryDwords=\"RMForceStaticBar1=1\"");
    if (l != NULL && l->rm_static_known)
        gdu_finding_evidence(f, "RM: static BAR1 %s%s%s", l->rm_static_bar1 ? "on, " : "off",
                             l->rm_static_bar1 ? gdu_format_bytes(l->rm_static_size, a, sizeof a)
                                               : "",
                             l->rm_static_bar1 ? " mapped" : "");
    else
        gdu_finding_evidence(f, "RM's answer (NV2080_CTRL_CMD_FB_GET_STATIC_BAR1_INFO) is not in "
                                "the snapshot");
    if (g->bar1 != 0)
        gdu_finding_evidence(f, "BAR1 %s, memory %s", gdu_format_bytes(g->bar1, a, sizeof a),
                             g->memory ? gdu_format_bytes(g->memory, b, sizeof b) : "unknown");
    if (gdu_registry_dword(sys->driver.registry_dwords, "RMForceStaticBar1", &key) == 0)
        gdu_finding_evidence(f, "NVreg_RegistryDwords sets RMForceStaticBar1=%lu", key);
}

/* p2pdma.gpuN.write_combining: the static BAR1 mapped uncached, as the
 * kernel needs for P2PDMA pages. */
static void write_combining_rule(const gdu_snapshot *sys, const gdu_gpu_view *g, gdu_report *r,
                                 tally *t)
{
    char id[64], name[96];
    unsigned long key;
    gdu_status st;
    const gdu_live_gpu *l = g->cuda;
    snprintf(id, sizeof id, "p2pdma.gpu%d.write_combining", g->index);
    snprintf(name, sizeof name, "GPU%d's static BAR1 not write-combined", g->index);
    bool wc_key =
        gdu_registry_dword(sys->driver.registry_dwords, "RmForceDisableIomapWC", &key) == 0 &&
        key == 1;
    st = l != NULL && l->rm_static_known ? (l->rm_static_wc ? GDU_ST_FAIL : GDU_ST_OK)
         : wc_key                        ? GDU_ST_OK
                                         : GDU_ST_UNKNOWN;
    gdu_finding *f =
        precondition(r, t, id, name, st,
                     "load nvidia with NVreg_RegistryDwords=\"RmForceDisableIomapWC=1\" (the "
                     "kernel makes P2PDMA pages only of an uncached BAR)");
    if (l != NULL && l->rm_static_known)
        gdu_finding_evidence(f, "RM: BAR1 mapped %s",
                             l->rm_static_wc ? "write-combined" : "uncached");
    gdu_finding_evidence(f,
                         "NVreg_RegistryDwords %s RmForceDisableIomapWC=1 (without it, or a "
                         "chipset rule, RM maps write-combined: chipset.c:83-87)",
                         wc_key ? "sets" : "does not set");
}

static void gpu_rules(const gdu_snapshot *sys, const gdu_gpu_view *g, gdu_report *r, tally *t)
{
    kind_rule(g, r, t);
    static_bar1_rule(sys, g, r, t);
    write_combining_rule(sys, g, r, t);
}

static void cufile_rule(const gdu_snapshot *sys, gdu_report *r, tally *t)
{
    const gdu_cufile_config *c = &sys->cufile;
    gdu_status st = !c->found                ? GDU_ST_FAIL
                    : !c->parsed             ? GDU_ST_UNKNOWN
                    : c->use_pci_p2pdma == 1 ? GDU_ST_OK
                                             : GDU_ST_FAIL;
    gdu_finding *f = precondition(r, t, "p2pdma.cufile_json", "cufile.json asks for P2PDMA", st,
                                  "set \"use_pci_p2pdma\": true under \"properties\" in "
                                  "cufile.json");
    gdu_finding_evidence(f, "%s: %s", c->path,
                         !c->found                ? "missing"
                         : !c->parsed             ? "unreadable"
                         : c->use_pci_p2pdma == 1 ? "use_pci_p2pdma true"
                         : c->use_pci_p2pdma == 0 ? "use_pci_p2pdma false"
                                                  : "use_pci_p2pdma not set (off)");
}

gdu_direct_path gdu_doctor_rules_p2pdma(const gdu_snapshot *sys, const gdu_gpu_view *gpus,
                                        size_t n_gpus, gdu_report *r)
{
    tally t = {0};
    kernel_rules(sys, r, &t);
    driver_rule(sys, r, &t);
    for (size_t i = 0; i < n_gpus; i++)
        gpu_rules(sys, &gpus[i], r, &t);
    cufile_rule(sys, r, &t);
    bool nvfs = sys->driver.nvfs_loaded;
    gdu_direct_path p;
    char *why = r->direct_path_why;
    size_t len = sizeof r->direct_path_why;
    if (n_gpus > 0 && t.failed == 0 && t.unknown == 0) {
        p = GDU_PATH_P2PDMA;
        snprintf(why, len,
                 "cufile.json asks for the kernel's PCI P2PDMA and every precondition "
                 "holds%s",
                 nvfs ? " (nvidia-fs is loaded too)" : ": nvidia-fs is not needed");
    } else if (nvfs) {
        p = GDU_PATH_NVIDIA_FS;
        snprintf(why, len, "nvidia-fs is loaded; P2PDMA %s: %s",
                 t.failed ? "cannot be used, unmet" : "is not confirmed, not known",
                 t.failed ? t.failing : t.missing);
    } else if (t.failed == 0 && n_gpus > 0) {
        p = GDU_PATH_UNDECIDED;
        snprintf(why, len, "nvidia-fs is not loaded, and P2PDMA is not confirmed, not known: %s",
                 t.missing);
    } else {
        p = GDU_PATH_NONE;
        snprintf(why, len, "nvidia-fs is not loaded, and P2PDMA cannot be used, unmet: %s",
                 n_gpus ? t.failing : "an NVIDIA GPU");
    }
    r->direct_path = p;
    gdu_finding *f = gdu_report_add(r, "cufile.direct_path", "cufile",
                                    p == GDU_PATH_NONE        ? GDU_ST_FAIL
                                    : p == GDU_PATH_UNDECIDED ? GDU_ST_UNKNOWN
                                                              : GDU_ST_OK,
                                    "cuFile's direct path here: %s",
                                    p == GDU_PATH_NVIDIA_FS ? "nvidia-fs"
                                    : p == GDU_PATH_P2PDMA  ? "the kernel's PCI P2PDMA"
                                    : p == GDU_PATH_NONE    ? "neither (compat only)"
                                                            : "unknown");
    gdu_finding_evidence(f, "%s", why);
    return p;
}
