/* Tunables: the environment as defaults read once, explicit values winning,
 * GDUNLOCK_IO_* validation, backend names, and what an engine reports when
 * CUDA is absent. */
#include "io/io_internal.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

static const char *const vars[] = {"GDUNLOCK_IO_BACKEND", "GDUNLOCK_IO_WORKERS",
                                   "GDUNLOCK_IO_CHUNK", "GDUNLOCK_IO_STAGING",
                                   "GDUNLOCK_IO_DIRECT"};

static int clear_env(void **state)
{
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    return 0;
}

/* The process's defaults were read once, at the first call (main set
 * GDUNLOCK_IO_WORKERS=5 and GDUNLOCK_IO_CHUNK=8K before it). */
static void environment_is_a_default_read_once(void **state)
{
    gdu_io_options o;
    assert_int_equal(gdu_io_options_default(&o, NULL, 0), 0);
    assert_int_equal(o.backend, GDU_IO_BACKEND_AUTO);
    assert_int_equal(o.direct, GDU_IO_DIRECT_AUTO);
    assert_int_equal(o.workers, 5);
    assert_int_equal(o.chunk_size, 8192);
    assert_int_equal(o.staging_per_worker, GDU_IO_DEFAULT_STAGING);
    setenv("GDUNLOCK_IO_WORKERS", "7", 1);
    assert_int_equal(gdu_io_options_default(&o, NULL, 0), 0);
    assert_int_equal(o.workers, 5);
}

/* What the caller sets wins; what it leaves zero takes the default. */
static void explicit_options_win(void **state)
{
    gdu_io_options o;
    assert_int_equal(gdu_io_options_default(&o, NULL, 0), 0);
    o.backend = GDU_IO_BACKEND_HOST;
    o.workers = 3;
    o.chunk_size = 0;
    gdu_io_engine *e = NULL;
    char why[256] = "";
    assert_int_equal(gdu_io_engine_create(&o, &e, why, sizeof why), 0);
    assert_int_equal(gdu_io_engine_options(e)->workers, 3);
    assert_int_equal(gdu_io_engine_options(e)->chunk_size, 8192);
    gdu_io_engine_destroy(e);
    o.workers = 0;
    assert_int_equal(gdu_io_engine_create(&o, &e, why, sizeof why), 0);
    assert_int_equal(gdu_io_engine_options(e)->workers, 5);
    gdu_io_engine_destroy(e);
}

/* A default changed at run time (kvikio's defaults::set): engines created
 * afterwards take it, an invalid value changes nothing and says why. Runs
 * last: it changes the process's defaults. */
static void defaults_set_at_run_time(void **state)
{
    char why[256] = "";
    assert_int_equal(gdu_io_defaults_set("workers", "9", why, sizeof why), 0);
    assert_int_equal(gdu_io_defaults_set("GDUNLOCK_IO_DIRECT", "ON", why, sizeof why), 0);
    gdu_io_options o;
    assert_int_equal(gdu_io_options_default(&o, NULL, 0), 0);
    assert_int_equal(o.workers, 9);
    assert_int_equal(o.direct, GDU_IO_DIRECT_ON);
    assert_int_equal(o.chunk_size, 8192); /* given (main's 8K): not O_DIRECT's default */
    o.backend = GDU_IO_BACKEND_HOST;
    o.workers = 0;
    gdu_io_engine *e = NULL;
    assert_int_equal(gdu_io_engine_create(&o, &e, why, sizeof why), 0);
    assert_int_equal(gdu_io_engine_options(e)->workers, 9);
    gdu_io_engine_destroy(e);

    assert_int_equal(gdu_io_defaults_set("workers", "0", why, sizeof why), -EINVAL);
    assert_non_null(strstr(why, "GDUNLOCK_IO_WORKERS=0"));
    assert_int_equal(gdu_io_defaults_set("threads", "4", why, sizeof why), -EINVAL);
    assert_non_null(strstr(why, "no setting named 'threads'"));
    assert_int_equal(gdu_io_defaults_set(NULL, "4", why, sizeof why), -EINVAL);
    assert_int_equal(gdu_io_options_default(&o, NULL, 0), 0);
    assert_int_equal(o.workers, 9);
}

static void builtin_defaults_without_environment(void **state)
{
    gdu_io_options o;
    memset(&o, 0, sizeof o);
    assert_int_equal(gdu_io_options_parse_env(&o, NULL, 0), 0);
    assert_int_equal(o.workers, 0); /* nothing set: nothing applied */
    assert_in_range(gdu_io_default_workers(), 2, GDU_IO_MAX_DEFAULT_WORKERS);
}

/* Three quarters of the CPUs, at least 2, at most 16: the rest of the CPUs
 * stay with the thread that submits (one worker per CPU slowed a 16-CPU
 * machine's slices, docs/io-api.md). */
static void default_workers_leave_a_quarter_of_the_cpus(void **state)
{
    static const long cpus[] = {-1, 0, 1, 2, 3, 4, 8, 12, 16, 20, 21, 22, 32, 256};
    static const unsigned want[] = {2, 2, 2, 2, 3, 3, 6, 9, 12, 15, 16, 16, 16, 16};
    for (size_t i = 0; i < sizeof cpus / sizeof cpus[0]; i++) {
        print_message("%ld CPUs\n", cpus[i]);
        assert_int_equal(gdu_io_workers_for_cpus(cpus[i]), want[i]);
    }
}

static void env_values_parse(void **state)
{
    setenv("GDUNLOCK_IO_BACKEND", "pipeline", 1);
    setenv("GDUNLOCK_IO_WORKERS", "3", 1);
    setenv("GDUNLOCK_IO_CHUNK", "8K", 1);
    setenv("GDUNLOCK_IO_STAGING", "2", 1);
    setenv("GDUNLOCK_IO_DIRECT", "off", 1);
    gdu_io_options o;
    memset(&o, 0, sizeof o);
    char why[256] = "";
    assert_int_equal(gdu_io_options_parse_env(&o, why, sizeof why), 0);
    assert_int_equal(o.backend, GDU_IO_BACKEND_PIPELINE);
    assert_int_equal(o.workers, 3);
    assert_int_equal(o.chunk_size, 8192);
    assert_int_equal(o.staging_per_worker, 2);
    assert_int_equal(o.direct, GDU_IO_DIRECT_OFF);
}

/* Every boolean as kvikio takes its own, in any case; auto in any case. */
static void env_direct_takes_kvikio_booleans(void **state)
{
    static const struct {
        const char *text;
        gdu_io_direct want;
    } cases[] = {
        {"ON", GDU_IO_DIRECT_ON},  {"True", GDU_IO_DIRECT_ON}, {"yes", GDU_IO_DIRECT_ON},
        {"1", GDU_IO_DIRECT_ON},   {"OFF", GDU_IO_DIRECT_OFF}, {"false", GDU_IO_DIRECT_OFF},
        {"No", GDU_IO_DIRECT_OFF}, {"0", GDU_IO_DIRECT_OFF},   {"AUTO", GDU_IO_DIRECT_AUTO}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        clear_env(NULL);
        setenv("GDUNLOCK_IO_DIRECT", cases[i].text, 1);
        gdu_io_options o;
        memset(&o, 0, sizeof o);
        o.direct = cases[i].want == GDU_IO_DIRECT_ON ? GDU_IO_DIRECT_OFF : GDU_IO_DIRECT_ON;
        char why[256] = "";
        assert_int_equal(gdu_io_options_parse_env(&o, why, sizeof why), 0);
        assert_int_equal(o.direct, cases[i].want);
    }
}

static void expect_rejected(const char *var, const char *value, gdu_io_backend backend)
{
    clear_env(NULL);
    setenv(var, value, 1);
    gdu_io_options o, before;
    memset(&o, 0, sizeof o);
    o.backend = backend;
    before = o;
    char why[256] = "";
    assert_int_equal(gdu_io_options_parse_env(&o, why, sizeof why), -EINVAL);
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
    /* Host memory is the caller's to say: a setting would reinterpret every
     * device pointer as a host one. */
    expect_rejected("GDUNLOCK_IO_BACKEND", "host", GDU_IO_BACKEND_AUTO);
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

static void engine_says_why(void **state)
{
    gdu_io_options o;
    assert_int_equal(gdu_io_options_default(&o, NULL, 0), 0);
    o.backend = GDU_IO_BACKEND_HOST;
    gdu_io_engine *e = NULL;
    char why[256] = "";
    assert_int_equal(gdu_io_engine_create(&o, &e, why, sizeof why), 0);
    assert_int_equal(gdu_io_engine_backend(e), GDU_IO_BACKEND_HOST);
    assert_non_null(strstr(gdu_io_engine_reason(e), "host"));
    gdu_io_engine_destroy(e);
    o.chunk_size = 5000;
    assert_int_equal(gdu_io_engine_create(&o, &e, why, sizeof why), -EINVAL);
    assert_null(e);
    assert_non_null(strstr(why, "chunk"));
    /* Device memory: either CUDA works here or the reason says why not. */
    assert_int_equal(gdu_io_options_default(&o, NULL, 0), 0);
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
    /* Set before the first gdu_io_options_default: the process's defaults. */
    setenv("GDUNLOCK_IO_WORKERS", "5", 1);
    setenv("GDUNLOCK_IO_CHUNK", "8K", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(environment_is_a_default_read_once),
        cmocka_unit_test(explicit_options_win),
        cmocka_unit_test_setup(builtin_defaults_without_environment, clear_env),
        cmocka_unit_test(default_workers_leave_a_quarter_of_the_cpus),
        cmocka_unit_test_setup(env_values_parse, clear_env),
        cmocka_unit_test_setup(env_direct_takes_kvikio_booleans, clear_env),
        cmocka_unit_test_setup(env_overrides_are_validated, clear_env),
        cmocka_unit_test_setup(backend_names_round_trip, clear_env),
        cmocka_unit_test_setup_teardown(engine_says_why, clear_env, clear_env),
        cmocka_unit_test_setup_teardown(defaults_set_at_run_time, clear_env, clear_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
