/* Storage as the examined machine shows it: NVMe controllers and their
 * namespaces, the mount table, a mount's block device resolved through
 * partitions, device-mapper and md down to whole disks and the PCI functions
 * behind them, and the udev data cuFile needs to identify a volume. */
#ifndef GDUNLOCK_PROBE_STORAGE_PROBE_H
#define GDUNLOCK_PROBE_STORAGE_PROBE_H

#include "probe/sysroot.h"
#include "probe/text_parse.h"

#include <stdbool.h>
#include <stddef.h>

enum { GDU_MAX_NVME = 32, GDU_MAX_NS = 8, GDU_MAX_DISKS = 8 };

typedef struct gdu_nvme {
    char name[16]; /* "nvme0" */
    char bdf[16];  /* the controller's PCI function, "" if not PCI (fabrics) */
    char model[64];
    char namespaces[GDU_MAX_NS][32]; /* block devices, "nvme0n1" */
    size_t n_ns;
} gdu_nvme;

typedef struct gdu_nvme_list {
    gdu_nvme ctrl[GDU_MAX_NVME];
    size_t n;
} gdu_nvme_list;

void gdu_nvme_scan(gdu_sysroot *sr, gdu_nvme_list *out);

typedef struct gdu_mounts {
    gdu_mount *m;
    size_t n;
} gdu_mounts;

/* /proc/self/mountinfo. Returns 0 or -errno. */
int gdu_mounts_read(gdu_sysroot *sr, gdu_mounts *out);
void gdu_mounts_free(gdu_mounts *mounts);
/* The mount whose mount point is the longest prefix of an absolute path (the
 * last such mount when stacked). NULL when none. */
const gdu_mount *gdu_mount_for_path(const gdu_mounts *mounts, const char *path);

/* A mount's block device down to its whole disks. */
typedef struct gdu_block_chain {
    char top[32];                     /* the device the mount names, "vda1" or "dm-0" */
    char layers[128];                 /* "vda1 -> vda", "dm-0 -> md0 -> nvme0n1 + nvme1n1" */
    char disks[GDU_MAX_DISKS][32];    /* whole disks at the bottom */
    char disk_bdf[GDU_MAX_DISKS][16]; /* the PCI function behind each disk, "" when none */
    size_t n_disks;
} gdu_block_chain;

/* Returns 0, or -ENOENT when major:minor is not a block device (tmpfs, NFS...). */
int gdu_block_resolve(gdu_sysroot *sr, unsigned major, unsigned minor, gdu_block_chain *out);

/* cuFile identifies a volume by the udev property ID_FS_USAGE in
 * /run/udev/data/b<major>:<minor>. */
bool gdu_udev_has_fs_usage(gdu_sysroot *sr, unsigned major, unsigned minor);

bool gdu_disk_is_nvme(const char *disk);

#endif
