/* What `gdunlock p2p unlock` would do on a machine, and why: the policy.
 * From a snapshot (facts/snapshot.h: the live machine or a capture), per GPU
 * and per GPU pair, one of four plans:
 *   nothing          P2P works already, or the stock driver offers it here
 *   registry keys    the installed driver has BAR1 P2P for the chip but keeps
 *                    it off by default: module options only
 *   patched module   the driver has no BAR1 P2P for the chip: the open module
 *                    of the same version with gdunlock's edits
 *   impossible here  a fact blocks it (named, with its fix)
 * and "unknown" when the evidence is missing (no CUDA answer for the chip).
 * Pure: reads nothing but the snapshot. The runner (unlock/unlock_run.h) acts on it. */
#ifndef GDUNLOCK_UNLOCKPLAN_UNLOCK_PLAN_H
#define GDUNLOCK_UNLOCKPLAN_UNLOCK_PLAN_H

#include "facts/pair_facts.h"
#include "facts/snapshot.h"
#include "probe/topo_path.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum gdu_unlock_plan {
    GDU_UNLOCK_NOTHING = 0,
    GDU_UNLOCK_REGKEYS,
    GDU_UNLOCK_PATCHED,
    GDU_UNLOCK_IMPOSSIBLE,
    GDU_UNLOCK_UNKNOWN,
} gdu_unlock_plan;

/* GPU generations as the open module's code tells them apart for BAR1 P2P. */
typedef enum gdu_chip_family {
    GDU_CHIP_UNKNOWN = 0,
    GDU_CHIP_PRE_TURING,         /* Maxwell, Pascal, Volta: not supported by the open module */
    GDU_CHIP_TURING,             /* TU10x, TU11x: compute 7.5 */
    GDU_CHIP_AMPERE,             /* GA100, GA10x: compute 8.0, 8.6, 8.7 */
    GDU_CHIP_ADA,                /* AD10x: compute 8.9 */
    GDU_CHIP_HOPPER,             /* GH100: compute 9.0 */
    GDU_CHIP_BLACKWELL,          /* GB100, GB10x: compute 10.x, 11.x */
    GDU_CHIP_BLACKWELL_CONSUMER, /* GB202-GB207: compute 12.x */
} gdu_chip_family;

/* The family of a compute capability (CUDA's, the one chip fact every
 * snapshot with live answers holds). */
gdu_chip_family gdu_chip_family_of(int cc_major, int cc_minor);
const char *gdu_chip_family_name(gdu_chip_family f); /* "Ada", "Blackwell (GB20x)", "unknown" */

/* "nothing", "registry_keys", "patched_module", "impossible", "unknown". */
const char *gdu_unlock_plan_id(gdu_unlock_plan p);
/* "nothing to do", "registry keys only", ... for people. */
const char *gdu_unlock_plan_name(gdu_unlock_plan p);

/* Compares driver versions "580.95.05" by their numbers: <0, 0, >0; a
 * version that does not parse sorts first. */
int gdu_driver_version_cmp(const char *a, const char *b);

/* The oldest driver release the edits are written and checked for (the
 * "@oldest" line of src/unlock/edits/manifest.tsv), and the newest branch. */
#define GDU_UNLOCK_OLDEST_VERSION "550.54.15"
#define GDU_UNLOCK_NEWEST_MAJOR 595

/* The registry keys (NVreg_RegistryDwords) that choose BAR1 P2P on a driver
 * of version: RMPcieP2PType=1 from 575.51.02, which took BAR1 P2P out of
 * RMForceP2PType's values; RMForceP2PType=2 (BAR1P2P) before
 * (src/nvidia/interface/nvrm_registry.h of each release). */
const char *gdu_unlock_registry_dwords(const char *version);

/* What the open module of version needs for a GeForce of family to do BAR1
 * P2P, ignoring the machine (BAR1 size, display, path): the version table.
 * why says which fact decided. */
gdu_unlock_plan gdu_unlock_module_plan(gdu_chip_family family, const char *version, char *why,
                                       size_t why_len);

/* A blocking fact and what lifts it. */
typedef struct gdu_unlock_note {
    char fact[320];
    char fix[320];
} gdu_unlock_note;

enum { GDU_UNLOCK_MAX_NOTES = 8 };
typedef struct gdu_unlock_notes {
    gdu_unlock_note note[GDU_UNLOCK_MAX_NOTES];
    size_t n;
} gdu_unlock_notes;

typedef struct gdu_unlock_gpu {
    int index; /* PCI order, as doctor's GPU<n> */
    char bdf[16];
    char name[128];
    gdu_tri geforce;
    int cc_major, cc_minor; /* 0 unknown */
    gdu_chip_family family;
    uint64_t bar1, memory, rebar_max; /* bytes, 0 unknown */
    char display[64];                 /* its connected connector, "" none */
    gdu_unlock_plan plan;
    char why[384];
    gdu_unlock_notes blockers;
} gdu_unlock_gpu;

typedef struct gdu_unlock_pair {
    int a, b; /* GPU indices */
    gdu_pcie_path path;
    char root_a[16], root_b[16]; /* the root complexes ("pci0000:00") the GPUs hang off */
    gdu_tri acs_redirect;
    char acs_bridges[128]; /* the bridges that redirect */
    gdu_p2p_iommu iommu;
    gdu_tri works;    /* CUDA or the RM says P2P works now */
    const char *link; /* "NVLink", "PCIe BAR1", ... when it works */
    gdu_unlock_plan plan;
    char why[384];
    gdu_unlock_notes blockers;
} gdu_unlock_pair;

enum { GDU_UNLOCK_MAX_PAIRS = GDU_MAX_GPUS * (GDU_MAX_GPUS - 1) / 2 };

typedef struct gdu_unlock_check {
    bool live; /* read from the running machine */
    bool driver_loaded;
    gdu_tri open_module;
    char version[32]; /* the loaded module's, "" unknown */
    char kernel[64];  /* the running kernel's release */
    gdu_iommu_mode iommu;
    char iommu_cmdline[96]; /* iommu=, intel_iommu=, amd_iommu= as given */
    gdu_module_env env;
    gdu_unlock_gpu gpus[GDU_MAX_GPUS];
    size_t n_gpus;
    gdu_unlock_pair pairs[GDU_UNLOCK_MAX_PAIRS];
    size_t n_pairs;
    gdu_unlock_plan plan; /* the machine's: its pairs' (its GPUs' with one GPU) */
    char why[512];
    gdu_unlock_notes blockers; /* what makes it impossible, every pair's and GPU's once */
    gdu_unlock_notes missing;  /* what --build / --install need and the machine lacks */
    char registry_dwords[128]; /* what --install sets in NVreg_RegistryDwords, "" none */
    char next[256];            /* the command to run next, "" none */
} gdu_unlock_check;

/* The plan of the machine s shows. out is large: allocate it. */
void gdu_unlock_check_run(const gdu_snapshot *s, gdu_unlock_check *out);

/* The pair of the GPUs at these PCI addresses (either order), or NULL. */
const gdu_unlock_pair *gdu_unlock_find_pair(const gdu_unlock_check *c, const char *bdf_a,
                                            const char *bdf_b);

/* One sentence for doctor's and gdunlock p2p's fix of a refused pair (GPUs
 * by PCI address): the plan, why, and the command. false when the check
 * has no such pair or its plan is "nothing". */
bool gdu_unlock_pair_advice(const gdu_unlock_check *c, const char *bdf_a, const char *bdf_b,
                            char *out, size_t len);

#endif
