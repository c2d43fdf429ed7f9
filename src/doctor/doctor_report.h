/* What doctor concluded: findings (one checked fact each, with evidence and a
 * fix), the GPUDirect Storage verdict and one P2P verdict per GPU pair. */
#ifndef GDUNLOCK_DOCTOR_DOCTOR_REPORT_H
#define GDUNLOCK_DOCTOR_DOCTOR_REPORT_H

#include "p2p/p2p_reason.h"
#include "probe/topo_path.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* INFO: a finding of the direct path the verdict does not rest on (the
 * P2PDMA preconditions where nvidia-fs carries it, and the other way round):
 * shown, never a failure. */
typedef enum { GDU_ST_OK = 0, GDU_ST_WARN, GDU_ST_FAIL, GDU_ST_UNKNOWN, GDU_ST_INFO } gdu_status;

enum { GDU_MAX_EVIDENCE = 16, GDU_MAX_REASONS = 12 };

typedef struct gdu_finding {
    char id[48];   /* stable, e.g. "gpu0.bar1", "gds.nvidia_fs" */
    char area[16]; /* "driver", "gpu", "nvidia-fs", "cufile", "storage", "pcie", "iommu", "p2p" */
    gdu_status status;
    char title[192];
    char evidence[GDU_MAX_EVIDENCE][256];
    size_t n_evidence;
    char fix[512];
} gdu_finding;

/* DIRECT..IMPOSSIBLE are ordered from best to worst; the verdict is the worst
 * level a cause demands. UNKNOWN is no level: evidence the verdict rests on
 * is missing, and what it would say could be worse than the causes known. */
typedef enum {
    GDU_GDS_DIRECT = 0,      /* cuFile can DMA straight to GPU memory now */
    GDU_GDS_DIRECT_GDUNLOCK, /* it can with the gdunlock shim (GeForce) */
    GDU_GDS_COMPAT,          /* cuFile works through its POSIX bounce path only */
    GDU_GDS_IMPOSSIBLE,      /* cuFile cannot read the file at all */
    GDU_GDS_UNKNOWN,         /* doctor cannot tell: the reasons say what to capture or run */
} gdu_gds_verdict;

typedef struct gdu_reason {
    gdu_gds_verdict level;    /* the verdict this reason forces (UNKNOWN: missing evidence) */
    gdu_gds_verdict could_be; /* missing evidence: the worst verdict it could force */
    bool note;                /* a caveat that forces nothing */
    char text[320];
} gdu_reason;

/* The direct path cuFile would take here. */
typedef enum {
    GDU_PATH_NONE = 0,  /* neither: compat (POSIX reads and a copy) */
    GDU_PATH_NVIDIA_FS, /* nvidia-fs pins GPU memory through the driver's P2P API */
    GDU_PATH_P2PDMA,    /* the kernel's PCI P2PDMA on UVM's BAR1 pages (CUDA 12.8+) */
    GDU_PATH_UNDECIDED, /* evidence missing: the finding says which */
} gdu_direct_path;

const char *gdu_direct_path_id(gdu_direct_path p); /* "none", "nvidia-fs", "p2pdma", "unknown" */

typedef struct gdu_p2p_pair {
    int a, b; /* GPU indexes in PCI order */
    gdu_pcie_path path;
    gdu_p2p_verdict verdict;
} gdu_p2p_pair;

/* The measured facts about one GPU, for --json consumers. */
typedef struct gdu_report_gpu {
    int index;
    char bdf[16];
    char name[128];
    int geforce;                                /* 1, 0, -1 unknown */
    int cuda_ordinal;                           /* -1 unknown */
    uint64_t bar1_bytes, memory_bytes;          /* 0 unknown */
    uint64_t rm_bar1_bytes, rm_bar1_available;  /* RM's count of BAR1; 0 unknown */
    int cur_gen, cur_width, max_gen, max_width; /* 0 unknown */
} gdu_report_gpu;

typedef struct gdu_report {
    bool driver_present;
    char driver_version[32];
    int open_module; /* 1, 0, -1 unknown */
    gdu_report_gpu gpus[16];
    size_t n_gpus;
    gdu_gds_verdict gds;
    gdu_direct_path direct_path;
    char direct_path_why[384];
    char gds_target
        [128]; /* what the verdict is about: "/data/model.safetensors", "any NVMe drive" */
    gdu_reason reasons[GDU_MAX_REASONS];
    size_t n_reasons;
    gdu_p2p_pair *pairs;
    size_t n_pairs;
    gdu_finding *findings;
    size_t n_findings, cap_findings;
} gdu_report;

void gdu_report_init(gdu_report *r);
void gdu_report_free(gdu_report *r);

/* Adds a finding and returns it (never NULL: on allocation failure a static
 * scratch finding absorbs the writes and the report just lacks it). */
__attribute__((format(printf, 5, 6))) gdu_finding *gdu_report_add(gdu_report *r, const char *id,
                                                                  const char *area,
                                                                  gdu_status status,
                                                                  const char *title_fmt, ...);
__attribute__((format(printf, 2, 3))) void gdu_finding_evidence(gdu_finding *f, const char *fmt,
                                                                ...);
__attribute__((format(printf, 2, 3))) void gdu_finding_fix(gdu_finding *f, const char *fmt, ...);

/* Records a reason for the GDS verdict and lowers the verdict to its level. */
__attribute__((format(printf, 3, 4))) void gdu_report_reason(gdu_report *r, gdu_gds_verdict level,
                                                             const char *fmt, ...);

/* Records a caveat next to the reasons (slower, smaller) without changing the verdict. */
__attribute__((format(printf, 2, 3))) void gdu_report_note(gdu_report *r, const char *fmt, ...);

/* Records missing evidence that could force at worst could_be; the text says
 * what to capture or run. gdu_report_settle then decides: UNKNOWN when some
 * missing evidence could make the verdict worse than the known causes do;
 * otherwise it stays, and each such reason becomes a note. */
__attribute__((format(printf, 3, 4))) void
gdu_report_unknown(gdu_report *r, gdu_gds_verdict could_be, const char *fmt, ...);
void gdu_report_settle(gdu_report *r);

const gdu_finding *gdu_report_find(const gdu_report *r, const char *id);

const char *gdu_status_id(gdu_status s); /* "ok", "warn", "fail", "unknown", "info" */
const char *
gdu_gds_verdict_id(gdu_gds_verdict v); /* "direct", "direct_with_gdunlock", ..., "unknown" */
const char *gdu_gds_verdict_text(gdu_gds_verdict v); /* "direct with gdunlock" */

json_t *gdu_report_to_json(const gdu_report *r);

#endif
