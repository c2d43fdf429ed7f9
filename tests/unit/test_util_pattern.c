/* The one data pattern (util/pattern.h) that bench files, verify's buffers
 * and p2p's copies are checked against: filling and checking at any offset
 * and length, the first wrong byte, seeds told apart, and the seed given
 * back by the first word (how bench recognises its own files). */
#include "util/pattern.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

static void fill_and_check_agree_at_any_offset(void **state)
{
    uint8_t whole[300], part[300];
    gdu_pattern_fill(whole, 0, sizeof whole, 9);
    for (uint64_t off = 0; off < 40; off++)
        for (size_t n = 0; n + off <= sizeof whole && n < 100; n += 7) {
            memset(part, 0, sizeof part);
            gdu_pattern_fill(part, off, n, 9);
            assert_memory_equal(part, whole + off, n);
            assert_true(gdu_pattern_check(part, off, n, 9) == UINT64_MAX);
        }
    /* Another seed is another pattern. */
    gdu_pattern_fill(part, 0, 64, 10);
    assert_true(gdu_pattern_check(part, 0, 64, 9) != UINT64_MAX);
}

static void check_reports_the_first_wrong_byte(void **state)
{
    enum { N = 4099 }; /* not a multiple of 8: the tail is checked too */
    uint8_t *buf = malloc(N);
    assert_non_null(buf);
    size_t where[] = {0, 7, 8, 1234, N - 3, N - 1};
    for (size_t k = 0; k < sizeof where / sizeof where[0]; k++) {
        gdu_pattern_fill(buf, 1000, N, 3);
        buf[where[k]] ^= 0x40;
        assert_int_equal(gdu_pattern_check(buf, 1000, N, 3), 1000 + where[k]);
    }
    /* Zeroes (a copy that moved nothing) and shifted data never pass. */
    memset(buf, 0, N);
    assert_true(gdu_pattern_check(buf, 0, N, 3) != UINT64_MAX);
    gdu_pattern_fill(buf, 0, N, 3);
    assert_true(gdu_pattern_check(buf + 8, 0, N - 8, 3) != UINT64_MAX);
    free(buf);
}

static void first_word_gives_the_seed_back(void **state)
{
    const uint64_t seeds[] = {0, 1, 4, 0xffffffffull, 0x6764756e6c6f636bull, UINT64_MAX};
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++)
        assert_true(gdu_pattern_seed_of(gdu_pattern_word(seeds[i], 0)) == seeds[i]);
    uint64_t s = 0x243f6a8885a308d3ull; /* and a spread of others */
    for (int i = 0; i < 1000; i++, s = s * 6364136223846793005ull + 1442695040888963407ull)
        assert_true(gdu_pattern_seed_of(gdu_pattern_word(s, 0)) == s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fill_and_check_agree_at_any_offset),
        cmocka_unit_test(check_reports_the_first_wrong_byte),
        cmocka_unit_test(first_word_gives_the_seed_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
