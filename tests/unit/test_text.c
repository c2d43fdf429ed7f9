/* Text from outside: the one terminal escape (src/util/text.c) and UTF-8
 * sequences (utf8.c). */
#include "util/text.h"
#include "util/utf8.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static void assert_escaped(const char *in, size_t n, const char *want)
{
    char *got = gdu_text_escaped(in, n);
    assert_non_null(got);
    if (strcmp(got, want) != 0)
        fail_msg("escaped '%s', want '%s'", got, want);
    free(got);
}

static void utf8_sequences(void **state)
{
    uint32_t cp = 0;
    assert_int_equal(gdu_utf8_seq("A", 1, &cp), 1);
    assert_int_equal(cp, 'A');
    assert_int_equal(gdu_utf8_seq("\xc3\xa9", 2, &cp), 2);
    assert_int_equal(cp, 0xe9);
    assert_int_equal(gdu_utf8_seq("\xe2\x80\xae", 3, &cp), 3);
    assert_int_equal(cp, 0x202e);
    assert_int_equal(gdu_utf8_seq("\xf0\x9f\x98\x80", 4, &cp), 4);
    assert_int_equal(cp, 0x1f600);
    /* Never a first byte, overlong forms, surrogates, beyond U+10FFFF, cut short. */
    static const char *const bad[] = {
        "\x80",         "\xbf",         "\xc0\xaf",         "\xc1\xbf",
        "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80",
        "\xff",         "\xc3",         "\xe2\x80"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (gdu_utf8_seq(bad[i], strlen(bad[i]), &cp) != 0)
            fail_msg("bad sequence %zu taken as valid", i);
    /* What one U+FFFD stands for, as Python's decode(errors="replace") counts. */
    static const struct {
        const char *bytes;
        size_t len;
    } subparts[] = {{"\xe9\x80\xc3", 2},
                    {"\xe2\x80"
                     "A",
                     2},
                    {"\xf0\x90\x80", 3},
                    {"\xf4\x90\x80\x80", 1},
                    {"\xc0\xaf", 1},
                    {"\xe0\x80\xaf", 1},
                    {"\xed\xa0\x80", 1},
                    {"\xff", 1},
                    {"\xc3", 1}};
    for (size_t i = 0; i < sizeof subparts / sizeof subparts[0]; i++)
        if (gdu_utf8_invalid_len(subparts[i].bytes, strlen(subparts[i].bytes)) != subparts[i].len)
            fail_msg("subpart %zu: %zu bytes, want %zu", i,
                     gdu_utf8_invalid_len(subparts[i].bytes, strlen(subparts[i].bytes)),
                     subparts[i].len);
    assert_true(gdu_utf8_valid("plain \xc3\xa9t\xc3\xa9", 12));
    assert_false(gdu_utf8_valid("a\xffz", 3));
    assert_true(gdu_utf8_valid("a\0b", 3));
}

/* What could drive a terminal is escaped; escapes can be undone. */
static void terminal_escape(void **state)
{
    assert_escaped("plain /path", 11, "plain /path");
    /* ESC of a colour change and of an OSC window title, BEL, DEL, NUL. */
    assert_escaped("\x1b[31mred\x1b]0;title\x07\x7f", 19, "\\x1b[31mred\\x1b]0;title\\x07\\x7f");
    assert_escaped("a\0b", 3, "a\\x00b");
    assert_escaped("back\\slash", 10, "back\\\\slash");
    /* C1 controls: in UTF-8 and as the raw 8-bit bytes terminals also take. */
    assert_escaped("\xc2\x9b"
                   "31m",
                   5, "\\u009b31m");
    assert_escaped("\x9b"
                   "31m",
                   4, "\\x9b31m");
    /* Bytes that are not UTF-8 (a Latin-1 path), and bidirectional overrides. */
    assert_escaped("caf\xe9.bin", 8, "caf\\xe9.bin");
    assert_escaped("a\xe2\x80\xae"
                   "b",
                   5, "a\\u202eb");
    /* Characters are kept: accents, CJK, emoji. */
    assert_escaped("\xc3\xa9\xe5\x90\x8d\xf0\x9f\x98\x80", 9,
                   "\xc3\xa9\xe5\x90\x8d\xf0\x9f\x98\x80");
}

/* Columns, not bytes: table cells line up for any name. */
static void columns(void **state)
{
    assert_int_equal(gdu_text_escape(NULL, "abc", 3), 3);
    assert_int_equal(gdu_text_escape(NULL, "\xc3\xa9t\xc3\xa9", 5), 3);
    assert_int_equal(gdu_text_escape(NULL, "\x1b", 1), 4);
    assert_int_equal(gdu_text_escape(NULL, "\xe5\x90\x8d\xe5\x89\x8d", 6), 4); /* two wide CJK */
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    gdu_text_pad(m, "\xc3\xa9", 2, 4);
    fputc('|', m);
    fclose(m);
    assert_string_equal(buf, "\xc3\xa9   |");
    free(buf);
}

/* A long path keeps its start and its end ("(deleted)", the file's name). */
static void shortened_in_the_middle(void **state)
{
    char out[64];
    assert_string_equal(gdu_text_shorten("/a/b.bin", 20, out, sizeof out), "/a/b.bin");
    const char *long_path = "/tmp/a very long folder name/ppppppppppppppppppppppppppppppppppp/"
                            "moved.bin (deleted)";
    gdu_text_shorten(long_path, 40, out, sizeof out);
    assert_true(strlen(out) <= 40);
    assert_memory_equal(out, "/tmp/a very", 11);
    assert_non_null(strstr(out, "..."));
    assert_non_null(strstr(out, "moved.bin (deleted)"));
    /* The output buffer bounds it too, and a UTF-8 sequence is never cut. */
    char small[24];
    gdu_text_shorten(long_path, 40, small, sizeof small);
    assert_true(strlen(small) <= 23);
    assert_non_null(strstr(small, "(deleted)"));
    const char *wide =
        "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9";
    for (size_t max = 5; max < 20; max++) {
        gdu_text_shorten(wide, max, out, sizeof out);
        assert_true(gdu_utf8_valid(out, strlen(out)));
        assert_true(strlen(out) <= max);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(utf8_sequences),
        cmocka_unit_test(terminal_escape),
        cmocka_unit_test(columns),
        cmocka_unit_test(shortened_in_the_middle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
