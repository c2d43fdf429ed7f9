/* JSON strings of any bytes (src/util/json_text.c): valid documents, the
 * exact bytes kept in the escaped twin, and escaped copies for renderers. */
#include "util/json_text.h"
#include "util/utf8.h"

#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static void json_strings_of_any_bytes(void **state)
{
    json_t *j = gdu_json_text("caf\xe9/\xc3\xa9\xe2\x80");
    assert_non_null(j);
    assert_string_equal(json_string_value(j),
                        "caf" GDU_UTF8_REPLACEMENT "/\xc3\xa9" GDU_UTF8_REPLACEMENT);
    char *text = json_dumps(j, JSON_ENCODE_ANY);
    assert_non_null(text);
    free(text);
    json_decref(j);
    assert_true(json_is_null(gdu_json_text(NULL)));

    json_t *o = json_object();
    assert_int_equal(gdu_json_set_text(o, "path", "/tmp/\xff\x1b"), 0);
    assert_int_equal(gdu_json_set_text(o, "ok", "/tmp/\xc3\xa9\x1b"), 0);
    assert_string_equal(json_string_value(json_object_get(o, "path")),
                        "/tmp/" GDU_UTF8_REPLACEMENT "\x1b");
    assert_string_equal(json_string_value(json_object_get(o, "path_escaped")), "/tmp/\\xff\\x1b");
    /* Valid UTF-8 is kept exact (control characters included), with no twin. */
    assert_string_equal(json_string_value(json_object_get(o, "ok")), "/tmp/\xc3\xa9\x1b");
    assert_null(json_object_get(o, "ok_escaped"));
    json_decref(o);
}

static void escaped_copy(void **state)
{
    json_t *doc = json_pack("{s:s, s:[s, i], s:{s:b}}", "reason", "\x1b]0;pwned\x07", "list",
                            "a\\b", 7, "\x1b[2J", "x", 1);
    json_t *c = gdu_json_escaped_copy(doc);
    assert_non_null(c);
    assert_string_equal(json_string_value(json_object_get(c, "reason")), "\\x1b]0;pwned\\x07");
    assert_string_equal(json_string_value(json_array_get(json_object_get(c, "list"), 0)), "a\\\\b");
    assert_int_equal(json_integer_value(json_array_get(json_object_get(c, "list"), 1)), 7);
    assert_true(json_is_true(json_object_get(json_object_get(c, "\\x1b[2J"), "x")));
    json_decref(c);
    json_decref(doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(json_strings_of_any_bytes),
        cmocka_unit_test(escaped_copy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
