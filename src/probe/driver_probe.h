/* The NVIDIA kernel driver stack as procfs and sysfs show it: nvidia module
 * version and flavour, its parameters, each GPU's information file, nvidia-fs
 * and nvidia_peermem. */
#ifndef GDUNLOCK_PROBE_DRIVER_PROBE_H
#define GDUNLOCK_PROBE_DRIVER_PROBE_H

#include "probe/sysroot.h"
#include "probe/text_parse.h"
#include "util/tri.h"

#include <stdbool.h>
#include <stddef.h>

enum { GDU_MAX_GPUS = 16 };

/* /proc/driver/nvidia/gpus/<bdf>/information */
typedef struct gdu_driver_gpu {
    char bdf[16];
    char model[128]; /* "NVIDIA GeForce RTX 3060" */
    char uuid[64];
    char firmware[64]; /* "GPU Firmware:" value: the GSP firmware version, "N/A" without GSP */
} gdu_driver_gpu;

typedef struct gdu_driver {
    bool loaded;                /* /proc/driver/nvidia/version exists */
    gdu_nvidia_version version; /* parsed from it */
    char module_version[32];    /* /sys/module/nvidia/version, "" if absent */
    char taint[16];             /* /sys/module/nvidia/taint: "P" marks a proprietary license */
    int enable_resizable_bar;   /* params "EnableResizableBar", -1 when not listed */
    char registry_dwords[256];  /* params "RegistryDwords", quotes removed */
    gdu_driver_gpu gpus[GDU_MAX_GPUS];
    size_t n_gpus;
    bool nvfs_loaded;         /* /proc/driver/nvidia-fs or /sys/module/nvidia_fs */
    char nvfs_version[32];    /* /proc/driver/nvidia-fs/version */
    bool nvfs_stats_readable; /* set by the snapshot, which reads them (facts/snapshot.h) */
    bool peermem_loaded;      /* /sys/module/nvidia_peermem */
} gdu_driver;

/* The driver's parameters, read by the snapshot (whose words a report
 * carries, facts/snapshot.h) and parsed by gdu_driver_params_parse. */
#define GDU_DRIVER_PARAMS_PATH "/proc/driver/nvidia/params"

/* Everything above but the two files the snapshot reads once and keeps the
 * words of: the parameters (left unlisted here) and nvidia-fs's stats. */
void gdu_driver_probe(gdu_sysroot *sr, gdu_driver *out);

/* EnableResizableBar and RegistryDwords from the parameters' text (NULL:
 * not read, both unlisted). */
void gdu_driver_params_parse(const char *text, gdu_driver *out);

/* Whether a GPU is a consumer board (GeForce, TITAN), judged from its
 * marketing name ("NVIDIA GeForce RTX 4090"); UNKNOWN for NULL or "". */
gdu_tri gdu_gpu_name_geforce(const char *name);

/* The value of one key in an NVreg_RegistryDwords string ("K1=V1;K2=V2"),
 * decimal or 0x hex. Returns 0 or -ENOENT. */
int gdu_registry_dword(const char *dwords, const char *key, unsigned long *value);

#endif
