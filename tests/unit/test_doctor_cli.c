/* The doctor and topo commands end to end on fixture sysroots: exit codes,
 * human and JSON output, usage errors. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

/* Quoted where it is used: the folder may hold spaces. */
#define FIX GDUNLOCK_FIXTURES "/doctor/"

static char output[1 << 18];

/* Runs gdunlock with args (a shell fragment), stdout into output; returns the exit status. */
static int gdu(const char *args)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "NO_COLOR= '%s' %s 2>/dev/null", GDUNLOCK_BIN, args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(output, 1, sizeof output - 1, p);
    output[n] = '\0';
    int status = pclose(p);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static void usage_and_errors(void **state)
{
    assert_int_equal(gdu("doctor --help"), 0);
    assert_non_null(strstr(output, "Usage: gdunlock doctor"));
    assert_non_null(strstr(output, "12 impossible"));
    assert_non_null(strstr(output, "13 unknown"));
    assert_int_equal(gdu("doctor --bogus"), 64);
    assert_int_equal(gdu("doctor /a /b"), 64);
    assert_int_equal(gdu("doctor --sysroot '" FIX "l40s-nvfs' --capture /tmp/x"), 64);
    assert_int_equal(gdu("doctor --sysroot /nonexistent-sysroot"), 66);
    assert_int_equal(gdu("doctor --sysroot '" FIX "l40s-nvfs' data/model"), 64);
    assert_int_equal(gdu("doctor /nonexistent/file"), 66);
    assert_int_equal(gdu("topo --help"), 0);
    assert_non_null(strstr(output, "NODE"));
    assert_int_equal(gdu("topo extra"), 64);
}

static void verdict_exit_codes(void **state)
{
    assert_int_equal(gdu("doctor --sysroot '" FIX "l40s-nvfs' /data/model.safetensors"), 0);
    assert_non_null(
        strstr(output, "GPUDirect Storage (/data/model.safetensors): direct (cuFile reads go"));
    assert_null(strchr(output, '\033')); /* no colour when stdout is not a terminal */
    assert_int_equal(gdu("doctor --sysroot '" FIX "rtx3060-nvfs-rebar' /data/model.safetensors"),
                     10);
    assert_non_null(strstr(output, "direct with gdunlock"));
    /* The P2PDMA route the verdict does not need: [info], no fix, no [FAIL]. */
    assert_non_null(strstr(output, "[info] GPU0 is one libcufile offers P2PDMA on: no"));
    assert_null(strstr(output, "[FAIL]"));
    assert_null(strstr(output, "fix: P2PDMA needs"));
    assert_int_equal(gdu("doctor --json --sysroot '" FIX "rtx3060-nvfs-rebar'"), 10);
    assert_non_null(strstr(output, "\"status\": \"info\""));
    assert_int_equal(gdu("doctor --sysroot '" FIX "rtx3060-no-nvfs'"), 11);
    /* No nvidia-fs, but cuFile's PCI P2PDMA path: direct. */
    assert_int_equal(gdu("doctor --json --sysroot '" FIX "l40s-p2pdma' /data/model.safetensors"),
                     0);
    assert_non_null(strstr(output, "\"direct_path\": \"p2pdma\""));
    assert_int_equal(gdu("doctor --sysroot '" FIX "h200x2-vm-virtio' /root"), 12);
    assert_non_null(strstr(output, "error 5027"));
    assert_non_null(strstr(output, "P2P GPU0<->GPU1: NVLink"));
    /* evidence missing from the capture: unknown, never the optimistic verdict */
    assert_int_equal(
        gdu("doctor --sysroot '" FIX "l40s-nvfs-missing-block' /data/model.safetensors"), 13);
    assert_non_null(
        strstr(output, "GPUDirect Storage (/data/model.safetensors): unknown (doctor cannot tell"));
    assert_non_null(strstr(output, "- unknown: the block device 259:1"));
    assert_null(strstr(output, "nothing stands in the way"));
    assert_int_equal(gdu("doctor --sysroot '" FIX "rtx3060-missing-live' /data/model.safetensors"),
                     13);
    assert_int_equal(gdu("doctor --sysroot '" FIX "rtx3060-live-garbage' /data/model.safetensors"),
                     13);
    assert_non_null(strstr(output, "gdunlock-live.json is unusable"));
    assert_int_equal(gdu("doctor --sysroot '" FIX "rtx3060-no-nvfs-bad-cufile-json'"), 13);
    assert_int_equal(gdu("doctor --json --sysroot '" FIX "h200x2-vm-missing-mountinfo' /root"), 13);
    assert_non_null(strstr(output, "\"verdict\": \"unknown\""));
    assert_non_null(strstr(output, "\"exit_code\": 13"));
}

static void no_driver_exits_69(void **state)
{
    char dir[] = "/tmp/gdu-cli-empty-XXXXXX", args[128];
    assert_non_null(mkdtemp(dir));
    snprintf(args, sizeof args, "doctor --sysroot %s", dir);
    assert_int_equal(gdu(args), 69);
    assert_non_null(strstr(output, "No NVIDIA driver is present"));
    snprintf(args, sizeof args, "topo --sysroot %s", dir);
    assert_int_equal(gdu(args), 69);
    rmdir(dir);
}

static void json_outputs(void **state)
{
    assert_int_equal(gdu("doctor --json --sysroot '" FIX "rtx4090x2-stock'"), 11);
    json_error_t err;
    json_t *j = json_loads(output, 0, &err);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "schema")), "gdunlock-doctor/2");
    assert_int_equal(json_integer_value(json_object_get(j, "exit_code")), 11);
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "gds"), "verdict")),
                        "compat_only");
    json_t *pair = json_array_get(json_object_get(j, "p2p"), 0);
    json_t *verdict = json_object_get(pair, "verdict");
    assert_string_equal(json_string_value(json_object_get(verdict, "class")), "staged only");
    assert_string_equal(json_string_value(json_object_get(verdict, "cause")), "sku_lock");
    assert_false(json_is_true(json_object_get(verdict, "p2p")));
    assert_string_equal(json_string_value(json_object_get(pair, "pcie_path")), "PIX");
    json_t *gpu = json_array_get(json_object_get(j, "gpus"), 1);
    assert_int_equal(json_integer_value(json_object_get(gpu, "bar1_bytes")), 32ll << 30);
    assert_int_equal(json_integer_value(json_object_get(gpu, "geforce")), 1);
    assert_true(json_array_size(json_object_get(j, "findings")) > 10);
    json_decref(j);

    assert_int_equal(gdu("topo --json --sysroot '" FIX "rtx4090x2-stock'"), 0);
    j = json_loads(output, 0, &err);
    assert_non_null(j);
    json_t *row = json_array_get(json_object_get(j, "matrix"), 0);
    json_t *paths = json_object_get(row, "paths");
    assert_string_equal(json_string_value(json_object_get(paths, "GPU1")), "PIX");
    assert_string_equal(json_string_value(json_object_get(paths, "nvme0")), "PHB");
    json_decref(j);
    assert_int_equal(gdu("topo --sysroot '" FIX "rtx3060-nvfs-rebar'"), 0);
    assert_non_null(strstr(output, "mounted: /data (ext4)"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(usage_and_errors),
        cmocka_unit_test(verdict_exit_codes),
        cmocka_unit_test(no_driver_exits_69),
        cmocka_unit_test(json_outputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
