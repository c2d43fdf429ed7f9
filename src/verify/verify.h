/* gdunlock verify: runs the whole cuFile chain once (allocate, register,
 * write a pattern, read it back, compare) and decides from the evidence
 * whether data moved file<->GPU directly (DIRECT), correctly but through the
 * CPU (COMPAT), or not correctly at all (FAILED).
 *
 * The evidence is gathered by gdu_verify_run (needs a GPU), the verdict by
 * gdu_verify_decide (pure: unit-tested with hand-made evidence). Nothing here
 * prints; the CLI renders the JSON document from gdu_verify_to_json. */
#ifndef GDUNLOCK_VERIFY_VERIFY_H
#define GDUNLOCK_VERIFY_VERIFY_H

#include "probe/nvfs_stats.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GDU_VERIFY_TEXT 256
#define GDU_VERIFY_MAX_REASONS 24
#define GDU_VERIFY_DEFAULT_SIZE (16u << 20)
/* Largest size accepted: two buffers of each kind must fit on the GPU. */
#define GDU_VERIFY_MAX_SIZE (16ull << 30)
/* cuFile's and the kernel lookup's granularity for GPU buffers. */
#define GDU_VERIFY_ALIGN (64u << 10)

typedef enum { GDU_VERIFY_DIRECT = 0, GDU_VERIFY_COMPAT, GDU_VERIFY_FAILED } gdu_verify_verdict;

/* The two ways verify allocates device memory. */
typedef enum {
    GDU_VERIFY_MEM_CUMEMALLOC = 0,
    GDU_VERIFY_MEM_VMM,
    GDU_VERIFY_MEM_COUNT
} gdu_verify_mem;

/* One library call's outcome: ran, code (CUfileOpError, CUresult or -errno,
 * as the call returns it) and its text with the status name. */
typedef struct gdu_verify_call {
    bool ran;
    bool ok;
    int code;
    char text[GDU_VERIFY_TEXT];
} gdu_verify_call;

/* What happened to one pair of buffers (source + destination) of one kind. */
typedef struct gdu_verify_buffer {
    gdu_verify_call alloc;        /* both buffers allocated, 64 KiB aligned */
    gdu_verify_call buf_register; /* cuFileBufRegister of both */
    gdu_verify_call write;        /* cuFileWrite of the pattern from the source */
    gdu_verify_call read;         /* cuFileRead into the destination */
    bool compared;                /* destination copied to the host and compared */
    bool integrity_ok;
    uint64_t mismatch_offset;      /* first differing byte when !integrity_ok */
    char skipped[GDU_VERIFY_TEXT]; /* why this kind was not tried ("" if it was) */
} gdu_verify_buffer;

/* What the shim (libgdunlock.so) reported about the GPU verify used. */
typedef struct gdu_verify_shim {
    bool active; /* it was preloaded into the process that did the I/O */
    char why_inactive[GDU_VERIFY_TEXT];
    bool have_report;
    char report_error[GDU_VERIFY_TEXT]; /* why the report could not be read */
    char mode[16]; /* "native", "unlocked", "failed", "idle", "" if not found */
    char reason[GDU_VERIFY_TEXT];
    long long registered, unregistered; /* GPU allocations the shim registered; -1 unknown */
    /* The buffers handed to cuFile and what the model of the kernel's lookup
     * says nvidia-fs finds for them (-1 unknown); the first refusal's reason. */
    long long cufile_registered, cufile_found;
    char lookup_refusal[2 * GDU_VERIFY_TEXT];
} gdu_verify_shim;

/* A cause behind a verdict: a stable id (for scripts and tests) and a text
 * that says what happened and, where there is one, what to do. */
typedef struct gdu_verify_reason {
    char id[40];
    char text[2 * GDU_VERIFY_TEXT];
} gdu_verify_reason;

typedef struct gdu_verify_evidence {
    char path[4096];
    uint64_t size;
    int gpu;
    char gpu_name[128];
    char gpu_pci[32];
    gdu_verify_call cuda; /* libcuda load, device and context */
    gdu_verify_call file; /* creating/opening PATH with O_DIRECT */

    /* libcufile */
    gdu_verify_call cufile_load;
    char cufile_library[256];
    int cufile_version; /* cuFileGetVersion, 0 if unknown */
    gdu_verify_call driver_open;
    gdu_verify_call driver_props;
    unsigned nvfs_major, nvfs_minor; /* from cuFileDriverGetProperties; 0.0 = no nvidia-fs */
    bool compat_allowed;             /* dcontrolflags ALLOW_COMPAT_MODE */
    uint64_t max_direct_io_size;
    gdu_verify_call handle_register;
    gdu_verify_buffer buffers[GDU_VERIFY_MEM_COUNT];
    char cufile_log[2 * GDU_VERIFY_TEXT]; /* libcufile's last log lines of the run */

    /* nvidia-fs stats around the I/O (before registration, after the reads) */
    bool nvfs_before, nvfs_after;
    int nvfs_errno; /* why the stats were not read (-ENOENT: not loaded) */
    char nvfs_why[GDU_VERIFY_TEXT];
    gdu_nvfs_stats stats_before, stats_after;
    gdu_nvfs_delta delta;

    /* the CPU-path integrity check through the I/O engine (only when cuFile
     * could not be used at all) */
    gdu_verify_call engine;
    char engine_backend[16];
    char engine_reason[GDU_VERIFY_TEXT];
    bool engine_integrity_ok;

    gdu_verify_shim shim;
} gdu_verify_evidence;

typedef struct gdu_verify_result {
    gdu_verify_verdict verdict;
    gdu_verify_reason reasons[GDU_VERIFY_MAX_REASONS];
    size_t n_reasons;
    size_t reasons_dropped;
    /* Caveats that do not change the verdict (what could not be checked). */
    gdu_verify_reason notes[4];
    size_t n_notes;
} gdu_verify_result;

typedef struct gdu_verify_options {
    const char *path;
    uint64_t size; /* bytes; rounded up to GDU_VERIFY_ALIGN */
    int gpu;
    bool force;                  /* overwrite an existing non-empty file */
    bool keep;                   /* leave the file in place afterwards */
    const char *nvfs_stats_path; /* GDU_NVFS_STATS_PATH unless testing */
    /* Called at the start of each stage (may be NULL). */
    void (*progress)(void *user, const char *stage);
    void *progress_user;
} gdu_verify_options;

/* Empty evidence for opts (no call ran). */
void gdu_verify_evidence_init(gdu_verify_evidence *ev, const gdu_verify_options *opts);

/* Runs the chain and fills ev. Returns 0 when the run reached a verdict-able
 * state (even a FAILED one), -ENODEV when there is no libcuda or GPU,
 * -EEXIST when PATH exists and is not empty without force, -ENOENT/-EACCES
 * when PATH's directory is missing or not writable, -EINVAL for bad
 * options; the cause is in why. */
int gdu_verify_run(const gdu_verify_options *opts, gdu_verify_evidence *ev, char *why,
                   size_t why_len);

/* The verdict and its reasons. */
void gdu_verify_decide(const gdu_verify_evidence *ev, gdu_verify_result *out);

/* 0 DIRECT, 2 COMPAT, 1 FAILED. */
int gdu_verify_exit_code(gdu_verify_verdict v);
const char *gdu_verify_verdict_name(gdu_verify_verdict v);
const char *gdu_verify_mem_name(gdu_verify_mem m); /* "cuMemAlloc", "VMM" */

/* Adds a reason (truncating, counting drops). Used by decide and the CLI. */
void gdu_verify_add_reason(gdu_verify_result *r, const char *id, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The whole run as one JSON document: verdict, exit code, reasons, and the
 * evidence (cuFile calls, buffers, nvidia-fs deltas, engine check, shim). */
json_t *gdu_verify_to_json(const gdu_verify_evidence *ev, const gdu_verify_result *r);

/* ---- running verify with the shim (verify_process.c) ---- */

/* Set in a verify child's environment: where it writes its document. */
#define GDU_VERIFY_RESULT_ENV "GDUNLOCK_VERIFY_RESULT"

/* Runs verify in this process: its JSON document (verdict, reasons, evidence),
 * or {"error", "errno"} when it could not run. shim says what is known of the
 * shim here; shim_reasons adds its reasons (a child leaves them to its
 * parent, which has the report). */
json_t *gdu_verify_document(const gdu_verify_options *opts, const gdu_verify_shim *shim,
                            bool shim_reasons);

/* Runs `exe verify ARGS` (argv[0] = "verify") as a child with shim_path
 * preloaded (gdu_launch_find_shim, launch/launch.h), waits, and returns the child's document with the shim's report
 * and reasons added (shim filled in), or an {"error", "errno"} document
 * (with "crashed" when it died). If the child is killed, PATH is removed
 * when verify was allowed to overwrite it. */
json_t *gdu_verify_run_child(int argc, char **argv, const char *exe, const char *shim_path,
                             const gdu_verify_options *opts, gdu_verify_shim *shim);

/* In a verify child (GDU_VERIFY_RESULT_ENV set): true, with its document
 * written there (*written says whether it could be) for the parent to add
 * the shim's report to. false in any other process. */
bool gdu_verify_as_child(const gdu_verify_options *opts, bool *written);

/* verify's document with the shim where it can be: preloaded by the caller
 * already, or found and preloaded into a child (gdu_verify_run_child);
 * without it, and why, with no_shim, GDUNLOCK=0 or no shim found. */
json_t *gdu_verify_with_shim(int argc, char **argv, const gdu_verify_options *opts, bool no_shim);

/* Pieces of that document, for the CLI when it adds the shim's report. */
json_t *gdu_verify_shim_json(const gdu_verify_shim *shim);
/* The exit status of a verify document (sysexits, as the CLI's): its
 * verdict's, or for one that reached no verdict its cause's (64, 66, 69,
 * 70), 1 when the run crashed. */
int gdu_verify_document_exit_code(const json_t *doc);
/* {"error": why, "errno": err}: a run that reached no verdict. */
json_t *gdu_verify_error_json(const char *why, int err);
json_t *gdu_verify_reasons_json(const gdu_verify_result *r);

/* For a verdict other than DIRECT: runs doctor's probes live on PATH's
 * directory and appends its GDS reasons ("doctor:compat_only",
 * "doctor:impossible", ...) to doc's reasons, and its view as doc["doctor"]. */
void gdu_verify_add_doctor(json_t *doc, const char *path);

/* Reads the shim's GDUNLOCK_REPORT file and picks the entry of the GPU at
 * pci (or index gpu): tolerant of layout changes (see verify_shim.c). */
void gdu_verify_shim_read_report(const char *path, const char *pci, int gpu, gdu_verify_shim *out);
/* The same from report text in memory (len bytes, need not be NUL-terminated). */
void gdu_verify_shim_parse_report(const char *text, size_t len, const char *pci, int gpu,
                                  gdu_verify_shim *out);

/* The shim's part of the verdict: reasons appended to r (the verdict itself
 * never changes: DIRECT is proven by nvidia-fs's counters, not the shim). */
void gdu_verify_shim_reasons(const gdu_verify_shim *shim, gdu_verify_result *r);

#endif
