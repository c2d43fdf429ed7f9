/* gdunlock bench's file of the pattern (util/pattern.h, tested in
 * test_util_pattern.c): made, checked, reused, and refused when it is not
 * one of this seed's. */
#include "bench/bench.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

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
    c.seed = 5; /* not this seed's file: read as it is, unchecked, as gdsio reads any file */
    assert_int_equal(bench_prepare_file(&c, why, sizeof why), BENCH_FILE_FOREIGN);
    assert_non_null(strstr(why, "differs from the pattern"));
    assert_non_null(strstr(why, "read as it is and its data not checked"));
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
        cmocka_unit_test(prepare_creates_checks_and_refuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
