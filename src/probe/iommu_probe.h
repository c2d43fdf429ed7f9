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

/* One IOMMU group and what its type says. */
typedef struct gdu_iommu_group {
    int id;
    gdu_iommu_mode mode; /* UNKNOWN when its type could not be read */
} gdu_iommu_group;

typedef struct gdu_iommu {
    gdu_iommu_mode mode;
    gdu_iommu_group *groups; /* every group, by id */
    size_t n_groups, n_identity, n_translated;
    char iommu[32], intel_iommu[32], amd_iommu[32]; /* command line values, "" when absent */
    char cmdline[1024];
} gdu_iommu;

void gdu_iommu_probe(gdu_sysroot *sr, gdu_iommu *out);
void gdu_iommu_free(gdu_iommu *io);

/* What one group's type says ("identity": PASSTHROUGH, "DMA" / "DMA-FQ":
 * TRANSLATED); UNKNOWN for any other type ("blocked", "unmanaged"), an
 * unreadable one, or a group not probed. */
gdu_iommu_mode gdu_iommu_group_mode(const gdu_iommu *io, int group);

const char *gdu_iommu_mode_name(gdu_iommu_mode m);

#endif
