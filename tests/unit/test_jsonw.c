/* The JSON writer (src/util/jsonw.c): what it writes parses back as written. */
#include "util/jsonw.h"

#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static void round_trip(void **state)
{
    gdu_jsonw w;
    gdu_jsonw_init(&w);
    gdu_jsonw_object_begin(&w, NULL);
    gdu_jsonw_string(&w, "plain", "abc");
    gdu_jsonw_string(&w, "escaped", "q\"b\\n\nt\tc\x01\x1f");
    gdu_jsonw_string(&w, "utf8", "\xc3\xa9t\xc3\xa9");
    gdu_jsonw_string(&w, "null", NULL);
    gdu_jsonw_uint(&w, "big", UINT64_C(0x7f8bdbe00000));
    gdu_jsonw_int(&w, "neg", -22);
    gdu_jsonw_bool(&w, "yes", true);
    gdu_jsonw_array_begin(&w, "empty");
    gdu_jsonw_array_end(&w);
    gdu_jsonw_object_begin(&w, "nested");
    gdu_jsonw_array_begin(&w, "list");
    gdu_jsonw_uint(&w, NULL, 1);
    gdu_jsonw_object_begin(&w, NULL);
    gdu_jsonw_object_end(&w);
    gdu_jsonw_array_end(&w);
    gdu_jsonw_object_end(&w);
    gdu_jsonw_object_end(&w);
    char *text = gdu_jsonw_finish(&w);
    assert_non_null(text);
    json_error_t err;
    json_t *j = json_loads(text, 0, &err);
    if (j == NULL)
        fail_msg("not JSON (%s):\n%s", err.text, text);
    assert_string_equal(json_string_value(json_object_get(j, "plain")), "abc");
    assert_string_equal(json_string_value(json_object_get(j, "escaped")), "q\"b\\n\nt\tc\x01\x1f");
    assert_string_equal(json_string_value(json_object_get(j, "utf8")), "\xc3\xa9t\xc3\xa9");
    assert_true(json_is_null(json_object_get(j, "null")));
    assert_int_equal(json_integer_value(json_object_get(j, "big")), 0x7f8bdbe00000);
    assert_int_equal(json_integer_value(json_object_get(j, "neg")), -22);
    assert_true(json_is_true(json_object_get(j, "yes")));
    assert_int_equal(json_array_size(json_object_get(j, "empty")), 0);
    json_t *list = json_object_get(json_object_get(j, "nested"), "list");
    assert_int_equal(json_array_size(list), 2);
    assert_true(json_is_object(json_array_get(list, 1)));
    json_decref(j);
    free(text);
}

static void unbalanced_is_refused(void **state)
{
    gdu_jsonw w;
    gdu_jsonw_init(&w);
    gdu_jsonw_object_begin(&w, NULL);
    assert_null(gdu_jsonw_finish(&w));
    gdu_jsonw_init(&w);
    gdu_jsonw_object_end(&w);
    assert_null(gdu_jsonw_finish(&w));
    gdu_jsonw_init(&w);
    for (int i = 0; i < GDU_JSONW_MAX_DEPTH + 2; i++)
        gdu_jsonw_array_begin(&w, NULL);
    for (int i = 0; i < GDU_JSONW_MAX_DEPTH + 2; i++)
        gdu_jsonw_array_end(&w);
    assert_null(gdu_jsonw_finish(&w));
}

/* Bytes that are not UTF-8 (a Latin-1 path, a cut sequence, a lone
 * continuation byte) still give a document every parser reads: U+FFFD each. */
static void any_bytes_parse(void **state)
{
    gdu_jsonw w;
    gdu_jsonw_init(&w);
    gdu_jsonw_object_begin(&w, NULL);
    gdu_jsonw_string(&w, "path", "/m/caf\xe9\x80\xc3");
    gdu_jsonw_string(&w, "caf\xe9", "\xed\xa0\x80ok\xc3\xa9\x7f");
    gdu_jsonw_object_end(&w);
    char *text = gdu_jsonw_finish(&w);
    assert_non_null(text);
    json_error_t err;
    json_t *j = json_loads(text, 0, &err);
    if (j == NULL)
        fail_msg("not JSON (%s):\n%s", err.text, text);
    assert_string_equal(json_string_value(json_object_get(j, "path")),
                        "/m/caf\xef\xbf\xbd\xef\xbf\xbd");
    assert_string_equal(json_string_value(json_object_get(j, "caf\xef\xbf\xbd")),
                        "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdok\xc3\xa9\x7f");
    json_decref(j);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(round_trip),
                                       cmocka_unit_test(unbalanced_is_refused),
                                       cmocka_unit_test(any_bytes_parse)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
