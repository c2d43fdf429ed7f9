/* The snapshot of a machine: everything doctor, topo, p2p and verify judge,
 * read once when it is taken (driver, kernel and what building a module
 * needs, PCI devices, NVMe, mounts with their
 * block devices and udev data, IOMMU groups, network cards, RDMA devices
 * and the peer-memory client, cufile.json,
 * nvidia-fs stats and the live driver's answers). The judges read nothing
 * else: they are functions of a snapshot, and a capture is one written out. */
#ifndef GDUNLOCK_FACTS_SNAPSHOT_H
#define GDUNLOCK_FACTS_SNAPSHOT_H

#include "rm/p2p_caps.h"
#include "util/tri.h"
#include "probe/cufile_config.h"
#include "probe/driver_probe.h"
#include "probe/iommu_probe.h"
#include "probe/kernel_probe.h"
#include "probe/module_env.h"
#include "facts/live.h"
#include "probe/nvfs_stats.h"
#include "probe/pci_probe.h"
#include "probe/rdma_probe.h"
#include "probe/storage_probe.h"
#include "probe/topo_path.h"
#include "probe/sysroot.h"

/* The block device under a mount, down to its disks, and what udev knows of it. */
typedef struct gdu_block {
    unsigned major, minor;
    bool found; /* /sys/dev/block/<major>:<minor> exists: chain holds it */
    gdu_block_chain chain;
    bool udev_fs_usage; /* /run/udev/data/b<major>:<minor> has E:ID_FS_USAGE (cuFile needs it) */
} gdu_block;

/* A network card's interface names (its net/ entries, or its virtio
 * device's), comma-separated. */
typedef struct gdu_nic {
    char bdf[16];
    char names[96];
} gdu_nic;

/* A file whose own words a report carries, as the snapshot read it: once,
 * through its sysroot (regular files only, bounded: gdu_sysroot_read). */
typedef struct gdu_snapshot_text {
    char *text; /* NUL-terminated; NULL when not read */
    long len;   /* its length, or -errno why it was not read (-EINVAL: no regular file) */
} gdu_snapshot_text;

typedef struct gdu_snapshot {
    bool live_machine; /* taken from the running machine, not a capture */
    char root[4096];   /* where it was read: "" the live machine, else the capture's folder */
    char **files;      /* every path read to take it (present or not), in first-read
                          order: what a capture of it holds (facts/capture.h) */
    size_t n_files;
    gdu_driver driver;
    gdu_kernel kernel;
    gdu_module_env module_env; /* Secure Boot, headers, DKMS, displays: what a module build needs */
    gdu_pci pci;
    char pci_error[256]; /* why the PCI scan failed, "" when it worked */
    gdu_nvme_list nvme;
    gdu_mounts mounts;
    gdu_block *blocks; /* one per block device some mount is on */
    size_t n_blocks;
    gdu_nic *nics; /* one per network card in the PCI tree */
    size_t n_nics;
    gdu_rdma rdma; /* RDMA devices and the peer-memory client */
    gdu_iommu iommu;
    gdu_cufile_config cufile;
    gdu_live live;
    char live_error[256];            /* why the capture file could not be used */
    gdu_snapshot_text driver_params; /* GDU_DRIVER_PARAMS_PATH, parsed into driver */
    gdu_snapshot_text nvfs_text;     /* nvidia-fs's stats, parsed into nvfs */
    bool nvfs_stats_parsed;
    gdu_nvfs_stats nvfs;
} gdu_snapshot;

/* One NVIDIA GPU as every source sees it; any of the pointers may be NULL. */
typedef struct gdu_gpu_view {
    int index; /* position in PCI order: "GPU0" */
    char bdf[16];
    const gdu_pci_dev *pci;
    const gdu_driver_gpu *info; /* /proc/driver/nvidia/gpus/<bdf>/information */
    const gdu_live_gpu *cuda;
    const char *name; /* CUDA's name, else the driver's Model, else "" */
    gdu_tri geforce;
    uint64_t bar1;      /* bytes, 0 unknown */
    uint64_t rebar_max; /* largest BAR1 the ReBAR capability offers; 0 none or unknown */
    uint64_t memory;    /* bytes, 0 unknown */
} gdu_gpu_view;

/* Reads the machine through sr (the live machine, or a capture); the paths
 * sr recorded move into the snapshot's files. paths: the files or
 * directories named on the command line (O_DIRECT is tried on them live).
 * Never fails; what could not be read is left empty. */
void gdu_snapshot_take(gdu_sysroot *sr, const char *const *paths, size_t n_paths,
                       gdu_snapshot *out);

/* The same with nvidia-fs's stats read from nvfs_stats on the live machine
 * (a copy, or a test's file: GDUNLOCK_NVFS_STATS), kept under their own
 * name; NULL, or a capture: GDU_NVFS_STATS_PATH inside sr. */
void gdu_snapshot_take_stats_from(gdu_sysroot *sr, const char *const *paths, size_t n_paths,
                                  const char *nvfs_stats, gdu_snapshot *out);
void gdu_snapshot_free(gdu_snapshot *s);

enum { GDU_SNAPSHOT_BAD_ROOT = -1, GDU_SNAPSHOT_NO_MEMORY = -2 };

/* The whole snapshot of the machine under sysroot (NULL: the live one), on
 * the heap, its root checked first: 0 and *out, or GDU_SNAPSHOT_BAD_ROOT
 * with why saying what is wrong with the root, or GDU_SNAPSHOT_NO_MEMORY.
 * The commands that judge a machine open it this one way. Release with
 * gdu_snapshot_release. */
int gdu_snapshot_of(const char *sysroot, gdu_snapshot **out, char *why, size_t why_len);
void gdu_snapshot_release(gdu_snapshot *s);

/* The block device with that number under some mount; NULL when no mount is on it. */
const gdu_block *gdu_snapshot_block(const gdu_snapshot *s, unsigned major, unsigned minor);

/* The NVIDIA GPUs in PCI order (from PCI, else the driver's list). Returns the count. */
size_t gdu_snapshot_gpus(const gdu_snapshot *s, gdu_gpu_view *out, size_t cap);

/* The GPU CUDA numbers ordinal: its view among gdu_snapshot_gpus, or one
 * from CUDA's answers alone (index -1) for a GPU the PCI tree lacks. Returns
 * 0, or -ENOENT when CUDA has no such device. */
int gdu_snapshot_gpu_by_ordinal(const gdu_snapshot *s, int ordinal, gdu_gpu_view *out);

/* What the live answers say about NVLink between two GPUs. */
typedef enum {
    GDU_NVLINK_UNKNOWN = 0, /* no live answer for the pair */
    GDU_NVLINK_NO,
    GDU_NVLINK_YES,      /* the RM's P2P caps name NVLink (or NVSwitch) */
    GDU_NVLINK_INFERRED, /* no RM answer, but CUDA reports native peer atomics, which
                               CUDA offers over NVLink only */
} gdu_nvlink_answer;
gdu_nvlink_answer gdu_snapshot_nvlink(const gdu_snapshot *s, const gdu_gpu_view *a,
                                      const gdu_gpu_view *b);

#endif
