/* Parser for nvidia-fs's /proc/driver/nvidia-fs/stats and deltas between two
 * snapshots of it.
 *
 * Formats handled (as printed by nvidia-fs's seq_file code):
 *  - stats ver 2 (nvidia-fs 2.3.x): "NVFS Driver(version: 2:3:1)", no IO-stats
 *    switch line, Bar1-map without delay-frees, Error without dma-ref, Ops
 *    without BatchIO;
 *  - stats ver 4 with "MB" units (2.7.x: "Active Shadow-Buffer (MB)",
 *    "Registered_MB=") and with "MiB" units (2.7.49 onwards);
 *  - IO stats on (Batches line, Reads/Writes with n/ok/readMiB plus a second
 *    Bandwidth/Avg-Latency line) or off (Reads/Writes with err counters only);
 *  - peer stats on (per-GPU lines end with "cross_root_port(%)=N") or off.
 * Labels are padded with tabs and spaces before the ':'. Unknown lines and
 * unknown key=value pairs are counted and skipped; malformed numbers leave
 * the field absent. The parser never reads past the given length. */
#ifndef GDUNLOCK_PROBE_NVFS_STATS_H
#define GDUNLOCK_PROBE_NVFS_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GDU_NVFS_STATS_PATH "/proc/driver/nvidia-fs/stats"
#define GDU_NVFS_MAX_GPUS 64
/* Largest stats file we read; real ones are a few KiB (one line per GPU). */
#define GDU_NVFS_STATS_MAX_BYTES (256 * 1024)

/* Every numeric field of the global part of the stats file. */
enum gdu_nvfs_field {
    GDU_NVFS_SHADOW_BUF_MIB, /* "Active Shadow-Buffer (MiB|MB)": bounce buffers in use */
    GDU_NVFS_ACTIVE_PROCESS,
    GDU_NVFS_BATCHES_N,
    GDU_NVFS_BATCHES_OK,
    GDU_NVFS_BATCHES_ERR,
    GDU_NVFS_BATCHES_SUBMIT_LAT_US,
    GDU_NVFS_READS_N,
    GDU_NVFS_READS_OK,
    GDU_NVFS_READS_ERR,
    GDU_NVFS_READS_MIB,
    GDU_NVFS_READS_IO_STATE_ERR,
    GDU_NVFS_READS_BW_MIBS,
    GDU_NVFS_READS_LAT_US,
    GDU_NVFS_SPARSE_N,
    GDU_NVFS_SPARSE_IO,
    GDU_NVFS_SPARSE_HOLES,
    GDU_NVFS_SPARSE_PAGES,
    GDU_NVFS_WRITES_N,
    GDU_NVFS_WRITES_OK,
    GDU_NVFS_WRITES_ERR,
    GDU_NVFS_WRITES_MIB,
    GDU_NVFS_WRITES_IO_STATE_ERR,
    GDU_NVFS_WRITES_PG_CACHE,
    GDU_NVFS_WRITES_PG_CACHE_FAIL,
    GDU_NVFS_WRITES_PG_CACHE_EIO,
    GDU_NVFS_WRITES_BW_MIBS,
    GDU_NVFS_WRITES_LAT_US,
    GDU_NVFS_MMAP_N,
    GDU_NVFS_MMAP_OK,
    GDU_NVFS_MMAP_ERR,
    GDU_NVFS_MMAP_MUNMAP,
    GDU_NVFS_BAR1_N,
    GDU_NVFS_BAR1_OK,
    GDU_NVFS_BAR1_ERR,
    GDU_NVFS_BAR1_FREE,
    GDU_NVFS_BAR1_CALLBACKS,
    GDU_NVFS_BAR1_ACTIVE,
    GDU_NVFS_BAR1_DELAY_FREES,
    GDU_NVFS_ERROR_CPU_GPU_PAGES,
    GDU_NVFS_ERROR_SG_EXT,
    GDU_NVFS_ERROR_DMA_MAP,
    GDU_NVFS_ERROR_DMA_REF,
    GDU_NVFS_OPS_READ, /* operations in flight at the time of reading */
    GDU_NVFS_OPS_WRITE,
    GDU_NVFS_OPS_BATCHIO,
    GDU_NVFS_FIELD_COUNT
};

/* Tri-state for yes/no lines that older versions do not print. */
enum gdu_nvfs_flag { GDU_NVFS_UNKNOWN = -1, GDU_NVFS_NO = 0, GDU_NVFS_YES = 1 };

typedef struct gdu_nvfs_gpu {
    char pci[20];            /* "0000:34:00.0" */
    char uuid[40];           /* "12a86a5e-3002-108f-ee49-4b51266cdc07" */
    uint64_t registered_mib; /* GPU memory pinned through BAR1 now */
    uint64_t cache_mib;      /* bounce-buffer memory of this GPU now */
    uint64_t max_pinned_mib;
    uint32_t cross_root_port_pct;
    bool has_registered, has_cache, has_max_pinned, has_cross_root_port;
} gdu_nvfs_gpu;

typedef struct gdu_nvfs_stats {
    int stats_version;       /* major of "NVFS statistics(ver: 4.0)", -1 if absent */
    char gds_version[32];    /* "GDS Version:", "" if absent */
    char driver_version[32]; /* "NVFS Driver(version: ...)", colons shown as dots */
    char logging_level[16];
    enum gdu_nvfs_flag peerdirect, io_stats, peer_stats;
    uint64_t value[GDU_NVFS_FIELD_COUNT];
    bool present[GDU_NVFS_FIELD_COUNT];
    gdu_nvfs_gpu gpus[GDU_NVFS_MAX_GPUS];
    size_t n_gpus;
    size_t gpus_dropped;  /* GPU lines beyond GDU_NVFS_MAX_GPUS */
    size_t unknown_lines; /* lines (or key=value pairs) we did not recognise */
    size_t bad_values;    /* recognised keys whose value was not a number */
} gdu_nvfs_stats;

typedef struct gdu_nvfs_gpu_delta {
    char pci[20];
    char uuid[40];
    bool in_before, in_after;
    int64_t registered_mib, cache_mib; /* after - before (0 where absent) */
    uint64_t registered_mib_after, cache_mib_after;
} gdu_nvfs_gpu_delta;

typedef struct gdu_nvfs_delta {
    int64_t value[GDU_NVFS_FIELD_COUNT]; /* after - before, saturated */
    bool present[GDU_NVFS_FIELD_COUNT];  /* the field is in both snapshots */
    /* A cumulative counter decreased: someone reset the stats in between, so
     * the deltas do not describe the run. */
    bool counters_reset;
    gdu_nvfs_gpu_delta gpus[GDU_NVFS_MAX_GPUS];
    size_t n_gpus;
} gdu_nvfs_delta;

/* Parses len bytes of stats text (need not be NUL-terminated). Always fills
 * *out; returns 0 when the text looks like nvidia-fs stats (it has the
 * "NVFS statistics" line or at least one recognised counter), else -EINVAL. */
int gdu_nvfs_stats_parse(const char *text, size_t len, gdu_nvfs_stats *out);

/* Reads and parses the stats file at path (GDU_NVFS_STATS_PATH normally).
 * Returns 0, -ENOENT when the file does not exist (nvidia-fs not loaded),
 * another -errno, or -EINVAL when it is not in a known format; the reason
 * is copied into why. */
int gdu_nvfs_stats_read(const char *path, gdu_nvfs_stats *out, char *why, size_t why_len);

/* after - before for every field present in both, and per GPU (matched by
 * UUID, else by PCI address). */
void gdu_nvfs_stats_delta(const gdu_nvfs_stats *before, const gdu_nvfs_stats *after,
                          gdu_nvfs_delta *out);

/* "bar1_map.ok": a stable machine name for a field (JSON keys). */
const char *gdu_nvfs_field_key(enum gdu_nvfs_field f);
/* "Bar1-map ok": the section and key as nvidia-fs prints them. */
const char *gdu_nvfs_field_label(enum gdu_nvfs_field f);
/* true for cumulative counters (n, ok, err...), false for gauges (active,
 * in-flight ops, shadow buffers, bandwidth, latency) whose delta may be negative. */
bool gdu_nvfs_field_is_counter(enum gdu_nvfs_field f);

#endif
