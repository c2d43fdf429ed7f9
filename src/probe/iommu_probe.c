#include "probe/iommu_probe.h"

#include "probe/text_parse.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static gdu_iommu_mode type_mode(const char *type)
{
    if (strcmp(type, "identity") == 0)
        return GDU_IOMMU_PASSTHROUGH;
    if (strncmp(type, "DMA", 3) == 0)
        return GDU_IOMMU_TRANSLATED;
    return GDU_IOMMU_UNKNOWN;
}

void gdu_iommu_probe(gdu_sysroot *sr, gdu_iommu *out)
{
    memset(out, 0, sizeof *out);
    gdu_sysroot_read_line(sr, "/proc/cmdline", out->cmdline, sizeof out->cmdline);
    gdu_cmdline_get(out->cmdline, "iommu", out->iommu, sizeof out->iommu);
    gdu_cmdline_get(out->cmdline, "intel_iommu", out->intel_iommu, sizeof out->intel_iommu);
    gdu_cmdline_get(out->cmdline, "amd_iommu", out->amd_iommu, sizeof out->amd_iommu);
    char **names;
    long n = gdu_sysroot_list(sr, "/sys/kernel/iommu_groups", &names);
    out->groups = n > 0 ? calloc((size_t)n, sizeof *out->groups) : NULL;
    size_t unknown = 0;
    for (long i = 0; i < n; i++) {
        char type[32], path[96];
        int id = atoi(names[i]);
        snprintf(path, sizeof path, "/sys/kernel/iommu_groups/%d/type", id);
        bool read = gdu_sysroot_read_line(sr, path, type, sizeof type) == 0;
        gdu_iommu_mode m = read ? type_mode(type) : GDU_IOMMU_UNKNOWN;
        unknown += !read;
        out->n_identity += m == GDU_IOMMU_PASSTHROUGH;
        out->n_translated += m == GDU_IOMMU_TRANSLATED;
        if (out->groups != NULL)
            out->groups[i] = (gdu_iommu_group){id, m};
    }
    out->n_groups = n > 0 ? (size_t)n : 0;
    if (n > 0)
        gdu_sysroot_free_names(names, n);
    if (out->n_groups == 0)
        out->mode = GDU_IOMMU_NONE;
    else if (out->n_translated > 0)
        out->mode = GDU_IOMMU_TRANSLATED;
    else if (unknown == out->n_groups)
        out->mode = GDU_IOMMU_UNKNOWN;
    else
        out->mode = GDU_IOMMU_PASSTHROUGH;
}

void gdu_iommu_free(gdu_iommu *io)
{
    free(io->groups);
    io->groups = NULL;
}

gdu_iommu_mode gdu_iommu_group_mode(const gdu_iommu *io, int group)
{
    for (size_t i = 0; io->groups != NULL && i < io->n_groups; i++)
        if (io->groups[i].id == group)
            return io->groups[i].mode;
    return GDU_IOMMU_UNKNOWN;
}

const char *gdu_iommu_mode_name(gdu_iommu_mode m)
{
    switch (m) {
    case GDU_IOMMU_NONE:
        return "off";
    case GDU_IOMMU_PASSTHROUGH:
        return "passthrough";
    case GDU_IOMMU_TRANSLATED:
        return "translated";
    default:
        return "unknown";
    }
}
