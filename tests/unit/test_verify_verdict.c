/* verify's verdict logic, shim reasons, JSON document and data pattern, from
 * hand-made evidence and recorded nvidia-fs stats. */
#include "verify/verify.h"
#include "verify/verify_internal.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define STATS(name) GDUNLOCK_FIXTURES "/nvfs-stats/" name
#define SHIM(name) GDUNLOCK_FIXTURES "/verify/" name

static gdu_verify_evidence ev; /* large: static, reset by each setup */
static gdu_verify_result res;

static void ok(gdu_verify_call *c, const char *text)
{
    gdu_verify_call_set(c, true, 0, "%s", text);
}

static void load_stats(const char *before, const char *after)
{
    char why[256];
    ev.nvfs_before = gdu_nvfs_stats_read(before, &ev.stats_before, why, sizeof why) == 0;
    ev.nvfs_after = gdu_nvfs_stats_read(after, &ev.stats_after, why, sizeof why) == 0;
    assert_true(ev.nvfs_before && ev.nvfs_after);
    gdu_nvfs_stats_delta(&ev.stats_before, &ev.stats_after, &ev.delta);
}

/* nvidia-fs stats absent (the H200 machine). */
static void no_nvfs(void)
{
    ev.nvfs_before = ev.nvfs_after = false;
    ev.nvfs_errno = -ENOENT;
    snprintf(ev.nvfs_why, sizeof ev.nvfs_why, "%s does not exist: nvidia-fs is not loaded",
             GDU_NVFS_STATS_PATH);
}

/* Evidence of a clean direct run; tests break one thing at a time. */
static int setup_direct(void **state)
{
    gdu_verify_options o = {.path = "/mnt/nvme/verify.bin", .size = 16u << 20};
    gdu_verify_evidence_init(&ev, &o);
    ok(&ev.cuda, "GPU 0 NVIDIA GeForce RTX 4090 (0000:01:00.0)");
    snprintf(ev.gpu_pci, sizeof ev.gpu_pci, "0000:01:00.0");
    ok(&ev.file, "opened with O_DIRECT");
    ok(&ev.cufile_load, "/usr/local/cuda/lib64/libcufile.so.0");
    ok(&ev.driver_open, "cuFileDriverOpen: CU_FILE_SUCCESS (0)");
    ok(&ev.driver_props, "cuFileDriverGetProperties: CU_FILE_SUCCESS (0)");
    ev.nvfs_major = 2;
    ev.nvfs_minor = 28;
    ok(&ev.handle_register, "cuFileHandleRegister: CU_FILE_SUCCESS (0)");
    for (int m = 0; m < GDU_VERIFY_MEM_COUNT; m++) {
        gdu_verify_buffer *b = &ev.buffers[m];
        ok(&b->alloc, "2 x 16 MiB");
        ok(&b->buf_register, "cuFileBufRegister: CU_FILE_SUCCESS (0)");
        ok(&b->write, "cuFileWrite: 16777216 bytes");
        ok(&b->read, "cuFileRead: 16777216 bytes");
        b->compared = true;
        b->integrity_ok = true;
    }
    load_stats(STATS("direct-before.txt"), STATS("direct-after.txt"));
    ev.shim.active = true;
    snprintf(ev.shim.mode, sizeof ev.shim.mode, "unlocked");
    ev.shim.have_report = true;
    return 0;
}

/* The H200 machine: no nvidia-fs, cuFile in compat mode, handle refused with 5027. */
static void h200_state(void)
{
    no_nvfs();
    ev.nvfs_major = ev.nvfs_minor = 0;
    ev.compat_allowed = true;
    gdu_verify_call_set(&ev.handle_register, false, 5027,
                        "cuFileHandleRegister(/root/v.bin): CU_FILE_HANDLE_NOT_REGISTERED (5027)");
    for (int m = 0; m < GDU_VERIFY_MEM_COUNT; m++) {
        gdu_verify_buffer *b = &ev.buffers[m];
        memset(&b->buf_register, 0, sizeof b->buf_register);
        memset(&b->write, 0, sizeof b->write);
        memset(&b->read, 0, sizeof b->read);
        b->compared = b->integrity_ok = false;
    }
    ok(&ev.engine, "wrote and read back 16777216 bytes, identical");
    snprintf(ev.engine_backend, sizeof ev.engine_backend, "pipeline");
    snprintf(ev.engine_reason, sizeof ev.engine_reason, "pipeline: cufile refused file");
    ev.engine_integrity_ok = true;
}

static bool has_reason(const char *id)
{
    for (size_t i = 0; i < res.n_reasons; i++)
        if (strcmp(res.reasons[i].id, id) == 0)
            return true;
    return false;
}

static const char *reason_text(const char *id)
{
    for (size_t i = 0; i < res.n_reasons; i++)
        if (strcmp(res.reasons[i].id, id) == 0)
            return res.reasons[i].text;
    fail_msg("no reason %s", id);
    return "";
}

static void test_direct(void **state)
{
    gdu_verify_decide(&ev, &res);
    assert_int_equal(res.verdict, GDU_VERIFY_DIRECT);
    assert_int_equal(res.n_reasons, 0);
    assert_int_equal(res.n_notes, 0); /* IO stats on in the fixtures: nothing unproven */
    assert_int_equal(gdu_verify_exit_code(res.verdict), 0);
    assert_string_equal(gdu_verify_verdict_name(res.verdict), "DIRECT");
}

static void test_compat_nvfs_saw_no_io(void **state)
{
    /* Registration mapped BAR1, but nvidia-fs carried none of the reads. */
    ev.delta.value[GDU_NVFS_READS_N] = 0;
    gdu_verify_decide(&ev, &res);
    assert_int_equal(res.verdict, GDU_VERIFY_COMPAT);
    assert_non_null(strstr(reason_text("nvfs-no-io"), "Reads n +0"));
}

static void test_direct_io_stats_off_note(void **state)
{
    ev.delta.present[GDU_NVFS_READS_N] = ev.delta.present[GDU_NVFS_WRITES_N] = false;
    gdu_verify_decide(&ev, &res);
    assert_int_equal(res.verdict, GDU_VERIFY_DIRECT);
    assert_int_equal(res.n_reasons, 0);
    assert_int_equal(res.n_notes, 1);
    assert_string_equal(res.notes[0].id, "nvfs-io-stats-off");
    json_t *doc = gdu_verify_to_json(&ev, &res);
    assert_int_equal(json_array_size(json_object_get(doc, "notes")), 1);
    json_decref(doc);
}

static void test_direct_shared_note(void **state)
{
    ev.stats_before.value[GDU_NVFS_ACTIVE_PROCESS] = 2;
    gdu_verify_decide(&ev, &res);
    assert_int_equal(res.verdict, GDU_VERIFY_DIRECT);
    assert_int_equal(res.n_notes, 1);
    assert_string_equal(res.notes[0].id, "nvfs-shared");
    assert_non_null(strstr(res.notes[0].text, "2 other process(es)"));
}

static void test_direct_without_vmm(void **state)
{
    gdu_verify_buffer *vmm = &ev.buffers[GDU_VERIFY_MEM_VMM];
    memset(vmm, 0, sizeof *vmm);
    gdu_verify_call_set(&vmm->alloc, false, -ENOTSUP,
                        "the device does not support virtual memory management");
    snprintf(vmm->skipped, sizeof vmm->skipped, "no VMM");
    gdu_verify_decide(&ev, &res);
    assert_int_equal(res.verdict, GDU_VERIFY_DIRECT);
}

static void test_compat_bar1_err(void **state)
{
    load_stats(STATS("bar1-err-before.txt"), STATS("bar1-err-after.txt"));
    gdu_verify_decide(&ev, &res);
    assert_int_equal(res.verdict, GDU_VERIFY_COMPAT);
    assert_int_equal(gdu_verify_exit_code(res.verdict), 2);
    assert_true(has_reason("bar1-map-err"));
    assert_non_null(strstr(reason_text("bar1-map-err"), "grew by 2"));
    assert_true(has_reason("bar1-map-none"));
}

static void test_compat_shadow_buffers(void **state)
{
    load_stats(STATS("shadow-before.txt"), STATS("shadow-after.txt"));
    gdu_verify_decide(&ev, &res);
    assert_int_equal(res.verdict, GDU_VERIFY_COMPAT);
    assert_true(has_reason("shadow-buffers"));
}

static void test_compat_h200_5027(void **state)
{
    h200_state();
    gdu_verify_decide(&ev, &res);
    assert_int_equal(res.verdict, GDU_VERIFY_COMPAT);
    assert_non_null(
        strstr(reason_text("cufile-handle-register"), "CU_FILE_HANDLE_NOT_REGISTERED (5027)"));
    assert_non_null(strstr(reason_text("engine-integrity-ok"), "I/O engine"));
    assert_true(has_reason("nvfs-not-loaded"));
    assert_true(has_reason("cufile-compat-mode"));
    /* the cause comes first */
    assert_string_equal(res.reasons[0].id, "cufile-handle-register");
}

static void test_compat_cufile_compat_mode(void **state)
{
    /* No nvidia-fs, but cuFile accepted the file and moved the data in compat mode. */
    no_nvfs();
    ev.nvfs_major = ev.nvfs_minor = 0;
    gdu_verify_decide(&ev, &res);
    assert_int_equal(res.verdict, GDU_VERIFY_COMPAT);
    assert_true(has_reason("nvfs-not-loaded"));
    assert_true(has_reason("cufile-compat-mode"));
    assert_false(has_reason("engine-integrity-ok"));
}

static void test_compat_no_cufile(void **state)
{
    h200_state();
    gdu_verify_call_set(&ev.cufile_load, false, -ENOENT, "libcufile.so.0: not found");
    memset(&ev.driver_open, 0, sizeof ev.driver_open);
    memset(&ev.driver_props, 0, sizeof ev.driver_props);
    memset(&ev.handle_register, 0, sizeof ev.handle_register);
    gdu_verify_decide(&ev, &res);
    assert_int_equal(res.verdict, GDU_VERIFY_COMPAT);
    assert_true(has_reason("cufile-missing"));
    assert_false(has_reason("cufile-compat-mode")); /* props never read */
}

static void test_compat_buf_register_failed(void **state)
{
    gdu_verify_call_set(&ev.buffers[GDU_VERIFY_MEM_VMM].buf_register, false, 5036,
                        "cuFileBufRegister: CU_FILE_GPU_MEMORY_PINNING_FAILED (5036)");
    gdu_verify_decide(&ev, &res);
    assert_int_equal(res.verdict, GDU_VERIFY_COMPAT);
    assert_non_null(strstr(reason_text("cufile-buf-register"), "VMM"));
}

static void test_compat_counters_reset(void **state)
{
    load_stats(STATS("direct-after.txt"), STATS("direct-before.txt"));
    gdu_verify_decide(&ev, &res);
    assert_int_equal(res.verdict, GDU_VERIFY_COMPAT);
    assert_true(has_reason("nvfs-stats-reset"));
}

static void test_compat_io_errors(void **state)
{
    ev.delta.value[GDU_NVFS_READS_IO_STATE_ERR] = 3;
    gdu_verify_decide(&ev, &res);
    assert_int_equal(res.verdict, GDU_VERIFY_COMPAT);
    assert_non_null(strstr(reason_text("nvfs-io-errors"), "Reads io_state_err grew by 3"));
}

static void test_failed_integrity(void **state)
{
    ev.buffers[GDU_VERIFY_MEM_VMM].integrity_ok = false;
    ev.buffers[GDU_VERIFY_MEM_VMM].mismatch_offset = 65536;
    gdu_verify_decide(&ev, &res);
    assert_int_equal(res.verdict, GDU_VERIFY_FAILED);
    assert_int_equal(gdu_verify_exit_code(res.verdict), 1);
    assert_non_null(strstr(reason_text("integrity-mismatch"), "VMM"));
    assert_non_null(strstr(reason_text("integrity-mismatch"), "65536"));
}

static void test_failed_cufile_read(void **state)
{
    gdu_verify_buffer *b = &ev.buffers[GDU_VERIFY_MEM_CUMEMALLOC];
    gdu_verify_call_set(&b->read, false, 5010, "cuFileRead: CU_FILE_NVFS_DRIVER_ERROR (5010)");
    b->compared = b->integrity_ok = false;
    gdu_verify_decide(&ev, &res);
    assert_int_equal(res.verdict, GDU_VERIFY_FAILED);
    assert_non_null(strstr(reason_text("cufile-read"), "CU_FILE_NVFS_DRIVER_ERROR (5010)"));
}

static void test_failed_engine(void **state)
{
    h200_state();
    gdu_verify_call_set(&ev.engine, false, -EIO, "engine read: EIO at offset 4096");
    ev.engine_integrity_ok = false;
    gdu_verify_decide(&ev, &res);
    assert_int_equal(res.verdict, GDU_VERIFY_FAILED);
    assert_true(has_reason("cufile-handle-register"));
    assert_true(has_reason("engine-failed"));

    h200_state();
    ev.engine_integrity_ok = false;
    gdu_verify_decide(&ev, &res);
    assert_int_equal(res.verdict, GDU_VERIFY_FAILED);
    assert_true(has_reason("engine-integrity-mismatch"));

    h200_state();
    memset(&ev.engine, 0, sizeof ev.engine);
    gdu_verify_decide(&ev, &res);
    assert_int_equal(res.verdict, GDU_VERIFY_FAILED);
    assert_true(has_reason("engine-not-run"));
}

static void test_failed_setup(void **state)
{
    gdu_verify_call_set(&ev.file, false, -EACCES, "cannot create /x: Permission denied");
    gdu_verify_decide(&ev, &res);
    assert_int_equal(res.verdict, GDU_VERIFY_FAILED);
    assert_true(has_reason("file"));
    gdu_verify_call_set(&ev.cuda, false, -ENODEV, "libcuda: libcuda.so.1: not found");
    gdu_verify_decide(&ev, &res);
    assert_int_equal(res.verdict, GDU_VERIFY_FAILED);
    assert_true(has_reason("cuda"));
}

static void test_failed_nothing_moved(void **state)
{
    for (int m = 0; m < GDU_VERIFY_MEM_COUNT; m++) {
        memset(&ev.buffers[m], 0, sizeof ev.buffers[m]);
        snprintf(ev.buffers[m].skipped, sizeof ev.buffers[m].skipped, "skipped");
    }
    gdu_verify_decide(&ev, &res);
    assert_int_equal(res.verdict, GDU_VERIFY_FAILED);
    assert_true(has_reason("cufile-no-transfer"));
}

static void test_reason_overflow(void **state)
{
    gdu_verify_result r;
    memset(&r, 0, sizeof r);
    for (int i = 0; i < GDU_VERIFY_MAX_REASONS + 5; i++)
        gdu_verify_add_reason(&r, "x", "reason %d %s", i, "a long text that is cut");
    assert_int_equal(r.n_reasons, GDU_VERIFY_MAX_REASONS);
    assert_int_equal(r.reasons_dropped, 5);
}

static void test_shim_reasons(void **state)
{
    gdu_verify_shim shim;
    memset(&shim, 0, sizeof shim);
    memset(&res, 0, sizeof res);
    res.verdict = GDU_VERIFY_DIRECT;
    gdu_verify_shim_reasons(&shim, &res);
    assert_int_equal(res.n_reasons, 0); /* DIRECT needs no explanation */

    res.verdict = GDU_VERIFY_COMPAT;
    snprintf(shim.why_inactive, sizeof shim.why_inactive, "disabled with --no-shim");
    gdu_verify_shim_reasons(&shim, &res);
    assert_non_null(strstr(reason_text("shim-inactive"), "--no-shim"));

    memset(&res, 0, sizeof res);
    res.verdict = GDU_VERIFY_COMPAT;
    shim.active = true;
    shim.have_report = true;
    snprintf(shim.mode, sizeof shim.mode, "failed");
    snprintf(shim.reason, sizeof shim.reason, "NV503C alloc: NV_ERR_STATE_IN_USE (0x63)");
    gdu_verify_shim_reasons(&shim, &res);
    assert_non_null(strstr(reason_text("shim-failed"), "0x63"));

    memset(&res, 0, sizeof res);
    res.verdict = GDU_VERIFY_COMPAT;
    snprintf(shim.mode, sizeof shim.mode, "native");
    gdu_verify_shim_reasons(&shim, &res);
    assert_true(has_reason("shim-native"));

    memset(&res, 0, sizeof res);
    res.verdict = GDU_VERIFY_FAILED;
    shim.have_report = false;
    snprintf(shim.report_error, sizeof shim.report_error, "shim report x unreadable");
    gdu_verify_shim_reasons(&shim, &res);
    assert_true(has_reason("shim-no-report"));
}

static void read_shim(const char *file, const char *pci, int gpu, gdu_verify_shim *s)
{
    memset(s, 0, sizeof *s);
    gdu_verify_shim_read_report(file, pci, gpu, s);
}

static void test_shim_report_layouts(void **state)
{
    gdu_verify_shim s;
    read_shim(SHIM("shim-report-array.json"), "0000:C1:00.0", 0, &s);
    assert_true(s.have_report);
    assert_string_equal(s.mode, "failed"); /* PCI wins over index, case-insensitive */
    assert_non_null(strstr(s.reason, "0x63"));
    read_shim(SHIM("shim-report-array.json"), "", 0, &s);
    assert_string_equal(s.mode, "native");
    read_shim(SHIM("shim-report-object.json"), "0000:41:00.0", 3, &s);
    assert_string_equal(s.mode, "unlocked");
    read_shim(SHIM("shim-report-toplevel-array.json"), "00000000:41:00.0", 0, &s);
    assert_string_equal(s.mode, "failed");
    read_shim(SHIM("shim-report-single-unmatched.json"), "0000:41:00.0", 0, &s);
    assert_string_equal(s.mode, "unlocked");
    assert_string_equal(s.report_error, "");
    read_shim(SHIM("shim-report-array.json"), "0000:99:00.0", 7, &s);
    assert_string_equal(s.mode, "");
    assert_non_null(strstr(s.report_error, "no entry for GPU 7"));
    /* the layout libgdunlock.so writes (src/shim/shim_report.c) */
    read_shim(SHIM("shim-report-gdunlock.json"), "0000:C1:00.0", 0, &s);
    assert_string_equal(s.mode, "native");
    read_shim(SHIM("shim-report-gdunlock.json"), "0000:41:00.0", 1, &s);
    assert_string_equal(s.mode, "unlocked");
    assert_int_equal(s.registered, 6);
    assert_int_equal(s.unregistered, 6);
    /* the kernel lookup's verdict on the buffers handed to cuFile */
    assert_int_equal(s.cufile_registered, 2);
    assert_int_equal(s.cufile_found, 1);
    assert_non_null(strstr(s.lookup_refusal, "-ENOMEM"));
    gdu_verify_result r = {.verdict = GDU_VERIFY_COMPAT};
    s.active = true;
    gdu_verify_shim_reasons(&s, &r);
    assert_int_equal(r.n_reasons, 1);
    assert_string_equal(r.reasons[0].id, "kernel-lookup-refused");
    assert_non_null(strstr(r.reasons[0].text, "1 of the 2 buffers"));
    assert_non_null(strstr(r.reasons[0].text, "Resizable BAR"));
    read_shim(SHIM("shim-report-toplevel-array.json"), "41:00.0", 0, &s);
    assert_int_equal(s.registered, -1); /* not in that report */
    assert_int_equal(s.cufile_registered, -1);
    read_shim(SHIM("shim-report-truncated.json"), "0000:41:00.0", 0, &s);
    assert_false(s.have_report);
    assert_non_null(strstr(s.report_error, "unreadable"));
    /* from memory, not NUL-terminated */
    const char text[] = "{\"gpus\": [{\"pci\": \"0000:41:00.0\", \"mode\": \"unlocked\"}]}XYZ";
    gdu_verify_shim_parse_report(text, sizeof text - 4, "41:00.0", 0, &s);
    assert_string_equal(s.mode, "unlocked");
    gdu_verify_shim_parse_report(text, 10, "41:00.0", 0, &s);
    assert_false(s.have_report);
    read_shim(SHIM("no-such-report.json"), "0000:41:00.0", 0, &s);
    assert_false(s.have_report);
    assert_non_null(strstr(s.report_error, "wrote no report"));
}

static void test_json_document(void **state)
{
    h200_state();
    /* a path that is not UTF-8 must not break the document, nor be lost */
    snprintf(ev.path, sizeof ev.path, "/tmp/\xff\xfe-verify.bin");
    gdu_verify_decide(&ev, &res);
    json_t *doc = gdu_verify_to_json(&ev, &res);
    assert_non_null(doc);
    assert_string_equal(json_string_value(json_object_get(doc, "verdict")), "COMPAT");
    assert_int_equal(json_integer_value(json_object_get(doc, "exit_code")), 2);
    assert_string_equal(json_string_value(json_object_get(doc, "gdunlock")), GDUNLOCK_VERSION);
    const json_t *file = json_object_get(doc, "file");
    assert_string_equal(json_string_value(json_object_get(file, "path")),
                        "/tmp/\xef\xbf\xbd\xef\xbf\xbd-verify.bin");
    assert_string_equal(json_string_value(json_object_get(file, "path_escaped")),
                        "/tmp/\\xff\\xfe-verify.bin");
    json_t *reasons = json_object_get(doc, "reasons");
    assert_int_equal(json_array_size(reasons), res.n_reasons);
    const json_t *handle = json_object_get(json_object_get(doc, "cufile"), "handle_register");
    assert_int_equal(json_integer_value(json_object_get(handle, "code")), 5027);
    assert_false(json_is_true(json_object_get(handle, "ok")));
    const json_t *nv = json_object_get(doc, "nvidia_fs");
    assert_false(json_is_true(json_object_get(nv, "before")));
    assert_non_null(strstr(json_string_value(json_object_get(nv, "error")), "not loaded"));
    assert_true(json_is_true(json_object_get(json_object_get(doc, "engine"), "integrity_ok")));
    assert_int_equal(json_array_size(json_object_get(doc, "buffers")), GDU_VERIFY_MEM_COUNT);
    json_decref(doc);
}

static void test_json_deltas(void **state)
{
    gdu_verify_decide(&ev, &res);
    json_t *doc = gdu_verify_to_json(&ev, &res);
    const json_t *nv = json_object_get(doc, "nvidia_fs");
    const json_t *delta = json_object_get(nv, "delta");
    assert_int_equal(json_integer_value(json_object_get(delta, "bar1_map.ok")), 2);
    assert_int_equal(json_integer_value(json_object_get(delta, "bar1_map.err")), 0);
    assert_int_equal(json_integer_value(json_object_get(delta, "reads.io_state_err")), 0);
    assert_string_equal(json_string_value(json_object_get(nv, "driver_version")), "2.28.4");
    const json_t *gpu = json_array_get(json_object_get(nv, "gpus"), 0);
    assert_int_equal(json_integer_value(json_object_get(gpu, "registered_mib_delta")), 32);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(doc, "cufile"), "nvfs_version")), "2.28");
    json_decref(doc);
}

#define T(f) cmocka_unit_test_setup(f, setup_direct)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_direct),
        T(test_direct_without_vmm),
        T(test_compat_nvfs_saw_no_io),
        T(test_direct_io_stats_off_note),
        T(test_direct_shared_note),
        T(test_compat_bar1_err),
        T(test_compat_shadow_buffers),
        T(test_compat_h200_5027),
        T(test_compat_cufile_compat_mode),
        T(test_compat_no_cufile),
        T(test_compat_buf_register_failed),
        T(test_compat_counters_reset),
        T(test_compat_io_errors),
        T(test_failed_integrity),
        T(test_failed_cufile_read),
        T(test_failed_engine),
        T(test_failed_setup),
        T(test_failed_nothing_moved),
        T(test_reason_overflow),
        T(test_shim_reasons),
        T(test_shim_report_layouts),
        T(test_json_document),
        T(test_json_deltas),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
