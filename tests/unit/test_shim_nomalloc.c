/* The shim's ioctl path allocates no memory from malloc: an ioctl from a
 * signal handler that interrupted its thread inside malloc would deadlock on
 * malloc's lock there (issue 13). This program counts every malloc, calloc,
 * realloc and free made inside gdu_shim_ioctl, less those of the fake RM
 * behind it, over a whole GeForce-like program. Skipped under AddressSanitizer
 * and valgrind, whose allocators the shim uses or which replace these. */
#include "fake_rm_client.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_runtime.h"

#define MiB (1024ull * 1024)

void *__libc_malloc(size_t);
void *__libc_calloc(size_t, size_t);
void *__libc_realloc(void *, size_t);
void __libc_free(void *);

static int g_counting, g_in_fake;
static unsigned long g_calls;

static void count(void)
{
    if (g_counting && !g_in_fake)
        g_calls++;
}

void *malloc(size_t n)
{
    count();
    return __libc_malloc(n);
}

void *calloc(size_t a, size_t b)
{
    count();
    return __libc_calloc(a, b);
}

void *realloc(void *p, size_t n)
{
    count();
    return __libc_realloc(p, n);
}

void free(void *p)
{
    if (p != NULL)
        count();
    __libc_free(p);
}

static gdu_shim_ops g_fake;

static int op_ioctl(void *ctx, int fd, unsigned long request, void *arg)
{
    g_in_fake++;
    int r = g_fake.ioctl(ctx, fd, request, arg);
    g_in_fake--;
    return r;
}

static void op_log(void *ctx, int level, const char *line)
{
    g_in_fake++;
    g_fake.log(ctx, level, line);
    g_in_fake--;
}

static void ioctl_path_does_not_allocate(void **state)
{
    g_counting = 1;
    void *probe = malloc(16);
    free(probe);
    g_counting = 0;
    if (g_calls != 2 || RUNNING_ON_VALGRIND)
        skip(); /* this allocator is not ours to count (valgrind, sanitizers) */
    g_calls = 0;
    if (GDU_TEST_ASAN)
        skip();
    fake_rm *f = fake_rm_new();
    g_fake = fake_rm_ops(f);
    gdu_shim_ops ops = g_fake;
    ops.ioctl = op_ioctl;
    ops.log = op_log;
    gdu_shim_config cfg = {
        .log_level = GDU_LOG_DEBUG, .driver_version = "580.159.04\n", .pid = FAKE_RM_PID};
    lc_setup(f);
    gdu_shim *s = gdu_shim_new(&cfg, &ops);
    lc_gpus g;
    g_counting = 1;
    lc_make_gpus(s, f, 0xc1d00001, 2, &g);
    for (unsigned i = 0; i < 300; i++) {
        uint64_t va = 0x7f0000000000ull + i * 64 * MiB;
        assert_int_equal(lc_alloc_mapped(s, &g, i % 2, 0x5c000a00 + i, va, 2 * MiB), 0);
        if (i % 3 != 0)
            assert_int_equal(lc_free_mapped(s, &g, i % 2, 0x5c000a00 + i, va, 2 * MiB), 0);
    }
    assert_int_equal(lc_free(s, g.client, g.client, g.device[1]), 0);
    assert_int_equal(lc_free(s, g.client, g.client, g.client), 0);
    g_counting = 0;
    /* The fake RM's own (and lc_map's block) are left out by op_ioctl; what
     * is left is the shim's. lc_map allocates its UVM block with calloc:
     * one calloc and one free per mapping. */
    assert_int_equal(g_calls, 2 * 300);
    gdu_shim_totals t;
    gdu_shim_get_totals(s, &t);
    assert_true(t.registered >= 300);
    gdu_shim_free(s);
    fake_rm_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(ioctl_path_does_not_allocate)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
