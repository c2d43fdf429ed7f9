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
#include <sys/wait.h>

#include <cmocka.h>

#define FIX GDUNLOCK_FIXTURES "/safetensors/"

/* Runs gdunlock load with args; returns its exit status, stdout in out. */
static int run(const char *args, char *out, size_t len)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' load %s 2>/dev/null", GDUNLOCK_BIN, args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, len - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static json_t *run_json(const char *args, int want_status)
{
    static char out[1 << 16];
    assert_int_equal(run(args, out, sizeof out), want_status);
    json_error_t e;
    json_t *doc = json_loads(out, 0, &e);
    if (doc == NULL)
        fail_msg("not JSON (%s): %s", e.text, out);
    return doc;
}

static void test_host_load_json(void **state)
{
    json_t *doc = run_json("--to host --verify --list --json " FIX "small.safetensors", 0);
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

    doc = run_json("--to host --json " FIX "sharded/model.safetensors.index.json", 0);
    assert_int_equal(json_array_size(json_object_get(doc, "files")), 2);
    assert_true(json_is_null(json_object_get(doc, "verify")));
    json_decref(doc);
}

static void test_named_errors(void **state)
{
    json_t *doc = run_json("--to host --json " FIX "hostile/overlap.safetensors", 66);
    json_t *error = json_object_get(doc, "error");
    assert_string_equal(json_string_value(json_object_get(error, "code")), "GDU_ST_ERR_OVERLAP");
    assert_true(strlen(json_string_value(json_object_get(error, "fix"))) > 10);
    json_decref(doc);
    doc = run_json("--json " FIX "bad_index/escape.index.json", 66);
    assert_string_equal(json_string_value(json_object_get(json_object_get(doc, "error"), "code")),
                        "GDU_ST_ERR_PATH_ESCAPE");
    json_decref(doc);
    char out[4096];
    assert_int_equal(run(FIX "nonexistent.safetensors", out, sizeof out), 66);
}

static void test_usage(void **state)
{
    char out[4096];
    assert_int_equal(run("--help", out, sizeof out), 0);
    assert_non_null(strstr(out, "usage: gdunlock load"));
    assert_int_equal(run("", out, sizeof out), 64);
    assert_int_equal(run("--gpu x " FIX "small.safetensors", out, sizeof out), 64);
    assert_int_equal(run("--to disk " FIX "small.safetensors", out, sizeof out), 64);
    assert_int_equal(run("--bogus " FIX "small.safetensors", out, sizeof out), 64);
    assert_int_equal(run(FIX "small.safetensors " FIX "empty.safetensors", out, sizeof out), 64);
}

static void test_human_output(void **state)
{
    char out[1 << 14];
    assert_int_equal(run("--to host --verify --list " FIX "small.safetensors", out, sizeof out), 0);
    assert_non_null(strstr(out, "tensors      12"));
    assert_non_null(strstr(out, "GB/s"));
    assert_non_null(strstr(out, "verify       OK"));
    assert_non_null(strstr(out, "model.embed_tokens.weight"));
    assert_null(strstr(out, "\033[")); /* no colour when stdout is a pipe */
    assert_int_equal(run("--to host " FIX "misaligned.safetensors", out, sizeof out), 0);
    assert_non_null(strstr(out, "1 tensors are not aligned"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_load_json),
        cmocka_unit_test(test_named_errors),
        cmocka_unit_test(test_usage),
        cmocka_unit_test(test_human_output),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
