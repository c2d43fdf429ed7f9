/* The embedded SM kernels: the PTX declares the ISA and target the driver
 * JIT-compiles from, every kernel the launchers call exists with the
 * parameter list they pass (a mismatch would hand the GPU garbage), and the
 * host's copy of the store pattern is the one the kernel source includes. */
#include "p2p/p2p_kernels.h"
#include "p2p/p2p_sm_pattern.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* The parameter types of kernel name, comma-separated ("u64,u64,u32"). */
static void params_of(const char *name, char *out, size_t len)
{
    char head[96];
    snprintf(head, sizeof head, ".visible .entry %s(", name);
    const char *p = strstr(gdu_p2p_kernels_ptx, head);
    out[0] = '\0';
    if (p == NULL)
        return;
    const char *end = strchr(p, ')');
    assert_non_null(end);
    size_t n = 0;
    for (const char *q = strstr(p, ".param ."); q != NULL && q < end;
         q = strstr(q + 1, ".param .")) {
        q += strlen(".param .");
        n += (size_t)snprintf(out + n, len - n, "%s%.*s", n ? "," : "", (int)strcspn(q, " \t"), q);
    }
}

static void header(void **state)
{
    assert_non_null(strstr(gdu_p2p_kernels_ptx, "\n.version 6.3\n"));
    assert_non_null(strstr(gdu_p2p_kernels_ptx, "\n.target sm_75\n"));
    assert_non_null(strstr(gdu_p2p_kernels_ptx, "\n.address_size 64\n"));
}

static void signatures(void **state)
{
    char got[64];
    params_of("gdu_p2p_copy", got, sizeof got);
    assert_string_equal(got, "u64,u64,u64"); /* dst, src, 16-byte vectors */
    params_of("gdu_p2p_fill", got, sizeof got);
    assert_string_equal(got, "u64,u64,u32"); /* dst, words, seed */
    params_of("gdu_p2p_chase", got, sizeof got);
    assert_string_equal(got, "u64,u64"); /* state, hops */
    params_of("gdu_p2p_missing", got, sizeof got);
    assert_string_equal(got, "");
}

static int compare_words(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static void pattern(void **state)
{
    /* Values fixed here so that a change to the pattern is a change to the PTX too. */
    assert_int_equal(gdu_p2p_sm_word(0, 0), 0);
    assert_int_equal(gdu_p2p_sm_word(1, 0), 0x514e28b7u);
    assert_int_equal(gdu_p2p_sm_word(0x67647531u, 12345), gdu_p2p_sm_word(0x67647531u, 12345));
    /* Distinct over a buffer, and distinct between seeds. */
    enum { N = 1 << 16 };
    uint32_t *w = malloc(N * sizeof *w);
    assert_non_null(w);
    for (uint32_t i = 0; i < N; i++)
        w[i] = gdu_p2p_sm_word(7, i);
    qsort(w, N, sizeof *w, compare_words);
    for (uint32_t i = 1; i < N; i++)
        assert_int_not_equal(w[i - 1], w[i]);
    assert_int_not_equal(gdu_p2p_sm_word(7, 5), gdu_p2p_sm_word(8, 5));
    /* Beyond 4 Gi words the high index bits still matter. */
    assert_int_not_equal(gdu_p2p_sm_word(7, 5), gdu_p2p_sm_word(7, 5 + (1ull << 32)));
    free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(header),
        cmocka_unit_test(signatures),
        cmocka_unit_test(pattern),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
