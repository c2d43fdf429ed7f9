/* The verify verdict, decided from evidence only.
 *
 * DIRECT needs all of: cuFile moved the data with every tried buffer kind and
 * the bytes compare equal; nvidia-fs's stats were read before and after, no
 * counter went back, Bar1-map ok grew, Bar1-map err did not, the Reads/Writes
 * error counters did not, no shadow buffer was used, and (where nvidia-fs's IO
 * stats are on) its Reads and Writes counts grew; and libcufile did not run in
 * compatibility mode. Integrity alone proves nothing about the path.
 *
 * COMPAT: the data is correct, but one of the above does not hold (each one
 * that fails becomes a reason), or cuFile could not be used at all and the
 * I/O engine moved the data correctly through the CPU instead.
 *
 * FAILED: wrong bytes anywhere, a cuFile read/write that failed after the
 * file was registered, or no correct path at all.
 *
 * Doctor's view of the machine is added afterwards (gdu_verify_add_doctor). */
#include "verify/verify.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void gdu_verify_add_reason(gdu_verify_result *r, const char *id, const char *fmt, ...)
{
    if (r->n_reasons >= GDU_VERIFY_MAX_REASONS) {
        r->reasons_dropped++;
        return;
    }
    gdu_verify_reason *reason = &r->reasons[r->n_reasons++];
    snprintf(reason->id, sizeof reason->id, "%s", id);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason->text, sizeof reason->text, fmt, ap);
    va_end(ap);
}

static void add_note(gdu_verify_result *r, const char *id, const char *text)
{
    if (r->n_notes >= sizeof r->notes / sizeof r->notes[0])
        return;
    gdu_verify_reason *n = &r->notes[r->n_notes++];
    snprintf(n->id, sizeof n->id, "%s", id);
    snprintf(n->text, sizeof n->text, "%s", text);
}

int gdu_verify_exit_code(gdu_verify_verdict v)
{
    switch (v) {
    case GDU_VERIFY_DIRECT:
        return 0;
    case GDU_VERIFY_COMPAT:
        return 2;
    default:
        return 1;
    }
}

const char *gdu_verify_verdict_name(gdu_verify_verdict v)
{
    switch (v) {
    case GDU_VERIFY_DIRECT:
        return "DIRECT";
    case GDU_VERIFY_COMPAT:
        return "COMPAT";
    default:
        return "FAILED";
    }
}

const char *gdu_verify_mem_name(gdu_verify_mem m)
{
    return m == GDU_VERIFY_MEM_VMM ? "VMM" : "cuMemAlloc";
}

/* A buffer kind whose data made the full round trip through cuFile. */
static bool buffer_round_trip(const gdu_verify_buffer *b)
{
    return b->write.ok && b->read.ok && b->compared && b->integrity_ok;
}

/* Wrong data or a failed cuFile transfer: FAILED causes. Returns how many buffer kinds moved data. */
static size_t check_buffers(const gdu_verify_evidence *ev, gdu_verify_result *r)
{
    size_t moved = 0;
    for (int m = 0; m < GDU_VERIFY_MEM_COUNT; m++) {
        const gdu_verify_buffer *b = &ev->buffers[m];
        const char *kind = gdu_verify_mem_name((gdu_verify_mem)m);
        if (b->compared && !b->integrity_ok)
            gdu_verify_add_reason(
                r, "integrity-mismatch",
                "%s: data read back with cuFileRead differs from what cuFileWrite "
                "wrote, first at byte %llu",
                kind, (unsigned long long)b->mismatch_offset);
        if (b->alloc.ran && !b->alloc.ok && !b->skipped[0])
            gdu_verify_add_reason(r, "cuda-alloc", "%s: %s", kind, b->alloc.text);
        if (b->write.ran && !b->write.ok)
            gdu_verify_add_reason(r, "cufile-write", "%s: %s", kind, b->write.text);
        if (b->read.ran && !b->read.ok)
            gdu_verify_add_reason(r, "cufile-read", "%s: %s", kind, b->read.text);
        if (buffer_round_trip(b))
            moved++;
    }
    return moved;
}

/* Why cuFile could not be used at all (first failing step). */
static void cufile_unusable_reason(const gdu_verify_evidence *ev, gdu_verify_result *r)
{
    if (!ev->cufile_load.ok)
        gdu_verify_add_reason(r, "cufile-missing", "libcufile could not be loaded: %s",
                              ev->cufile_load.text);
    else if (!ev->driver_open.ok)
        gdu_verify_add_reason(r, "cufile-driver-open", "%s", ev->driver_open.text);
    else if (!ev->handle_register.ok)
        gdu_verify_add_reason(r, "cufile-handle-register", "%s%s%s", ev->handle_register.text,
                              ev->cufile_log[0] ? "; cuFile log: " : "", ev->cufile_log);
}

static bool nvfs_delta_present(const gdu_verify_evidence *ev, enum gdu_nvfs_field f)
{
    return ev->nvfs_before && ev->nvfs_after && ev->delta.present[f];
}

/* Every DIRECT criterion about the path that does not hold becomes a reason.
 * Returns true when all hold. */
static bool direct_criteria(const gdu_verify_evidence *ev, gdu_verify_result *r)
{
    size_t before = r->n_reasons + r->reasons_dropped;
    if (!ev->nvfs_before || !ev->nvfs_after) {
        if (ev->nvfs_errno == -ENOENT)
            gdu_verify_add_reason(r, "nvfs-not-loaded",
                                  "nvidia-fs is not loaded (%s absent): without it cuFile can only "
                                  "move data through the CPU; load the nvidia-fs kernel module",
                                  GDU_NVFS_STATS_PATH);
        else
            gdu_verify_add_reason(r, "nvfs-stats-unreadable",
                                  "nvidia-fs stats could not be read, so a direct path cannot be "
                                  "proven: %s",
                                  ev->nvfs_why[0] ? ev->nvfs_why : "unknown cause");
    } else if (ev->delta.counters_reset) {
        gdu_verify_add_reason(
            r, "nvfs-stats-reset",
            "nvidia-fs counters went backwards during the run (stats were reset); "
            "run verify again");
    } else {
        if (!ev->delta.present[GDU_NVFS_BAR1_OK] || ev->delta.value[GDU_NVFS_BAR1_OK] <= 0)
            gdu_verify_add_reason(r, "bar1-map-none",
                                  "nvidia-fs Bar1-map ok did not grow: no GPU memory was mapped "
                                  "through BAR1 for this run");
        if (nvfs_delta_present(ev, GDU_NVFS_BAR1_ERR) && ev->delta.value[GDU_NVFS_BAR1_ERR] > 0)
            gdu_verify_add_reason(
                r, "bar1-map-err",
                "nvidia-fs Bar1-map err grew by %lld: the driver refused to pin GPU "
                "memory for peer DMA (on GeForce: run with the gdunlock shim)",
                (long long)ev->delta.value[GDU_NVFS_BAR1_ERR]);
        static const enum gdu_nvfs_field io_errors[] = {
            GDU_NVFS_READS_ERR, GDU_NVFS_READS_IO_STATE_ERR, GDU_NVFS_WRITES_ERR,
            GDU_NVFS_WRITES_IO_STATE_ERR};
        for (size_t i = 0; i < sizeof io_errors / sizeof io_errors[0]; i++)
            if (nvfs_delta_present(ev, io_errors[i]) && ev->delta.value[io_errors[i]] > 0)
                gdu_verify_add_reason(r, "nvfs-io-errors", "nvidia-fs %s grew by %lld",
                                      gdu_nvfs_field_label(io_errors[i]),
                                      (long long)ev->delta.value[io_errors[i]]);
        /* Registration alone maps BAR1: only the IO counters show that nvidia-fs
         * carried the transfers too (cuFile may still do POSIX I/O for a file). */
        if (ev->delta.present[GDU_NVFS_READS_N] && ev->delta.present[GDU_NVFS_WRITES_N]) {
            if (ev->delta.value[GDU_NVFS_READS_N] <= 0 || ev->delta.value[GDU_NVFS_WRITES_N] <= 0)
                gdu_verify_add_reason(
                    r, "nvfs-no-io",
                    "nvidia-fs counted Reads n %+lld, Writes n %+lld: cuFile moved "
                    "the data through its POSIX compat path, not nvidia-fs",
                    (long long)ev->delta.value[GDU_NVFS_READS_N],
                    (long long)ev->delta.value[GDU_NVFS_WRITES_N]);
        } else {
            add_note(r, "nvfs-io-stats-off",
                     "nvidia-fs IO stats are off, so it cannot be shown that the reads and writes "
                     "themselves went through nvidia-fs; enable them with 'echo 1 > "
                     "/sys/module/nvidia_fs/parameters/rw_stats_enabled' (root) and run again");
        }
        /* The counters are system-wide: say so when others were using nvidia-fs. */
        if (ev->stats_before.present[GDU_NVFS_ACTIVE_PROCESS] &&
            ev->stats_before.value[GDU_NVFS_ACTIVE_PROCESS] > 0) {
            char text[GDU_VERIFY_TEXT];
            snprintf(
                text, sizeof text,
                "%llu other process(es) had nvidia-fs open when the run started: the deltas may "
                "include their I/O; run verify on an idle machine to be sure",
                (unsigned long long)ev->stats_before.value[GDU_NVFS_ACTIVE_PROCESS]);
            add_note(r, "nvfs-shared", text);
        }
        bool shadow = nvfs_delta_present(ev, GDU_NVFS_SHADOW_BUF_MIB) &&
                      ev->delta.value[GDU_NVFS_SHADOW_BUF_MIB] > 0;
        for (size_t g = 0; g < ev->delta.n_gpus; g++)
            shadow = shadow || ev->delta.gpus[g].cache_mib > 0;
        if (shadow)
            gdu_verify_add_reason(r, "shadow-buffers",
                                  "nvidia-fs used shadow (bounce) buffers in host memory: the data "
                                  "went through the CPU");
    }
    if (ev->driver_props.ok && ev->nvfs_major == 0 && ev->nvfs_minor == 0)
        gdu_verify_add_reason(r, "cufile-compat-mode",
                              "libcufile reports no nvidia-fs driver (version 0.0): it runs in "
                              "compatibility mode (POSIX I/O through host memory)");
    for (int m = 0; m < GDU_VERIFY_MEM_COUNT; m++) {
        const gdu_verify_buffer *b = &ev->buffers[m];
        if (b->buf_register.ran && !b->buf_register.ok)
            gdu_verify_add_reason(r, "cufile-buf-register", "%s: %s",
                                  gdu_verify_mem_name((gdu_verify_mem)m), b->buf_register.text);
    }
    return r->n_reasons + r->reasons_dropped == before;
}

void gdu_verify_decide(const gdu_verify_evidence *ev, gdu_verify_result *out)
{
    memset(out, 0, sizeof *out);
    if (!ev->cuda.ok) {
        out->verdict = GDU_VERIFY_FAILED;
        gdu_verify_add_reason(out, "cuda", "%s",
                              ev->cuda.text[0] ? ev->cuda.text : "CUDA was not set up");
        return;
    }
    if (!ev->file.ok) {
        out->verdict = GDU_VERIFY_FAILED;
        gdu_verify_add_reason(out, "file", "%s",
                              ev->file.text[0] ? ev->file.text : "the file was not opened");
        return;
    }
    size_t moved = check_buffers(ev, out);
    bool bad = out->n_reasons + out->reasons_dropped > 0;
    bool cufile_usable = ev->cufile_load.ok && ev->driver_open.ok && ev->handle_register.ok;

    if (cufile_usable) {
        if (bad || moved == 0) {
            if (!bad)
                gdu_verify_add_reason(out, "cufile-no-transfer",
                                      "no buffer kind could be tried with cuFile");
            out->verdict = GDU_VERIFY_FAILED;
            return;
        }
        out->verdict = direct_criteria(ev, out) ? GDU_VERIFY_DIRECT : GDU_VERIFY_COMPAT;
        return;
    }

    /* cuFile could not be used at all: the CPU path through our engine decides. */
    cufile_unusable_reason(ev, out);
    if (bad || !ev->engine.ran || !ev->engine.ok || !ev->engine_integrity_ok) {
        out->verdict = GDU_VERIFY_FAILED;
        if (!ev->engine.ran)
            gdu_verify_add_reason(out, "engine-not-run",
                                  "the CPU-path integrity check did not run");
        else if (!ev->engine.ok)
            gdu_verify_add_reason(out, "engine-failed", "CPU-path check through the I/O engine: %s",
                                  ev->engine.text);
        else if (!ev->engine_integrity_ok)
            gdu_verify_add_reason(out, "engine-integrity-mismatch",
                                  "CPU-path check through the I/O engine: data read back differs");
        return;
    }
    out->verdict = GDU_VERIFY_COMPAT;
    gdu_verify_add_reason(out, "engine-integrity-ok",
                          "cuFile could not be used, so integrity was checked through the gdunlock "
                          "I/O engine instead (%s): data correct through the CPU path",
                          ev->engine_reason[0] ? ev->engine_reason : ev->engine_backend);
    if (!ev->nvfs_before)
        direct_criteria(ev, out);
}
