/* gdunlock run, end to end without a GPU: exit statuses, errors, and the
 * merging and printing of the reports the shim writes in CMD's processes
 * (here written by a shell standing in for a CUDA program). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

/* Sanitizer builds: the instrumented shim is preloaded into uninstrumented
 * programs (sh), which ASan allows only when told to. */
#ifndef GDU_RUN_ENV
#define GDU_RUN_ENV ""
#endif

static char out_path[] = "/tmp/gdu-test-run-out-XXXXXX";
static char err_path[] = "/tmp/gdu-test-run-err-XXXXXX";

/* Runs `gdunlock run ARGS`, stdout and stderr to files; returns the exit status. */
static int gdunlock_run(const char *args)
{
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "%s '%s' run %s >%s 2>%s", GDU_RUN_ENV, GDU_BIN, args, out_path,
             err_path);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char *slurp(const char *path)
{
    static char buf[65536];
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[n] = '\0';
    if (f)
        fclose(f);
    return buf;
}

/* A stand-in for a CUDA process: writes a shim report where the shim would. */
#define FAKE_REPORT                                                                                \
    "sh -c 'printf \"{\\\"pid\\\": %d, \\\"driver\\\": \\\"580.159.04\\\", \\\"gpus\\\": "         \
    "[{\\\"rm_device\\\": 1, "                                                                     \
    "\\\"pci\\\": \\\"0000:41:00.0\\\", \\\"mode\\\": \\\"unlocked\\\", \\\"registered\\\": 5, "   \
    "\\\"unregistered\\\": 4, \\\"live\\\": 1, \\\"failures\\\": 1, \\\"failures_by_status\\\": "  \
    "{\\\"NV_ERR_GENERIC (0xffff)\\\": 1}}]}\" $$ > \"$(dirname "                                  \
    "\"$GDUNLOCK_REPORT\")/report-$$.json\"; "                                                     \
    "echo child-output; exit 7'"

static void exit_status_passes_through(void **state)
{
    assert_int_equal(gdunlock_run("-- sh -c 'exit 3'"), 3);
    assert_non_null(strstr(slurp(err_path), "no GPU (RM) calls"));
    assert_int_equal(gdunlock_run("-- sh -c 'kill -TERM $$'"), 128 + 15);
    assert_int_equal(gdunlock_run("-- sh -c 'test \"$GDUNLOCK_TEST_DROP_NATIVE\" = 1'"), 1);
    assert_int_equal(
        gdunlock_run("--test-drop-native -- sh -c 'test \"$GDUNLOCK_TEST_DROP_NATIVE\" = 1'"), 0);
    assert_int_equal(gdunlock_run("--log debug -- sh -c 'test \"$GDUNLOCK_LOG\" = debug'"), 0);
    /* --rdma is the explicit switch (GDUNLOCK_RDMA=1 in CMD); without it CMD
     * gets no GDUNLOCK_RDMA of gdunlock's, as before --rdma existed. */
    assert_int_equal(gdunlock_run("--rdma -- sh -c 'test \"$GDUNLOCK_RDMA\" = 1'"), 0);
    assert_int_equal(gdunlock_run("-- sh -c 'test -z \"${GDUNLOCK_RDMA+set}\"'"), 0);
    assert_int_equal(
        gdunlock_run("-- sh -c 'case \"$LD_PRELOAD\" in *libgdunlock.so*) exit 0;; esac; exit 1'"),
        0);
}

static void errors(void **state)
{
    assert_int_equal(gdunlock_run(""), 64);
    assert_non_null(strstr(slurp(err_path), "no command given"));
    assert_int_equal(gdunlock_run("--log loud -- true"), 64);
    assert_int_equal(gdunlock_run("--bogus -- true"), 64);
    assert_int_equal(gdunlock_run("-- /nonexistent/program"), 66);
    assert_non_null(strstr(slurp(err_path), "cannot run '/nonexistent/program'"));
    assert_int_equal(gdunlock_run("--help"), 0);
    assert_non_null(strstr(slurp(out_path), "Usage: gdunlock run"));
}

static void report_table(void **state)
{
    assert_int_equal(gdunlock_run("-- " FAKE_REPORT), 7);
    assert_string_equal(slurp(out_path), "child-output\n");
    const char *err = slurp(err_path);
    assert_non_null(strstr(err, "0000:41:00.0"));
    assert_non_null(strstr(err, "unlocked"));
    assert_non_null(strstr(err, "1 x NV_ERR_GENERIC (0xffff)"));
}

/* The report as libgdunlock.so writes it (tests/fixtures/verify): the VA
 * space and the kernel lookup's verdict on each cuFile buffer are shown. */
static void report_table_lookup(void **state)
{
    assert_int_equal(gdunlock_run("-- sh -c 'cp \"" GDUNLOCK_FIXTURES
                                  "/verify/shim-report-gdunlock.json\" "
                                  "\"$(dirname \"$GDUNLOCK_REPORT\")/report-$$.json\"'"),
                     0);
    const char *err = slurp(err_path);
    assert_non_null(strstr(err, "VA space 0x5c000009 (the one registered with UVM)"));
    assert_non_null(
        strstr(err, "cuFile buffers: 2 registered, 1 found by nvidia-fs's lookup (model)"));
    assert_non_null(strstr(err, " found\n"));
    assert_non_null(strstr(err, "bar1-full: refused (-ENOMEM)"));
}

static void report_json(void **state)
{
    char report[] = "/tmp/gdu-test-run-report-XXXXXX";
    close(mkstemp(report));
    char args[8192];
    snprintf(args, sizeof args, "--json --report %s -- %s", report, FAKE_REPORT);
    assert_int_equal(gdunlock_run(args), 7);
    const char *out = slurp(out_path);
    json_t *doc = json_loads(strstr(out, "{"), 0, NULL);
    assert_non_null(doc);
    assert_int_equal(json_integer_value(json_object_get(doc, "exit_status")), 7);
    json_t *gpu = json_array_get(
        json_object_get(json_array_get(json_object_get(doc, "processes"), 0), "gpus"), 0);
    assert_string_equal(json_string_value(json_object_get(gpu, "mode")), "unlocked");
    json_decref(doc);
    doc = json_load_file(report, 0, NULL);
    assert_non_null(doc);
    assert_int_equal(json_array_size(json_object_get(doc, "processes")), 1);
    json_decref(doc);
    unlink(report);
}

static int setup(void **state)
{
    close(mkstemp(out_path));
    close(mkstemp(err_path));
    return 0;
}

static int teardown(void **state)
{
    unlink(out_path);
    unlink(err_path);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(exit_status_passes_through),
        cmocka_unit_test(errors),
        cmocka_unit_test(report_table),
        cmocka_unit_test(report_table_lookup),
        cmocka_unit_test(report_json),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
