/* Tunables: defaults, GDUNLOCK_IO_* environment overrides and their
 * validation, backend names, and what an engine reports when CUDA is absent. */
#include "gdunlock/io.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

static const char *const vars[] = {"GDUNLOCK_IO_BACKEND", "GDUNLOCK_IO_WORKERS", "GDUNLOCK_IO_CHUNK",
                                   "GDUNLOCK_IO_STAGING", "GDUNLOCK_IO_DIRECT"};

static int clear_env(void **state)
{
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    return 0;
}

static void defaults(void **state)
{
    gdu_io_options o;
    gdu_io_options_default(&o);
    assert_int_equal(o.backend, GDU_IO_BACKEND_AUTO);
    assert_in_range(o.workers, 2, GDU_IO_MAX_DEFAULT_WORKERS);
    assert_int_equal(o.direct, GDU_IO_DIRECT_AUTO);
    assert_int_equal(o.workers, gdu_io_default_workers());
    assert_int_equal(o.chunk_size, GDU_IO_DEFAULT_CHUNK);
    assert_int_equal(o.staging_per_worker, GDU_IO_DEFAULT_STAGING);
    assert_int_equal(gdu_io_options_from_env(&o, NULL, 0), 0);
    assert_int_equal(o.workers, gdu_io_default_workers());
}

static void env_overrides_apply(void **state)
{
    setenv("GDUNLOCK_IO_BACKEND", "pipeline", 1);
    setenv("GDUNLOCK_IO_WORKERS", "3", 1);
    setenv("GDUNLOCK_IO_CHUNK", "8K", 1);
    setenv("GDUNLOCK_IO_STAGING", "2", 1);
    setenv("GDUNLOCK_IO_DIRECT", "off", 1);
    gdu_io_options o;
    gdu_io_options_default(&o);
    char why[256] = "";
    assert_int_equal(gdu_io_options_from_env(&o, why, sizeof why), 0);
    assert_int_equal(o.backend, GDU_IO_BACKEND_PIPELINE);
    assert_int_equal(o.workers, 3);
    assert_int_equal(o.chunk_size, 8192);
    assert_int_equal(o.staging_per_worker, 2);
    assert_int_equal(o.direct, GDU_IO_DIRECT_OFF);
}

static void expect_rejected(const char *var, const char *value, gdu_io_backend backend)
{
    clear_env(NULL);
    setenv(var, value, 1);
    gdu_io_options o, before;
    gdu_io_options_default(&o);
    o.backend = backend;
    before = o;
    char why[256] = "";
    assert_int_equal(gdu_io_options_from_env(&o, why, sizeof why), -EINVAL);
    assert_non_null(strstr(why, var));
    assert_memory_equal(&o, &before, sizeof o); /* unchanged on error */
}

static void env_overrides_are_validated(void **state)
{
    expect_rejected("GDUNLOCK_IO_WORKERS", "0", GDU_IO_BACKEND_AUTO);
    expect_rejected("GDUNLOCK_IO_WORKERS", "many", GDU_IO_BACKEND_AUTO);
    expect_rejected("GDUNLOCK_IO_CHUNK", "1000", GDU_IO_BACKEND_AUTO); /* not 4 KiB aligned */
    expect_rejected("GDUNLOCK_IO_CHUNK", "2G", GDU_IO_BACKEND_AUTO);
    expect_rejected("GDUNLOCK_IO_STAGING", "17", GDU_IO_BACKEND_AUTO);
    expect_rejected("GDUNLOCK_IO_DIRECT", "maybe", GDU_IO_BACKEND_AUTO);
    expect_rejected("GDUNLOCK_IO_BACKEND", "nvme", GDU_IO_BACKEND_AUTO);
    /* Never reinterpret device pointers as host ones or the reverse. */
    expect_rejected("GDUNLOCK_IO_BACKEND", "host", GDU_IO_BACKEND_AUTO);
    expect_rejected("GDUNLOCK_IO_BACKEND", "pipeline", GDU_IO_BACKEND_HOST);
}

static void backend_names_round_trip(void **state)
{
    for (int b = GDU_IO_BACKEND_AUTO; b <= GDU_IO_BACKEND_HOST; b++) {
        gdu_io_backend back;
        assert_int_equal(gdu_io_backend_parse(gdu_io_backend_name((gdu_io_backend)b), &back), 0);
        assert_int_equal(back, b);
    }
    gdu_io_backend back;
    assert_int_equal(gdu_io_backend_parse("gds", &back), -EINVAL);
}

static void engine_says_why_and_env_reaches_it(void **state)
{
    gdu_io_options o;
    gdu_io_options_default(&o);
    o.backend = GDU_IO_BACKEND_HOST;
    setenv("GDUNLOCK_IO_WORKERS", "5", 1);
    gdu_io_engine *e = NULL;
    char why[256] = "";
    assert_int_equal(gdu_io_engine_create(&o, &e, why, sizeof why), 0);
    assert_int_equal(gdu_io_engine_options(e)->workers, 5);
    assert_int_equal(gdu_io_engine_backend(e), GDU_IO_BACKEND_HOST);
    assert_non_null(strstr(gdu_io_engine_reason(e), "host"));
    gdu_io_engine_destroy(e);
    o.chunk_size = 5000;
    assert_int_equal(gdu_io_engine_create(&o, &e, why, sizeof why), -EINVAL);
    assert_null(e);
    assert_non_null(strstr(why, "chunk"));
    /* Device memory: either CUDA works here or the reason says why not. */
    gdu_io_options_default(&o);
    o.backend = GDU_IO_BACKEND_PIPELINE;
    int r = gdu_io_engine_create(&o, &e, why, sizeof why);
    if (r == 0)
        gdu_io_engine_destroy(e);
    else {
        assert_int_equal(r, -ENODEV);
        assert_non_null(strstr(why, "CUDA unavailable"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(defaults, clear_env),
        cmocka_unit_test_setup(env_overrides_apply, clear_env),
        cmocka_unit_test_setup(env_overrides_are_validated, clear_env),
        cmocka_unit_test_setup(backend_names_round_trip, clear_env),
        cmocka_unit_test_setup_teardown(engine_says_why_and_env_reaches_it, clear_env, clear_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
