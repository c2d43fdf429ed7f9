#include "util/units.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

static void parses_plain_and_suffixed_sizes(void **state)
{
    uint64_t v;
    assert_int_equal(gdu_parse_size("4096", &v), 0);
    assert_int_equal(v, 4096);
    assert_int_equal(gdu_parse_size("64K", &v), 0);
    assert_int_equal(v, 65536);
    assert_int_equal(gdu_parse_size("16MiB", &v), 0);
    assert_int_equal(v, 16u << 20);
    assert_int_equal(gdu_parse_size("8g", &v), 0);
    assert_int_equal(v, 8ull << 30);
    assert_int_equal(gdu_parse_size("1.5G", &v), 0);
    assert_int_equal(v, 3ull << 29);
    assert_int_equal(gdu_parse_size("0", &v), 0);
    assert_int_equal(v, 0);
}

static void rejects_bad_sizes(void **state)
{
    uint64_t v = 7;
    const char *bad[] = {"", "-1", "K", "12Q", "1.5", "1.", "1KK", " 1", "1 K", "0x10", NULL};
    for (int i = 0; bad[i]; i++)
        assert_int_equal(gdu_parse_size(bad[i], &v), -EINVAL);
    assert_int_equal(gdu_parse_size("99999999999999999999", &v), -ERANGE);
    assert_int_equal(gdu_parse_size("17179869184G", &v), -ERANGE);
    assert_int_equal(gdu_parse_size("16E", &v), -ERANGE);
    assert_int_equal(v, 7);
}

static void parses_booleans_as_kvikio_does(void **state)
{
    const char *yes[] = {"ON", "on", "On", "TRUE", "true", "True", "YES", "yes", "1", NULL};
    const char *no[] = {"OFF", "off", "FALSE", "False", "NO", "no", "0", NULL};
    int v;
    for (int i = 0; yes[i]; i++) {
        v = 0;
        assert_int_equal(gdu_parse_bool(yes[i], &v), 0);
        assert_int_equal(v, 1);
    }
    for (int i = 0; no[i]; i++) {
        v = 1;
        assert_int_equal(gdu_parse_bool(no[i], &v), 0);
        assert_int_equal(v, 0);
    }
    const char *bad[] = {"", "2", "onn", " on", "y", "enable", "01", NULL};
    for (int i = 0; bad[i]; i++) {
        v = 7;
        assert_int_equal(gdu_parse_bool(bad[i], &v), -EINVAL);
        assert_int_equal(v, 7);
    }
    assert_int_equal(gdu_parse_bool(NULL, &v), -EINVAL);
}

static void parses_index_lists(void **state)
{
    int idx[4];
    size_t n;
    assert_int_equal(gdu_parse_index_list("0,1,3", 7, idx, 4, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(idx[2], 3);
    assert_int_equal(gdu_parse_index_list("0,,1", 7, idx, 4, &n), -EINVAL);
    assert_int_equal(gdu_parse_index_list("8", 7, idx, 4, &n), -ERANGE);
    assert_int_equal(gdu_parse_index_list("0,1,2,3,4", 7, idx, 4, &n), -ERANGE);
    assert_int_equal(gdu_parse_index_list("-1", 7, idx, 4, &n), -EINVAL);
}

static void formats_bytes(void **state)
{
    char buf[32];
    assert_string_equal(gdu_format_bytes(512, buf, sizeof buf), "512 B");
    assert_string_equal(gdu_format_bytes(3ull << 29, buf, sizeof buf), "1.50 GiB");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parses_plain_and_suffixed_sizes),
        cmocka_unit_test(rejects_bad_sizes),
        cmocka_unit_test(parses_booleans_as_kvikio_does),
        cmocka_unit_test(parses_index_lists),
        cmocka_unit_test(formats_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
