/* IOMMU state: the default domain type of each IOMMU group (identity = pass-
 * through, DMA / DMA-FQ = translated) and the kernel command line options
 * that set it. */
#ifndef GDUNLOCK_PROBE_IOMMU_PROBE_H
#define GDUNLOCK_PROBE_IOMMU_PROBE_H

#include "probe/sysroot.h"

#include <stddef.h>

typedef enum {
    GDU_IOMMU_NONE = 0,    /* no IOMMU groups: off or absent */
    GDU_IOMMU_PASSTHROUGH, /* every group "identity" */
    GDU_IOMMU_TRANSLATED,  /* at least one group "DMA" or "DMA-FQ" */
    GDU_IOMMU_UNKNOWN,     /* groups without a readable type */
} gdu_iommu_mode;

typedef struct gdu_iommu {
    gdu_iommu_mode mode;
    size_t n_groups, n_identity, n_translated;
    char iommu[32], intel_iommu[32], amd_iommu[32]; /* command line values, "" when absent */
    char cmdline[1024];
} gdu_iommu;

void gdu_iommu_probe(gdu_sysroot *sr, gdu_iommu *out);

/* The type of one group ("identity", "DMA", "DMA-FQ", "blocked") into buf;
 * returns 0 or -errno. */
int gdu_iommu_group_type(gdu_sysroot *sr, int group, char *buf, size_t len);

/* What one group type means: PASSTHROUGH for "identity", TRANSLATED for
 * "DMA" / "DMA-FQ", UNKNOWN for any other ("blocked", "unmanaged"). */
gdu_iommu_mode gdu_iommu_type_mode(const char *type);

const char *gdu_iommu_mode_name(gdu_iommu_mode m);

#endif
