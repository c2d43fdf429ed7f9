/* The progress line (src/util/progress.c): rate and time left, and on a
 * terminal each line cleared to its end, so a shorter one leaves nothing of
 * a longer one ("( 83%)%)"). */
#include "util/progress.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static void line_has_rate_and_eta(void **state)
{
    char buf[256];
    gdu_progress_line(buf, sizeof buf, "loading", 3ull << 30, 8ull << 30, 2e9, false);
    assert_string_equal(buf, "loading 3.00 GiB / 8.00 GiB ( 38%)  2.00 GB/s  ETA 3s");
    gdu_progress_line(buf, sizeof buf, "loading", 1ull << 30, 301ull << 30, 1e9, false);
    assert_string_equal(buf, "loading 1.00 GiB / 301.00 GiB (  0%)  1.00 GB/s  ETA 5m22s");
    gdu_progress_line(buf, sizeof buf, "loading", 8ull << 30, 8ull << 30, 2e9, true);
    assert_string_equal(buf, "loading 8.00 GiB / 8.00 GiB (100%)  2.00 GB/s");
    /* No rate known yet: neither rate nor time left. */
    gdu_progress_line(buf, sizeof buf, "engine", 1 << 20, 4 << 20, 0, false);
    assert_string_equal(buf, "engine 1.00 MiB / 4.00 MiB ( 25%)");
}

static char *captured;
static size_t captured_len;

/* Captures what reports write into p's stream. */
static char *capture(bool tty, void (*reports)(gdu_progress *))
{
    gdu_progress p;
    gdu_progress_start(&p);
    p.out = open_memstream(&captured, &captured_len);
    p.tty = tty;
    reports(&p);
    fclose(p.out);
    return captured;
}

static void long_then_short(gdu_progress *p)
{
    gdu_progress_bytes(p, "loading", 999ull << 20, 1000ull << 20, false);
    gdu_progress_bytes(p, "loading", 1000ull << 20, 1000ull << 20, true);
}

static void terminal_line_is_cleared(void **state)
{
    char *out = capture(true, long_then_short);
    /* Each line: back to its start, the text, then cleared to the end. */
    assert_int_equal(out[0], '\r');
    const char *second = strchr(out + 1, '\r');
    assert_non_null(second);
    assert_non_null(strstr(second, "1000.00 MiB / 1000.00 MiB (100%)"));
    assert_non_null(strstr(second, "\033[K"));
    assert_int_equal(out[strlen(out) - 1], '\n');
    assert_non_null(strstr(out, "\033[K\r")); /* the first line cleared too */
    free(out);
}

static void elsewhere_one_line_each(void **state)
{
    char *out = capture(false, long_then_short);
    assert_null(strchr(out, '\r'));
    assert_null(strchr(out, '\033'));
    /* The first report and the final one (within a second: the others wait). */
    assert_non_null(strstr(out, "999.00 MiB / 1000.00 MiB"));
    assert_non_null(strstr(out, "(100%)"));
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(line_has_rate_and_eta),
        cmocka_unit_test(terminal_line_is_cleared),
        cmocka_unit_test(elsewhere_one_line_each),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
