#include "unlockplan/unlock_plan.h"

#include "util/units.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Versions where NVIDIA's open module changed what GB20x needs (the open
 * module's tags; docs/p2p-unlock-edits.md names the same): 570.86.15 binds
 * GB202-GB207 to the Hopper BAR1-P2P implementation
 * (src/nvidia/generated/g_kern_bus_nvoc.c), chosen by RMForceP2PType=2;
 * 575.51.02 moves that choice to the RMPcieP2PType key
 * (src/nvidia/src/kernel/gpu/bif/kernel_bif.c); 590.44.01 makes BAR1 P2P
 * their default (PDB_PROP_KBUS_SUPPORT_BAR1_P2P_BY_DEFAULT,
 * g_kern_bus_nvoc.c). */
#define GB20X_BAR1_CODE "570.86.15"
#define GB20X_REGKEY "575.51.02"
#define GB20X_DEFAULT "590.44.01"

#define CMD_CHECK "gdunlock p2p unlock --check"
#define CMD_BUILD "gdunlock p2p unlock --build --out DIR"
#define CMD_INSTALL_PATCHED "sudo gdunlock p2p unlock --install --out DIR"
#define CMD_INSTALL_KEYS "sudo gdunlock p2p unlock --install"

gdu_chip_family gdu_chip_family_of(int cc_major, int cc_minor)
{
    if (cc_major <= 0)
        return GDU_CHIP_UNKNOWN;
    if (cc_major < 7 || (cc_major == 7 && cc_minor < 5))
        return GDU_CHIP_PRE_TURING;
    if (cc_major == 7)
        return GDU_CHIP_TURING;
    if (cc_major == 8)
        return cc_minor == 9 ? GDU_CHIP_ADA : GDU_CHIP_AMPERE;
    if (cc_major == 9)
        return GDU_CHIP_HOPPER;
    if (cc_major == 10 || cc_major == 11)
        return GDU_CHIP_BLACKWELL;
    if (cc_major == 12)
        return GDU_CHIP_BLACKWELL_CONSUMER;
    return GDU_CHIP_UNKNOWN; /* newer than this table */
}

const char *gdu_chip_family_name(gdu_chip_family f)
{
    static const char *const names[] = {
        [GDU_CHIP_UNKNOWN] = "unknown",
        [GDU_CHIP_PRE_TURING] = "pre-Turing",
        [GDU_CHIP_TURING] = "Turing",
        [GDU_CHIP_AMPERE] = "Ampere",
        [GDU_CHIP_ADA] = "Ada",
        [GDU_CHIP_HOPPER] = "Hopper",
        [GDU_CHIP_BLACKWELL] = "Blackwell",
        [GDU_CHIP_BLACKWELL_CONSUMER] = "Blackwell (GB20x)",
    };
    return (unsigned)f < sizeof names / sizeof names[0] ? names[f] : "unknown";
}

const char *gdu_unlock_plan_id(gdu_unlock_plan p)
{
    static const char *const ids[] = {"nothing", "registry_keys", "patched_module", "impossible",
                                      "unknown"};
    return (unsigned)p < sizeof ids / sizeof ids[0] ? ids[p] : "unknown";
}

const char *gdu_unlock_plan_name(gdu_unlock_plan p)
{
    static const char *const names[] = {"nothing to do", "registry keys only", "patched module",
                                        "impossible here", "unknown"};
    return (unsigned)p < sizeof names / sizeof names[0] ? names[p] : "unknown";
}

/* "580.95.05" -> {580, 95, 5}; fewer parts are 0. Returns the parts read. */
static int version_parts(const char *v, long out[3])
{
    int n = 0;
    out[0] = out[1] = out[2] = 0;
    while (v != NULL && n < 3 && *v >= '0' && *v <= '9') {
        char *end;
        out[n++] = strtol(v, &end, 10);
        if (*end != '.')
            break;
        v = end + 1;
    }
    return n;
}

int gdu_driver_version_cmp(const char *a, const char *b)
{
    long pa[3], pb[3];
    int na = version_parts(a, pa), nb = version_parts(b, pb);
    if (na == 0 || nb == 0)
        return na - nb;
    for (int i = 0; i < 3; i++)
        if (pa[i] != pb[i])
            return pa[i] < pb[i] ? -1 : 1;
    return 0;
}

__attribute__((format(printf, 3, 4))) static void say(char *out, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, len, fmt, ap);
    va_end(ap);
}

gdu_unlock_plan gdu_unlock_module_plan(gdu_chip_family family, const char *version, char *why,
                                       size_t why_len)
{
    long parts[3];
    if (version == NULL || version_parts(version, parts) < 2) {
        say(why, why_len, "the driver version is unknown");
        return GDU_UNLOCK_UNKNOWN;
    }
    switch (family) {
    case GDU_CHIP_PRE_TURING:
        say(why, why_len, "the open module supports Turing and later GPUs only");
        return GDU_UNLOCK_IMPOSSIBLE;
    case GDU_CHIP_TURING:
    case GDU_CHIP_AMPERE:
    case GDU_CHIP_ADA:
        if (gdu_driver_version_cmp(version, GDU_UNLOCK_OLDEST_VERSION) < 0) {
            say(why, why_len,
                "driver %s is older than the oldest release the edits know "
                "(" GDU_UNLOCK_OLDEST_VERSION ")",
                version);
            return GDU_UNLOCK_IMPOSSIBLE;
        }
        say(why, why_len,
            "driver %s has no BAR1 P2P for %s GPUs (its HAL binds the BAR1 P2P functions to "
            "stubs): the open module needs gdunlock's edits%s",
            version, gdu_chip_family_name(family),
            parts[0] > GDU_UNLOCK_NEWEST_MAJOR
                ? " (a release newer than those the edits were checked on: the build stops and "
                  "names any edit that does not apply)"
                : "");
        return GDU_UNLOCK_PATCHED;
    case GDU_CHIP_BLACKWELL_CONSUMER:
        if (gdu_driver_version_cmp(version, GB20X_BAR1_CODE) < 0) {
            say(why, why_len,
                "driver %s predates GB20x support (" GB20X_BAR1_CODE
                " bound GB20x to the BAR1 P2P code)",
                version);
            return GDU_UNLOCK_IMPOSSIBLE;
        }
        if (gdu_driver_version_cmp(version, GB20X_DEFAULT) < 0) {
            say(why, why_len,
                "driver %s has BAR1 P2P for GB20x behind registry keys (%s; the default "
                "from " GB20X_DEFAULT ")",
                version, gdu_unlock_registry_dwords(version));
            return GDU_UNLOCK_REGKEYS;
        }
        say(why, why_len, "driver %s makes BAR1 P2P the default for GB20x", version);
        return GDU_UNLOCK_NOTHING;
    case GDU_CHIP_HOPPER:
    case GDU_CHIP_BLACKWELL:
        say(why, why_len, "the stock driver has BAR1 P2P for %s GPUs",
            gdu_chip_family_name(family));
        return GDU_UNLOCK_NOTHING;
    default:
        say(why, why_len, "the chip family is unknown (no CUDA answer for its compute capability)");
        return GDU_UNLOCK_UNKNOWN;
    }
}

const char *gdu_unlock_registry_dwords(const char *version)
{
    return gdu_driver_version_cmp(version, GB20X_REGKEY) < 0 ? "RMForceP2PType=2"
                                                             : "RMForceP2PType=1;RMPcieP2PType=1";
}

__attribute__((format(printf, 3, 4))) static void block(gdu_unlock_notes *n, const char *fix,
                                                        const char *fmt, ...)
{
    if (n->n == GDU_UNLOCK_MAX_NOTES)
        return;
    gdu_unlock_note *note = &n->note[n->n++];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(note->fact, sizeof note->fact, fmt, ap);
    va_end(ap);
    snprintf(note->fix, sizeof note->fix, "%s", fix);
}

/* Adds from's notes to to, each fact once. */
static void merge(gdu_unlock_notes *to, const gdu_unlock_notes *from)
{
    for (size_t i = 0; i < from->n; i++) {
        size_t k = 0;
        while (k < to->n && strcmp(to->note[k].fact, from->note[i].fact) != 0)
            k++;
        if (k == to->n && to->n < GDU_UNLOCK_MAX_NOTES)
            to->note[to->n++] = from->note[i];
    }
}

/* The plan that asks most of the machine: impossible beats unknown beats a
 * patched module beats registry keys beats nothing. */
static gdu_unlock_plan stronger(gdu_unlock_plan a, gdu_unlock_plan b)
{
    static const int rank[] = {[GDU_UNLOCK_NOTHING] = 0,
                               [GDU_UNLOCK_REGKEYS] = 1,
                               [GDU_UNLOCK_PATCHED] = 2,
                               [GDU_UNLOCK_UNKNOWN] = 3,
                               [GDU_UNLOCK_IMPOSSIBLE] = 4};
    return rank[a] >= rank[b] ? a : b;
}

#define FIX_OPEN_MODULE                                                                            \
    "install NVIDIA's open kernel module of the same version (Debian: nvidia-open-kernel-dkms; "   \
    "Ubuntu: nvidia-driver-VER-open; the .run installer: -m=kernel-open) and reboot"
#define FIX_BAR1                                                                                   \
    "enable Above 4G Decoding and Resizable BAR in the BIOS (update the BIOS if it lacks them), "  \
    "then check that BAR1 covers video memory ('gdunlock doctor')"
#define FIX_DISPLAY                                                                                \
    "drive the display from another GPU or the integrated graphics, or run this GPU headless "     \
    "(no monitor, no framebuffer console on it)"

/* Facts of the machine that block any module change for every GPU. */
static void judge_driver(const gdu_snapshot *s, gdu_unlock_check *c)
{
    if (!c->driver_loaded)
        block(
            &c->blockers,
            "install NVIDIA's open kernel module (Turing or later) and load it, then run " CMD_CHECK
            " again",
            "no NVIDIA kernel module is loaded: the version to build for is unknown");
    else if (c->open_module == GDU_TRI_NO)
        block(&c->blockers, FIX_OPEN_MODULE,
              "the loaded module is NVIDIA's proprietary one (%s): its core is closed and "
              "cannot be edited",
              c->version[0] ? c->version : s->driver.version.version);
}

static void judge_gpu(const gdu_snapshot *s, const gdu_gpu_view *v, gdu_unlock_check *c,
                      gdu_unlock_gpu *g)
{
    g->index = v->index;
    snprintf(g->bdf, sizeof g->bdf, "%s", v->bdf);
    snprintf(g->name, sizeof g->name, "%s", v->name ? v->name : "");
    g->geforce = v->geforce;
    g->cc_major = v->cuda ? v->cuda->cc_major : 0;
    g->cc_minor = v->cuda ? v->cuda->cc_minor : 0;
    g->family = gdu_chip_family_of(g->cc_major, g->cc_minor);
    g->bar1 = v->bar1;
    g->memory = v->memory;
    g->rebar_max = v->rebar_max;
    const gdu_display *d = gdu_module_env_display(&s->module_env, v->bdf);
    if (d != NULL)
        snprintf(g->display, sizeof g->display, "%s", d->connector);

    if (g->geforce == GDU_TRI_NO) {
        g->plan = GDU_UNLOCK_NOTHING;
        say(g->why, sizeof g->why,
            "not a GeForce: the stock driver has no SKU lock on its P2P (mailbox or BAR1, or "
            "NVLink where fitted)");
        return;
    }
    if (g->geforce == GDU_TRI_UNKNOWN) {
        g->plan = GDU_UNLOCK_UNKNOWN;
        say(g->why, sizeof g->why, "the GPU's name is unknown (no driver or CUDA answer)");
        return;
    }
    g->plan = gdu_unlock_module_plan(g->family, c->version, g->why, sizeof g->why);
    if (g->plan == GDU_UNLOCK_IMPOSSIBLE)
        block(&g->blockers,
              g->family == GDU_CHIP_PRE_TURING
                  ? "none in software for this GPU: P2P on GeForce needs Turing or later"
                  : "install the open module of a driver release from " GDU_UNLOCK_OLDEST_VERSION
                    " on, then run " CMD_CHECK,
              "%s (%s): %s", g->bdf, gdu_chip_family_name(g->family), g->why);
    if (g->plan == GDU_UNLOCK_PATCHED && c->open_module != GDU_TRI_YES) {
        g->plan = GDU_UNLOCK_IMPOSSIBLE; /* judge_driver named why */
        return;
    }
    /* BAR1 P2P, patched or not, maps all video memory through BAR1 at once
     * (static BAR1): BAR1 must cover it and nothing may sit before it. */
    char bar1[32], mem[32], offer[32];
    if (g->bar1 != 0 && g->memory != 0 && g->bar1 < g->memory)
        block(&g->blockers, FIX_BAR1,
              "%s: BAR1 is %s but video memory is %s (Resizable BAR is off%s%s)", g->bdf,
              gdu_format_bytes(g->bar1, bar1, sizeof bar1),
              gdu_format_bytes(g->memory, mem, sizeof mem),
              g->rebar_max ? "; the GPU offers up to " : "",
              g->rebar_max ? gdu_format_bytes(g->rebar_max, offer, sizeof offer) : "");
    if (g->display[0])
        block(&g->blockers, FIX_DISPLAY,
              "%s drives a display (%s connected): a framebuffer console holds memory at the "
              "start of the static BAR1 mapping that BAR1 P2P needs",
              g->bdf, g->display);
    if (g->blockers.n > 0 && g->plan != GDU_UNLOCK_NOTHING)
        g->plan = GDU_UNLOCK_IMPOSSIBLE;
}

static void root_complex(const gdu_pci_dev *d, char *out, size_t len)
{
    const char *p = d ? strstr(d->path, "/pci") : NULL;
    size_t n = p ? strcspn(p + 1, "/") : 0;
    snprintf(out, len, "%.*s", (int)(n < len ? n : len - 1), p ? p + 1 : "");
}

static const char *link_words(gdu_p2p_link link)
{
    switch (link) {
    case GDU_P2P_LINK_NVLINK:
    case GDU_P2P_LINK_NVLINK_INDIRECT:
        return "NVLink";
    case GDU_P2P_LINK_C2C:
        return "C2C";
    case GDU_P2P_LINK_PCIE_BAR1:
        return "PCIe BAR1";
    case GDU_P2P_LINK_PCIE_MAILBOX:
        return "PCIe (mailbox)";
    default:
        return "a path the driver does not name";
    }
}

/* What on the path between the pair blocks P2P whatever the module does:
 * different CPU sockets, ACS redirecting peer requests, a translating
 * IOMMU. */
static void path_blockers(gdu_unlock_pair *p)
{
    if (p->path.kind == GDU_PATH_SYS)
        block(&p->blockers,
              "put both GPUs in slots of one CPU socket (ideally behind one PCIe switch)",
              "GPU%d and GPU%d hang off different CPU sockets (%s, %s): PCIe P2P does not cross "
              "the socket interconnect",
              p->a, p->b, p->root_a, p->root_b);
    if (p->acs_redirect == GDU_TRI_YES)
        block(&p->blockers,
              "disable ACS in the BIOS, or clear the ACS control bits of those bridges at each "
              "boot (setpci ECAP_ACS+6.w=0)",
              "ACS on %s redirects peer requests between GPU%d and GPU%d to the root complex",
              p->acs_bridges, p->a, p->b);
    if (p->iommu == GDU_P2P_IOMMU_TRANSLATED)
        block(&p->blockers,
              "boot with iommu=pt (intel_iommu=on iommu=pt or amd_iommu=on iommu=pt), or turn "
              "the IOMMU off",
              "the IOMMU translates the GPUs' DMA (DMA domain): the peer's BAR is not mapped for "
              "the other GPU");
}

static void judge_pair(const gdu_snapshot *s, const gdu_gpu_view *va, const gdu_gpu_view *vb,
                       const gdu_unlock_gpu *ga, const gdu_unlock_gpu *gb, gdu_unlock_pair *p)
{
    gdu_p2p_facts f;
    gdu_pair_facts(s, va, vb, &f, &p->path);
    p->a = ga->index;
    p->b = gb->index;
    root_complex(va->pci, p->root_a, sizeof p->root_a);
    root_complex(vb->pci, p->root_b, sizeof p->root_b);
    p->acs_redirect =
        va->pci && vb->pci
            ? gdu_pci_path_acs_redirect(&s->pci, &p->path, p->acs_bridges, sizeof p->acs_bridges)
            : GDU_TRI_UNKNOWN;
    p->iommu = f.iommu;
    bool rm_allows = f.rm_caps_known && gdu_p2p_caps_allowed(&f.rm);
    p->works = f.cuda_can_access == GDU_TRI_YES || rm_allows        ? GDU_TRI_YES
               : f.cuda_can_access == GDU_TRI_NO || f.rm_caps_known ? GDU_TRI_NO
                                                                    : GDU_TRI_UNKNOWN;
    if (p->works == GDU_TRI_YES) {
        p->link = link_words(f.rm_caps_known ? gdu_p2p_caps_link(f.rm.caps) : GDU_P2P_LINK_UNKNOWN);
        /* Without the RM's caps, CUDA's native peer atomics still tell NVLink
         * (CUDA offers them over NVLink only, as p2p_reason.c infers). */
        if (!f.rm_caps_known && f.native_atomics == GDU_TRI_YES)
            p->link = "NVLink (inferred: CUDA reports native peer atomics)";
        p->plan = GDU_UNLOCK_NOTHING;
        say(p->why, sizeof p->why, "P2P works already, over %s", p->link);
        return;
    }
    merge(&p->blockers, &ga->blockers);
    merge(&p->blockers, &gb->blockers);
    path_blockers(p);
    gdu_unlock_plan base = stronger(ga->plan, gb->plan);
    if (p->blockers.n > 0) {
        p->plan = GDU_UNLOCK_IMPOSSIBLE;
        say(p->why, sizeof p->why, "%s", p->blockers.note[0].fact);
    } else if (base == GDU_UNLOCK_NOTHING && p->works == GDU_TRI_NO) {
        p->plan = GDU_UNLOCK_NOTHING;
        say(p->why, sizeof p->why,
            "the module needs no change (%s); the refusal has another cause: 'gdunlock doctor' "
            "names it",
            ga->plan == GDU_UNLOCK_NOTHING ? ga->why : gb->why);
    } else {
        p->plan = base;
        say(p->why, sizeof p->why, "%s",
            stronger(ga->plan, gb->plan) == ga->plan ? ga->why : gb->why);
    }
    if (p->path.kind == GDU_PATH_NODE && p->plan != GDU_UNLOCK_IMPOSSIBLE) {
        size_t n = strlen(p->why);
        say(p->why + n, sizeof p->why - n,
            "; the GPUs hang off different root complexes (%s, %s): the CPU must forward peer "
            "traffic between them",
            p->root_a, p->root_b);
    }
}

/* What building and installing a patched module needs from the machine. */
static void judge_build_needs(const gdu_snapshot *s, gdu_unlock_check *c)
{
    const gdu_module_env *e = &s->module_env;
    if (e->has_headers != GDU_TRI_YES)
        block(&c->missing,
              "install the headers of the running kernel (Debian/Ubuntu: apt-get install "
              "linux-headers-$(uname -r); Fedora: dnf install kernel-devel-$(uname -r))",
              "kernel headers: %s",
              e->has_headers == GDU_TRI_NO ? "none for the running kernel (no /lib/modules/"
                                             "RELEASE/build)"
                                           : "unknown (the kernel release was not read)");
    if (!e->dkms[0])
        block(&c->missing, "install DKMS (apt-get install dkms; dnf install dkms)",
              "DKMS: not found (it rebuilds the module for each new kernel)");
    if (!e->cc[0] || !e->make[0])
        block(&c->missing,
              "install a C compiler and make (apt-get install build-essential; dnf install gcc "
              "make)",
              "compiler: %s%s%s", e->cc[0] ? "" : "no cc/gcc", !e->cc[0] && !e->make[0] ? ", " : "",
              e->make[0] ? "" : "no make");
    if (e->secure_boot == GDU_TRI_YES && e->signing_key != GDU_TRI_YES)
        block(&c->missing,
              "create DKMS's signing key (dkms generate_mok), enroll it (mokutil "
              "--import " GDU_DKMS_MOK_CERT
              "), reboot and confirm it in the MOK manager; or turn Secure Boot off",
              "Secure Boot is on and DKMS has no signing key (" GDU_DKMS_MOK_KEY
              "): the kernel would refuse an unsigned module");
}

static void machine_plan(gdu_unlock_check *c)
{
    gdu_unlock_plan plan = GDU_UNLOCK_NOTHING;
    const char *why = NULL;
    if (c->n_pairs > 0) {
        for (size_t i = 0; i < c->n_pairs; i++) {
            merge(&c->blockers, &c->pairs[i].blockers);
            if (stronger(c->pairs[i].plan, plan) != plan || why == NULL) {
                plan = stronger(c->pairs[i].plan, plan);
                why = c->pairs[i].why;
            }
        }
    } else {
        for (size_t i = 0; i < c->n_gpus; i++) {
            merge(&c->blockers, &c->gpus[i].blockers);
            if (stronger(c->gpus[i].plan, plan) != plan || why == NULL) {
                plan = stronger(c->gpus[i].plan, plan);
                why = c->gpus[i].why;
            }
        }
    }
    if (c->n_gpus == 0) {
        c->plan = c->blockers.n > 0 ? GDU_UNLOCK_IMPOSSIBLE : GDU_UNLOCK_UNKNOWN;
        say(c->why, sizeof c->why, "%s",
            c->blockers.n > 0 ? c->blockers.note[0].fact : "no NVIDIA GPU was found");
        return;
    }
    c->plan = c->blockers.n > 0 && plan != GDU_UNLOCK_NOTHING ? GDU_UNLOCK_IMPOSSIBLE : plan;
    say(c->why, sizeof c->why, "%s%s", why ? why : "",
        c->n_gpus == 1 ? " (one GPU: P2P needs a second)" : "");
    if (c->plan == GDU_UNLOCK_REGKEYS)
        snprintf(c->registry_dwords, sizeof c->registry_dwords, "%s",
                 gdu_unlock_registry_dwords(c->version));
    if (c->plan == GDU_UNLOCK_PATCHED)
        say(c->next, sizeof c->next, "%s, then %s", CMD_BUILD, CMD_INSTALL_PATCHED);
    else if (c->plan == GDU_UNLOCK_REGKEYS)
        say(c->next, sizeof c->next, "%s", CMD_INSTALL_KEYS);
}

void gdu_unlock_check_run(const gdu_snapshot *s, gdu_unlock_check *c)
{
    memset(c, 0, sizeof *c);
    c->live = s->live_machine;
    c->driver_loaded = s->driver.loaded;
    snprintf(c->version, sizeof c->version, "%s",
             s->driver.module_version[0] ? s->driver.module_version : s->driver.version.version);
    c->open_module =
        !s->driver.loaded ? GDU_TRI_UNKNOWN
        : s->driver.version.open_module
            ? GDU_TRI_YES
            : (s->driver.version.version[0] || s->driver.taint[0] ? GDU_TRI_NO : GDU_TRI_UNKNOWN);
    snprintf(c->kernel, sizeof c->kernel, "%s", s->kernel.release);
    c->iommu = s->iommu.mode;
    const gdu_iommu *io = &s->iommu;
    say(c->iommu_cmdline, sizeof c->iommu_cmdline, "%s%s%s%s%s%s%s%s", io->iommu[0] ? "iommu=" : "",
        io->iommu, io->iommu[0] && io->intel_iommu[0] ? " " : "",
        io->intel_iommu[0] ? "intel_iommu=" : "", io->intel_iommu,
        (io->iommu[0] || io->intel_iommu[0]) && io->amd_iommu[0] ? " " : "",
        io->amd_iommu[0] ? "amd_iommu=" : "", io->amd_iommu);
    c->env = s->module_env;
    judge_driver(s, c);

    gdu_gpu_view views[GDU_MAX_GPUS];
    c->n_gpus = gdu_snapshot_gpus(s, views, GDU_MAX_GPUS);
    for (size_t i = 0; i < c->n_gpus; i++) {
        judge_gpu(s, &views[i], c, &c->gpus[i]);
        if (c->gpus[i].plan == GDU_UNLOCK_IMPOSSIBLE || c->gpus[i].plan == GDU_UNLOCK_PATCHED ||
            c->gpus[i].plan == GDU_UNLOCK_REGKEYS)
            merge(&c->gpus[i].blockers, &c->blockers); /* the driver's, where it matters */
        if (c->gpus[i].blockers.n > 0 && c->gpus[i].plan != GDU_UNLOCK_NOTHING)
            c->gpus[i].plan = GDU_UNLOCK_IMPOSSIBLE;
    }
    gdu_unlock_notes driver = c->blockers;
    memset(&c->blockers, 0, sizeof c->blockers);
    for (size_t i = 0; i < c->n_gpus; i++)
        for (size_t j = i + 1; j < c->n_gpus; j++)
            judge_pair(s, &views[i], &views[j], &c->gpus[i], &c->gpus[j], &c->pairs[c->n_pairs++]);
    machine_plan(c);
    if (c->n_gpus == 0)
        merge(&c->blockers, &driver);
    if (c->plan == GDU_UNLOCK_PATCHED)
        judge_build_needs(s, c);
}

const gdu_unlock_pair *gdu_unlock_find_pair(const gdu_unlock_check *c, const char *bdf_a,
                                            const char *bdf_b)
{
    for (size_t i = 0; i < c->n_pairs; i++) {
        const char *a = c->gpus[c->pairs[i].a].bdf, *b = c->gpus[c->pairs[i].b].bdf;
        if ((strcasecmp(a, bdf_a) == 0 && strcasecmp(b, bdf_b) == 0) ||
            (strcasecmp(a, bdf_b) == 0 && strcasecmp(b, bdf_a) == 0))
            return &c->pairs[i];
    }
    return NULL;
}

bool gdu_unlock_pair_advice(const gdu_unlock_check *c, const char *bdf_a, const char *bdf_b,
                            char *out, size_t len)
{
    const gdu_unlock_pair *p = gdu_unlock_find_pair(c, bdf_a, bdf_b);
    if (p == NULL)
        return false;
    switch (p->plan) {
    case GDU_UNLOCK_PATCHED:
        say(out, len,
            "plan 'patched module': %s; run '%s', then '%s' (" CMD_CHECK
            " lists what else it needs)",
            p->why, CMD_BUILD, CMD_INSTALL_PATCHED);
        return true;
    case GDU_UNLOCK_REGKEYS:
        say(out, len,
            "plan 'registry keys only': %s; run '%s' (it sets NVreg_RegistryDwords=\"%s\")", p->why,
            CMD_INSTALL_KEYS, gdu_unlock_registry_dwords(c->version));
        return true;
    case GDU_UNLOCK_IMPOSSIBLE:
        say(out, len, "plan 'impossible here': %s; fix: %s (then run '" CMD_CHECK "')",
            p->blockers.n ? p->blockers.note[0].fact : p->why,
            p->blockers.n ? p->blockers.note[0].fix : "see " CMD_CHECK);
        return true;
    case GDU_UNLOCK_UNKNOWN:
        say(out, len, "run '" CMD_CHECK "' on the machine itself: it says which plan applies (%s)",
            p->why);
        return true;
    default:
        return false;
    }
}
