/* gdunlock bench's verifiable pattern: filling and checking at any offset
 * and length, finding the first wrong byte, and preparing the bench file. */
#include "bench/bench.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

static void fill_and_check_agree_at_any_offset(void **state)
{
    uint8_t whole[300], part[300];
    bench_fill(whole, 0, sizeof whole, 9);
    for (uint64_t off = 0; off < 40; off++)
        for (size_t n = 0; n + off <= sizeof whole && n < 100; n += 7) {
            memset(part, 0, sizeof part);
            bench_fill(part, off, n, 9);
            assert_memory_equal(part, whole + off, n);
            assert_true(bench_check(part, off, n, 9) == UINT64_MAX);
        }
    /* Another seed is another pattern. */
    bench_fill(part, 0, 64, 10);
    assert_true(bench_check(part, 0, 64, 9) != UINT64_MAX);
}

static void check_reports_the_first_wrong_byte(void **state)
{
    uint8_t buf[256];
    bench_fill(buf, 1000, sizeof buf, 3);
    buf[77] ^= 1;
    buf[200] ^= 0x80;
    assert_int_equal(bench_check(buf, 1000, sizeof buf, 3), 1077);
    buf[77] ^= 1;
    assert_int_equal(bench_check(buf, 1000, sizeof buf, 3), 1200);
}

static void prepare_creates_checks_and_refuses(void **state)
{
    char dir[] = "./gdu-bench-pattern-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[64];
    snprintf(path, sizeof path, "%s/b.dat", dir);
    bench_config c = {.file = path, .total = 1 << 20, .seed = 4, .verify = true};
    char why[512] = "";
    assert_int_equal(bench_prepare_file(&c, why, sizeof why), -ENOENT);
    assert_non_null(strstr(why, "--create"));
    c.create = true;
    assert_int_equal(bench_prepare_file(&c, why, sizeof why), 0);
    assert_int_equal(bench_file_verify(&c, why, sizeof why), 1);
    c.create = false;
    assert_int_equal(bench_prepare_file(&c, why, sizeof why), 0); /* reused as it is */
    c.seed = 5;                                                   /* not this seed's file */
    assert_int_equal(bench_prepare_file(&c, why, sizeof why), -EINVAL);
    assert_non_null(strstr(why, "differs from the pattern"));
    assert_int_equal(bench_file_verify(&c, why, sizeof why), 0);
    c.verify = false; /* --no-verify: read as it is */
    assert_int_equal(bench_prepare_file(&c, why, sizeof why), 0);
    c.verify = true;
    c.seed = 4;
    c.total = 2 << 20; /* larger than the file */
    assert_int_equal(bench_prepare_file(&c, why, sizeof why), -EINVAL);
    assert_non_null(strstr(why, "fewer than -s"));
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fill_and_check_agree_at_any_offset),
        cmocka_unit_test(check_reports_the_first_wrong_byte),
        cmocka_unit_test(prepare_creates_checks_and_refuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
