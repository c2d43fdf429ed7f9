/* Answers that only the running driver can give (CUDA's view of the GPUs and
 * their peers, the RM's P2P caps, libcufile found by the loader, O_DIRECT on a
 * named path). On the live machine they are collected, by the one collector
 * of CUDA's and the RM's answers doctor and gdunlock p2p share; with
 * --sysroot they come from the capture file gdunlock-live.json inside the
 * captured tree. */
#ifndef GDUNLOCK_FACTS_LIVE_H
#define GDUNLOCK_FACTS_LIVE_H

#include "rm/p2p_caps.h"
#include "probe/sysroot.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GDU_LIVE_FILE "gdunlock-live.json"
enum { GDU_LIVE_MAX_GPUS = 16, GDU_LIVE_MAX_PAIRS = 16 * 15, GDU_LIVE_MAX_PATHS = 4 };

typedef enum {
    GDU_LIVE_ABSENT = 0, /* --sysroot without a capture file: nothing known */
    GDU_LIVE_COLLECTED,  /* asked the running driver */
    GDU_LIVE_CAPTURED,   /* read from a capture file */
} gdu_live_origin;

typedef struct gdu_live_gpu {
    int ordinal;
    char name[128];
    char bdf[16];       /* lower case, "0000:01:00.0" */
    uint64_t total_mem; /* bytes, cuDeviceTotalMem */
    int cc_major, cc_minor;
    bool rm_known; /* the RM lists it: rm_gpu_id is its gpuId */
    uint32_t rm_gpu_id;
    bool rm_bar1_known;     /* RM's BAR1 figures (rm/rm_bar1_info.h) follow */
    uint64_t rm_bar1_total; /* bytes */
    uint64_t rm_bar1_available;
    char rm_bar1_why[128];   /* why they are missing */
    bool rm_static_known;    /* RM said whether BAR1 is static (rm_bar1_info.h) */
    bool rm_static_bar1;     /* all of video memory mapped through BAR1 at once */
    bool rm_static_wc;       /* that mapping is write-combined */
    uint64_t rm_static_size; /* bytes */
} gdu_live_gpu;

/* CUDA's and the RM's answers for the ordered pair a -> b; -1 where CUDA
 * did not answer. */
typedef struct gdu_live_pair {
    int a, b;              /* CUDA ordinals */
    int can_access;        /* cuDeviceCanAccessPeer */
    int performance_rank;  /* CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK */
    int access_supported;  /* CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED */
    int native_atomics;    /* CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED */
    int cuda_array_access; /* CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED */
    bool rm_known;         /* rm holds the RM's NV0000 P2P caps answer */
    gdu_p2p_rm_caps rm;
} gdu_live_pair;

typedef struct gdu_live_path {
    char path[1024];
    int o_direct; /* 1 open with O_DIRECT worked, 0 refused, -1 not tried */
    char o_direct_error[96];
    unsigned long long fs_magic; /* statfs f_type, 0 unknown */
} gdu_live_path;

typedef struct gdu_live {
    gdu_live_origin origin;
    int euid; /* -1 unknown */
    /* The running kernel has PCI P2PDMA built in: p2pdma_pgmap_ops is in
     * /proc/kallsyms (1), is not (0), or it could not be read (-1). */
    int kernel_p2pdma;
    bool cuda_ok;
    char cuda_why[256];
    int cuda_version; /* cuDriverGetVersion, 13000 for 13.0; 0 unknown */
    gdu_live_gpu gpus[GDU_LIVE_MAX_GPUS];
    size_t n_gpus;
    gdu_live_pair pairs[GDU_LIVE_MAX_PAIRS];
    size_t n_pairs;
    char rm_why[256]; /* why the RM's P2P caps are missing, "" when asked */
    bool cufile_found;
    char cufile_path[256];
    char cufile_version[32];
    char cufile_why[256];
    char cufile_env_json[512]; /* CUFILE_ENV_PATH_JSON, "" when unset */
    gdu_live_path paths[GDU_LIVE_MAX_PATHS];
    size_t n_paths;
} gdu_live;

/* Asks the running system; paths are the files/directories doctor was given. */
void gdu_live_collect(gdu_live *out, const char *const *paths, size_t n_paths);

/* Tries O_DIRECT on path (a file: opened read-only; a directory: an unnamed
 * temporary file in it) and statfs; fills out. */
void gdu_live_probe_path(const char *path, gdu_live_path *out);

json_t *gdu_live_to_json(const gdu_live *live);
/* Fills live from capture JSON: every field gdu_live_to_json writes, with its
 * type. Returns 0 or -EINVAL with a reason naming the field. */
int gdu_live_from_json(const json_t *root, gdu_live *out, char *why, size_t why_len);
/* Reads gdunlock-live.json at the sysroot's root; a missing file gives origin
 * ABSENT and 0; an unusable one (not a regular file, not JSON, a field
 * missing or of the wrong type) origin ABSENT and -EINVAL with the reason. */
int gdu_live_load(gdu_sysroot *sr, gdu_live *out, char *why, size_t why_len);

const gdu_live_gpu *gdu_live_gpu_by_bdf(const gdu_live *live, const char *bdf);
const gdu_live_gpu *gdu_live_gpu_by_ordinal(const gdu_live *live, int ordinal);
const gdu_live_pair *gdu_live_pair_find(const gdu_live *live, int a, int b);
const gdu_live_path *gdu_live_path_find(const gdu_live *live, const char *path);

#endif
