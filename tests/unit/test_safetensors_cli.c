/* `gdunlock load` end to end on the fixtures: exit codes, the JSON document,
 * --verify and --list, and named errors for hostile files. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

/* Quoted where it is used: the folder may hold spaces. */
#define FIX GDUNLOCK_FIXTURES "/safetensors/"

/* Runs `env gdunlock load args` (env: variable settings, may be ""), at most
 * 20 s; returns its exit status, with stdout (or stderr, when want_stderr)
 * in out. */
static int run_capture(const char *env, const char *args, int want_stderr, char *out, size_t len)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s timeout 20 '%s' load %s %s", env, GDUNLOCK_BIN, args,
             want_stderr ? "2>&1 >/dev/null" : "2>/dev/null");
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, len - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int run(const char *args, char *out, size_t len)
{
    return run_capture("", args, 0, out, len);
}

static json_t *run_json(const char *args, int want_status)
{
    static char out[1 << 16];
    assert_int_equal(run(args, out, sizeof out), want_status);
    json_error_t e;
    json_t *doc = json_loads(out, JSON_ALLOW_NUL, &e);
    if (doc == NULL)
        fail_msg("not JSON (%s): %s", e.text, out);
    return doc;
}

static void test_host_load_json(void **state)
{
    json_t *doc = run_json("--to host --verify --list --json '" FIX "small.safetensors'", 0);
    assert_string_equal(json_string_value(json_object_get(doc, "command")), "load");
    assert_string_equal(json_string_value(json_object_get(doc, "target")), "host");
    assert_int_equal(json_integer_value(json_object_get(doc, "tensors")), 12);
    assert_int_equal(json_integer_value(json_object_get(doc, "tensor_bytes")),
                     json_integer_value(json_object_get(doc, "read_bytes")));
    assert_true(json_is_true(json_object_get(json_object_get(doc, "verify"), "ok")));
    assert_int_equal(json_integer_value(json_object_get(doc, "misaligned_tensors")), 0);
    json_t *table = json_object_get(doc, "tensor_table");
    assert_int_equal(json_array_size(table), 12);
    json_t *first = json_array_get(table, 0);
    assert_int_equal(json_integer_value(json_object_get(first, "device")), -1);
    assert_true(json_integer_value(json_object_get(first, "address")) != 0);
    assert_true(json_is_array(json_object_get(first, "shape")));
    json_decref(doc);

    doc = run_json("--to host --json '" FIX "sharded/model.safetensors.index.json'", 0);
    assert_int_equal(json_array_size(json_object_get(doc, "files")), 2);
    assert_true(json_is_null(json_object_get(doc, "verify")));
    json_decref(doc);
}

static void test_named_errors(void **state)
{
    json_t *doc = run_json("--to host --json '" FIX "hostile/overlap.safetensors'", 66);
    json_t *error = json_object_get(doc, "error");
    assert_string_equal(json_string_value(json_object_get(error, "code")), "GDU_ST_ERR_OVERLAP");
    assert_true(strlen(json_string_value(json_object_get(error, "fix"))) > 10);
    json_decref(doc);
    doc = run_json("--json '" FIX "bad_index/escape.index.json'", 66);
    assert_string_equal(json_string_value(json_object_get(json_object_get(doc, "error"), "code")),
                        "GDU_ST_ERR_PATH_ESCAPE");
    json_decref(doc);
    char out[4096];
    assert_int_equal(run("'" FIX "nonexistent.safetensors'", out, sizeof out), 66);
}

static void test_usage(void **state)
{
    char out[4096];
    assert_int_equal(run("--help", out, sizeof out), 0);
    assert_non_null(strstr(out, "Usage: gdunlock load"));
    assert_int_equal(run("", out, sizeof out), 64);
    assert_int_equal(run("--gpu x '" FIX "small.safetensors'", out, sizeof out), 64);
    assert_int_equal(run("--to disk '" FIX "small.safetensors'", out, sizeof out), 64);
    assert_int_equal(run("--bogus '" FIX "small.safetensors'", out, sizeof out), 64);
    assert_int_equal(run("'" FIX "small.safetensors' '" FIX "empty.safetensors'", out, sizeof out),
                     64);
}

static void test_human_output(void **state)
{
    char out[1 << 14];
    assert_int_equal(run("--to host --verify --list '" FIX "small.safetensors'", out, sizeof out),
                     0);
    assert_non_null(strstr(out, "tensors      12"));
    assert_non_null(strstr(out, "GB/s"));
    assert_non_null(strstr(out, "verify       OK"));
    assert_non_null(strstr(out, "model.embed_tokens.weight"));
    assert_null(strstr(out, "\033[")); /* no colour when stdout is a pipe */
    assert_int_equal(run("--to host '" FIX "misaligned.safetensors'", out, sizeof out), 0);
    assert_non_null(strstr(out, "1 tensor is not aligned to its element size"));
}

/* Names with terminal control characters are escaped in human output (the
 * table too); JSON keeps them exact. */
static void test_control_characters_escaped(void **state)
{
    static char out[1 << 14];
    assert_int_equal(run("--to host --list '" FIX "control.safetensors'", out, sizeof out), 0);
    assert_null(strchr(out, '\033'));
    assert_null(strchr(out, '\a'));
    assert_null(strstr(out, "\xc2\x9b"));
    assert_non_null(strstr(out, "evil\\x1b[31mred\\x07"));
    assert_non_null(strstr(out, "c1\\u009bname"));
    assert_non_null(strstr(out, "nul\\x00byte")); /* the whole name, NUL and all */
    json_t *doc = run_json("--to host --list --json '" FIX "control.safetensors'", 0);
    json_t *table = json_object_get(doc, "tensor_table");
    int exact = 0;
    for (size_t i = 0; i < json_array_size(table); i++) {
        json_t *name = json_object_get(json_array_get(table, i), "name");
        exact += strcmp(json_string_value(name), "evil\033[31mred\a") == 0;
        exact +=
            json_string_length(name) == 8 && memcmp(json_string_value(name), "nul\0byte", 8) == 0;
    }
    assert_int_equal(exact, 2);
    json_decref(doc);
}

/* A FIFO is refused at once (a plain open would wait for a writer forever). */
static void test_fifo_refused(void **state)
{
    char dir[] = "/tmp/gdu_st_cli_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char fifo[64], args[128], out[4096];
    snprintf(fifo, sizeof fifo, "%s/model.safetensors", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    snprintf(args, sizeof args, "--to host %s", fifo);
    assert_int_equal(run_capture("", args, 1, out, sizeof out), 66);
    assert_non_null(strstr(out, "not a regular file"));
    unlink(fifo);
    rmdir(dir);
}

/* At the open-file limit (4: the second shard cannot be opened) the error
 * names the limit, not the path: it was GDU_ST_ERR_OPEN, 66, "check the path
 * and its permissions". */
static void test_open_file_limit_named(void **state)
{
    static char out[1 << 14];
    assert_int_equal(run_capture("sh -c 'exec 3<&- 4<&- 5<&- 6<&- 7<&- 8<&- 9<&-; ulimit -n 4 && "
                                 "exec \"$@\"' limited",
                                 "--to host --json '" FIX "sharded/model.safetensors.index.json'",
                                 0, out, sizeof out),
                     70);
    assert_non_null(strstr(out, "GDU_ST_ERR_TOO_MANY_FILES"));
    assert_non_null(strstr(out, "ulimit -n"));
}

/* A bad GDUNLOCK_IO_* value is a bad argument: 64, with the variable named. */
static void test_bad_setting_is_usage(void **state)
{
    static char out[1 << 14];
    assert_int_equal(run_capture("GDUNLOCK_IO_CHUNK=lots", "--to host '" FIX "small.safetensors'",
                                 0, out, sizeof out),
                     64);
    assert_int_equal(run_capture("GDUNLOCK_IO_DIRECT=maybe",
                                 "--to host --json '" FIX "small.safetensors'", 0, out, sizeof out),
                     64);
    assert_non_null(strstr(out, "GDU_ST_ERR_SETTINGS"));
    assert_non_null(strstr(out, "GDUNLOCK_IO_DIRECT=maybe"));
}

/* Every boolean as kvikio takes it: GDUNLOCK_IO_DIRECT=ON was once refused
 * (64) where 1 passed. */
static void test_setting_booleans(void **state)
{
    static char out[1 << 14];
    assert_int_equal(run_capture("GDUNLOCK_IO_DIRECT=ON", "--to host '" FIX "small.safetensors'", 0,
                                 out, sizeof out),
                     0);
    assert_int_equal(run_capture("GDUNLOCK_IO_DIRECT=False", "--to host '" FIX "small.safetensors'",
                                 0, out, sizeof out),
                     0);
}

/* A model's folder, as the Python iterator takes one: its index, its only
 * file, or its files without an index; a folder with neither, or with two
 * indexes, is named. */
static void test_folder(void **state)
{
    char dir[] = "/tmp/gdunlock load folder XXXXXX", cmd[4096];
    assert_non_null(mkdtemp(dir));
    json_t *doc = run_json("--to host --json '" FIX "sharded'", 0);
    assert_int_equal(json_array_size(json_object_get(doc, "files")), 2);
    json_decref(doc);

    char args[1024], out[4096];
    snprintf(args, sizeof args, "--to host --json '%s'", dir);
    doc = run_json(args, 66);
    assert_non_null(
        strstr(json_string_value(json_object_get(json_object_get(doc, "error"), "message")),
               "no .safetensors file or index in it"));
    json_decref(doc);

    snprintf(cmd, sizeof cmd, "cp '%s' '%s/model.safetensors'", FIX "small.safetensors", dir);
    assert_int_equal(system(cmd), 0);
    snprintf(args, sizeof args, "--to host --verify --json '%s'", dir);
    doc = run_json(args, 0);
    assert_int_equal(json_integer_value(json_object_get(doc, "tensors")), 12);
    json_decref(doc);

    /* The shards without their index: both files, sorted. */
    snprintf(cmd, sizeof cmd, "rm '%s/model.safetensors' && cp '%s'*.safetensors '%s/'", dir,
             FIX "sharded/", dir);
    assert_int_equal(system(cmd), 0);
    doc = run_json(args, 0);
    assert_int_equal(json_array_size(json_object_get(doc, "files")), 2);
    json_decref(doc);

    snprintf(cmd, sizeof cmd, "touch '%s/a.safetensors.index.json' '%s/b.safetensors.index.json'",
             dir, dir);
    assert_int_equal(system(cmd), 0);
    snprintf(args, sizeof args, "--to host '%s'", dir);
    assert_int_equal(run_capture("", args, 1, out, sizeof out), 66);
    assert_non_null(strstr(out, "holds 2 *.safetensors.index.json files"));
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* Damaged files: refused (66) with the check named, read with --lenient. */
static void test_lenient(void **state)
{
    json_t *doc = run_json("--to host --json '" FIX "hostile/hole.safetensors'", 66);
    assert_string_equal(json_string_value(json_object_get(json_object_get(doc, "error"), "code")),
                        "GDU_ST_ERR_HOLE");
    assert_non_null(strstr(json_string_value(json_object_get(json_object_get(doc, "error"), "fix")),
                           "--lenient"));
    json_decref(doc);
    doc = run_json("--to host --json '" FIX "hostile/trailing.safetensors'", 66);
    assert_string_equal(json_string_value(json_object_get(json_object_get(doc, "error"), "code")),
                        "GDU_ST_ERR_TRAILING");
    json_decref(doc);
    doc = run_json("--to host --lenient --verify --json '" FIX "hostile/hole.safetensors'", 0);
    assert_true(json_is_true(json_object_get(doc, "lenient")));
    json_t *file = json_array_get(json_object_get(doc, "files"), 0);
    assert_int_equal(json_integer_value(json_object_get(file, "hole_bytes")), 4);
    assert_true(json_is_true(json_object_get(json_object_get(doc, "verify"), "ok")));
    json_decref(doc);
    char out[4096];
    assert_int_equal(
        run("--to host --lenient '" FIX "hostile/late_start.safetensors'", out, sizeof out), 0);
    assert_non_null(strstr(out, "(lenient)"));
    assert_non_null(strstr(out, "4 bytes between tensors"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_load_json),
        cmocka_unit_test(test_named_errors),
        cmocka_unit_test(test_usage),
        cmocka_unit_test(test_human_output),
        cmocka_unit_test(test_control_characters_escaped),
        cmocka_unit_test(test_fifo_refused),
        cmocka_unit_test(test_bad_setting_is_usage),
        cmocka_unit_test(test_open_file_limit_named),
        cmocka_unit_test(test_lenient),
        cmocka_unit_test(test_setting_booleans),
        cmocka_unit_test(test_folder),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
