/* The cuFile loader without libcufile (CI) and its error naming. */
#include "cuda/cufile_api.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

static void missing_library_is_reported_with_the_path_tried(void **state)
{
    setenv("GDUNLOCK_LIBCUFILE", "/nonexistent/libcufile.so.0", 1);
    char why[512] = "";
    const gdu_cufile *cf = gdu_cufile_load(why, sizeof why);
    assert_null(cf);
    assert_non_null(strstr(why, "/nonexistent/libcufile.so.0"));
    /* A second call gives the same answer (loaded once per process). */
    char again[512] = "";
    assert_null(gdu_cufile_load(again, sizeof again));
    assert_string_equal(why, again);
}

static void error_names_cover_the_codes_we_meet(void **state)
{
    assert_string_equal(gdu_cufile_error_name(5027), "CU_FILE_HANDLE_NOT_REGISTERED (5027)");
    /* cuFileRead returns the negated code. */
    assert_string_equal(gdu_cufile_error_name(-5027), "CU_FILE_HANDLE_NOT_REGISTERED (5027)");
    assert_string_equal(gdu_cufile_error_name(0), "CU_FILE_SUCCESS (0)");
    assert_string_equal(gdu_cufile_error_name(5021), "CU_FILE_UNKNOWN_ERROR (5021)");
    char buf[160];
    gdu_CUfileError e = {GDU_CU_FILE_DRIVER_NOT_INITIALIZED, 0};
    assert_string_equal(gdu_cufile_status_text(e, buf, sizeof buf),
                        "CU_FILE_DRIVER_NOT_INITIALIZED (5001)");
    e.err = GDU_CU_FILE_CUDA_DRIVER_ERROR;
    e.cu_err = 2;
    assert_non_null(strstr(gdu_cufile_status_text(e, buf, sizeof buf), "(2)"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(missing_library_is_reported_with_the_path_tried),
        cmocka_unit_test(error_names_cover_the_codes_we_meet),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
