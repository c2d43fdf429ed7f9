/* Median and spread of samples, and the copy-check data pattern. */
#include "p2p/p2p_matrix.h"
#include "p2p/p2p_pattern.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static void test_stat_odd_even_empty(void **state)
{
    double odd[] = {5, 1, 3};
    gdu_p2p_stat s = gdu_p2p_stat_of(odd, 3);
    assert_true(s.valid);
    assert_float_equal(s.median, 3, 0);
    assert_float_equal(s.min, 1, 0);
    assert_float_equal(s.max, 5, 0);
    double even[] = {394.0, 396.0, 10.0, 395.0};
    s = gdu_p2p_stat_of(even, 4);
    assert_float_equal(s.median, 394.5, 1e-12);
    assert_float_equal(s.min, 10, 0);
    assert_float_equal(s.max, 396, 0);
    double one[] = {7.5};
    s = gdu_p2p_stat_of(one, 1);
    assert_float_equal(s.median, 7.5, 0);
    s = gdu_p2p_stat_of(NULL, 0);
    assert_false(s.valid);
}

static void test_pattern_roundtrip(void **state)
{
    for (size_t bytes = 0; bytes < 70; bytes++) {
        unsigned char *a = malloc(bytes + 1), *b = malloc(bytes + 1);
        gdu_p2p_pattern_fill(a, bytes, 3);
        assert_int_equal(gdu_p2p_pattern_check(a, bytes, 3), SIZE_MAX);
        if (bytes >= 8) {
            gdu_p2p_pattern_fill(b, bytes, 4);
            assert_memory_not_equal(a, b, bytes); /* seeds differ: copies are told apart */
            assert_int_not_equal(gdu_p2p_pattern_check(a, bytes, 4), SIZE_MAX);
        }
        free(a);
        free(b);
    }
}

static void test_pattern_finds_first_wrong_byte(void **state)
{
    enum { N = 4099 }; /* not a multiple of 8: the tail is checked too */
    unsigned char *buf = malloc(N);
    size_t where[] = {0, 7, 8, 1234, N - 3, N - 1};
    for (size_t k = 0; k < sizeof where / sizeof where[0]; k++) {
        gdu_p2p_pattern_fill(buf, N, 11);
        buf[where[k]] ^= 0x40;
        assert_int_equal(gdu_p2p_pattern_check(buf, N, 11), where[k]);
    }
    memset(buf, 0, N); /* a cleared destination never passes */
    assert_int_not_equal(gdu_p2p_pattern_check(buf, N, 11), SIZE_MAX);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stat_odd_even_empty),
        cmocka_unit_test(test_pattern_roundtrip),
        cmocka_unit_test(test_pattern_finds_first_wrong_byte),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
