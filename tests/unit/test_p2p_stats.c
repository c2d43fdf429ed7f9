/* Median and spread of samples. */
#include "p2p/p2p_matrix.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stat_odd_even_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
