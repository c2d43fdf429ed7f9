/* The shim-launch contract of gdunlock run and verify: finding
 * libgdunlock.so next to the binary or in the install's library folder,
 * preloading it ahead of what LD_PRELOAD held, and reading reports (a FIFO
 * in a report's place is never opened). */
#include "launch/launch.h"

#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

static char top[512];

static void path_of(char *out, size_t len, const char *rel)
{
    int n = snprintf(out, len, "%s/%s", top, rel);
    assert_true(n > 0 && (size_t)n < len);
}

static void put(const char *rel, const char *text)
{
    char p[PATH_MAX];
    path_of(p, sizeof p, rel);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void dir_at(const char *rel)
{
    char p[PATH_MAX];
    path_of(p, sizeof p, rel);
    assert_int_equal(mkdir(p, 0755), 0);
}

static int setup(void **state)
{
    snprintf(top, sizeof top, "%s/gdunlock-test-launch-XXXXXX",
             getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    assert_non_null(mkdtemp(top));
    dir_at("build");
    dir_at("build/bin");
    dir_at("build/lib");
    put("build/lib/libgdunlock.so", "");
    dir_at("usr");
    dir_at("usr/bin");
    dir_at("usr/lib");
    dir_at("usr/lib/x86_64-linux-gnu");
    put("usr/lib/x86_64-linux-gnu/libgdunlock.so", "");
    return 0;
}

static int teardown(void **state)
{
    char cmd[sizeof top + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
    return system(cmd) == 0 ? 0 : -1;
}

/* The build folder (and a PREFIX/lib install): ../lib next to the binary. */
static void test_shim_next_to_binary(void **state)
{
    char exe[PATH_MAX], shim[2 * PATH_MAX], want[PATH_MAX];
    path_of(exe, sizeof exe, "build/bin/gdunlock");
    path_of(want, sizeof want, "build/bin/../lib/libgdunlock.so");
    assert_true(gdu_launch_find_shim_in(exe, "/nonexistent", shim, sizeof shim));
    assert_string_equal(shim, want);
}

/* An install whose library folder is not ../lib (Debian's multiarch one). */
static void test_shim_in_install_libdir(void **state)
{
    char exe[PATH_MAX], shim[2 * PATH_MAX], libdir[PATH_MAX], want[PATH_MAX];
    path_of(exe, sizeof exe, "usr/bin/gdunlock");
    path_of(libdir, sizeof libdir, "usr/lib/x86_64-linux-gnu");
    path_of(want, sizeof want, "usr/lib/x86_64-linux-gnu/libgdunlock.so");
    assert_true(gdu_launch_find_shim_in(exe, libdir, shim, sizeof shim));
    assert_string_equal(shim, want);
}

/* A relative libdir is under the binary's prefix, wherever the tree was
 * installed or moved to (cmake --install --prefix anywhere). */
static void test_shim_in_relative_libdir(void **state)
{
    char exe[PATH_MAX], shim[2 * PATH_MAX], want[PATH_MAX];
    path_of(exe, sizeof exe, "usr/bin/gdunlock");
    path_of(want, sizeof want, "usr/bin/../lib/x86_64-linux-gnu/libgdunlock.so");
    assert_true(gdu_launch_find_shim_in(exe, "lib/x86_64-linux-gnu", shim, sizeof shim));
    assert_string_equal(shim, want);
    assert_false(gdu_launch_find_shim_in(exe, "lib64", shim, sizeof shim));
}

/* Nowhere: both places are named. */
static void test_shim_missing_names_both(void **state)
{
    char exe[PATH_MAX], shim[2 * PATH_MAX];
    path_of(exe, sizeof exe, "usr/bin/gdunlock");
    assert_false(gdu_launch_find_shim_in(exe, "/nonexistent/lib", shim, sizeof shim));
    assert_non_null(
        strstr(shim, "usr/bin/../lib/libgdunlock.so or /nonexistent/lib/libgdunlock.so"));
    assert_false(gdu_launch_find_shim_in(exe, NULL, shim, sizeof shim));
    assert_null(strstr(shim, " or "));
    /* An installed libdir of "lib" is ../lib itself: one place, named once. */
    assert_false(gdu_launch_find_shim_in(exe, "lib", shim, sizeof shim));
    assert_null(strstr(shim, " or "));
    assert_non_null(strstr(shim, "usr/bin/../lib/libgdunlock.so"));
}

static void test_preload_goes_first(void **state)
{
    setenv("LD_PRELOAD", "libother.so", 1);
    gdu_launch_preload("/x/libgdunlock.so", "/tmp/r-%p.json");
    assert_string_equal(getenv("LD_PRELOAD"), "/x/libgdunlock.so:libother.so");
    assert_string_equal(getenv("GDUNLOCK_REPORT"), "/tmp/r-%p.json");
    unsetenv("LD_PRELOAD");
    gdu_launch_preload("/x/libgdunlock.so", "r.json");
    assert_string_equal(getenv("LD_PRELOAD"), "/x/libgdunlock.so");
    unsetenv("LD_PRELOAD");
    unsetenv("GDUNLOCK_REPORT");
}

/* Named in LD_PRELOAD is not loaded: only a shim in this process counts. */
static void test_shim_loaded_is_what_is_mapped(void **state)
{
    setenv("LD_PRELOAD", "/x/libgdunlock.so", 1);
    assert_false(gdu_launch_shim_preloaded());
    unsetenv("LD_PRELOAD");
}

/* A shim path with a space or ':' (which ld.so splits LD_PRELOAD at) is
 * preloaded through a link in the run's own folder; where that folder has
 * them too, refused. */
static void test_preload_path(void **state)
{
    char shim[PATH_MAX], dir[PATH_MAX], out[PATH_MAX + 32], why[512], link[PATH_MAX];
    path_of(shim, sizeof shim, "build/lib/libgdunlock.so");
    path_of(dir, sizeof dir, "usr");
    assert_int_equal(gdu_launch_preload_path(shim, dir, out, sizeof out, why, sizeof why), 0);
    assert_string_equal(out, shim);
    dir_at("pre fix:1");
    path_of(shim, sizeof shim, "pre fix:1/libgdunlock.so");
    put("pre fix:1/libgdunlock.so", "");
    assert_int_equal(gdu_launch_preload_path(shim, dir, out, sizeof out, why, sizeof why), 0);
    char want[PATH_MAX + 32];
    snprintf(want, sizeof want, "%s/libgdunlock.so", dir);
    assert_string_equal(out, want);
    ssize_t n = readlink(out, link, sizeof link - 1);
    assert_true(n > 0);
    link[n] = '\0';
    assert_non_null(strstr(link, "pre fix:1/libgdunlock.so"));
    unlink(out);
    path_of(dir, sizeof dir, "pre fix:1");
    assert_int_equal(gdu_launch_preload_path(shim, dir, out, sizeof out, why, sizeof why), -EINVAL);
    assert_non_null(strstr(why, "has a space or ':'"));
}

static void test_load_report(void **state)
{
    char p[PATH_MAX], why[256];
    put("report.json", "{\"pid\": 7, \"gpus\": []}");
    path_of(p, sizeof p, "report.json");
    json_t *r = gdu_launch_load_report(p, why, sizeof why);
    assert_non_null(r);
    assert_int_equal(json_integer_value(json_object_get(r, "pid")), 7);
    json_decref(r);
    put("garbage.json", "{\"pid\": ");
    path_of(p, sizeof p, "garbage.json");
    assert_null(gdu_launch_load_report(p, why, sizeof why));
    /* A FIFO nobody writes: refused at once, not waited on. */
    path_of(p, sizeof p, "fifo.json");
    assert_int_equal(mkfifo(p, 0600), 0);
    assert_null(gdu_launch_load_report(p, why, sizeof why));
    assert_string_equal(why, "a FIFO, not a regular file");
    path_of(p, sizeof p, "absent.json");
    assert_null(gdu_launch_load_report(p, why, sizeof why));
    assert_string_equal(why, strerror(ENOENT));
}

/* Runs sh -c script with shim preloaded; returns its exit status. */
static int run_sh(const char *script, const char *shim, gdu_launch_result *r)
{
    char why[512];
    char *argv[] = {"/bin/sh", "-c", (char *)script, NULL};
    gdu_launch_options o = {0};
    assert_int_equal(gdu_launch_run(argv, shim, &o, r, why, sizeof why), 0);
    assert_true(WIFEXITED(r->status));
    assert_int_equal(r->ending_signal, 0);
    return WEXITSTATUS(r->status);
}

/* gdunlock run's launch: every readable report-*.json of the program's
 * processes, the unreadable ones named, anything else left unread; the
 * folder gone afterwards. The shim path is a file that is no library (the
 * loader says so and goes on), so the program writes the reports itself. */
static void test_run_collects_reports(void **state)
{
    char fake[PATH_MAX];
    path_of(fake, sizeof fake, "build/lib/libgdunlock.so");
    gdu_launch_result r;
    assert_int_equal(
        run_sh("r=$(printf %s \"$GDUNLOCK_REPORT\" | sed \"s/%p/$$/\"); d=${r%/*}; "
               "printf '{\"pid\": %d}' $$ >\"$r\"; printf '{' >\"$d/report-1.json\"; "
               "printf '{}' >\"$d/report-2.json.tmp\"; mkfifo \"$d/report-3.json\"; exit 3",
               fake, &r),
        3);
    assert_false(r.shim_loaded); /* not a library: ld.so skipped it */
    assert_int_equal(json_array_size(r.processes), 1);
    assert_true(json_is_integer(json_object_get(json_array_get(r.processes, 0), "pid")));
    assert_int_equal(json_array_size(r.unreadable), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(r.unreadable, 0), "file")),
                        "report-1.json");
    gdu_launch_result_free(&r);
}

/* The real shim from a folder whose path has a space and a ':': it loads in
 * the program and in the programs that one starts, and says so. */
static void test_run_shim_from_odd_path(void **state)
{
    char odd[PATH_MAX];
    dir_at("odd lib:2");
    path_of(odd, sizeof odd, "odd lib:2/libgdunlock.so");
    assert_int_equal(symlink(GDU_SHIM, odd), 0);
    setenv("ASAN_OPTIONS", "verify_asan_link_order=0:detect_leaks=0", 1);
    gdu_launch_result r;
    assert_int_equal(run_sh("grep -q libgdunlock.so /proc/$$/maps && "
                            "sh -c 'grep -q libgdunlock.so /proc/$$/maps' && "
                            "test -z \"$GDUNLOCK_LAUNCH_MARK\"",
                            odd, &r),
                     0);
    assert_true(r.shim_loaded);
    gdu_launch_result_free(&r);
}

static void test_run_cannot_start(void **state)
{
    char why[256];
    char *argv[] = {"/nonexistent/program", NULL};
    gdu_launch_options o = {0};
    gdu_launch_result r;
    assert_int_equal(gdu_launch_run(argv, "/nonexistent/libgdunlock.so", &o, &r, why, sizeof why),
                     0);
    assert_int_equal(r.status, -1);
    assert_int_equal(r.exec_errno, ENOENT);
    assert_int_equal(json_array_size(r.processes), 0);
    gdu_launch_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shim_next_to_binary),
        cmocka_unit_test(test_shim_in_install_libdir),
        cmocka_unit_test(test_shim_in_relative_libdir),
        cmocka_unit_test(test_shim_missing_names_both),
        cmocka_unit_test(test_preload_goes_first),
        cmocka_unit_test(test_shim_loaded_is_what_is_mapped),
        cmocka_unit_test(test_preload_path),
        cmocka_unit_test(test_run_shim_from_odd_path),
        cmocka_unit_test(test_load_report),
        cmocka_unit_test(test_run_collects_reports),
        cmocka_unit_test(test_run_cannot_start),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
