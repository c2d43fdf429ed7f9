/* The model of the kernel's persistent pin (src/pinmodel): one test per rule,
 * each named with the source line it models. */
#include "driverabi/nv_status.h"
#include "pinmodel/pin_model.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#define MIB ((uint64_t)1 << 20)
#define A 0x7f0000000000ull
#define PID 4242

static gdu_pin_vidmem g_two[] = {{0x100, A, 2 * MIB, 0}, {0x101, A + 2 * MIB, 2 * MIB, 0}};

static gdu_pin_object object(unsigned n_vaspaces, const gdu_pin_vidmem *v, size_t n)
{
    return (gdu_pin_object){
        .gpu = 0, .pid = PID, .n_vaspaces = n_vaspaces, .vidmem = v, .n_vidmem = n};
}

static gdu_pin_verdict lookup1(gdu_pin_object o, uint64_t va, uint64_t size)
{
    gdu_pin_state st = {.pid = PID, .objects = &o, .n_objects = 1};
    gdu_pin_verdict v;
    gdu_pin_lookup(&st, va, size, &v);
    return v;
}

/* nvfs-core.c:1274-1292: start rounded down, length rounded up; p2p.c:904-985
 * with one object and one VA space finds it. */
static void found_rounded(void **state)
{
    gdu_pin_verdict v = lookup1(object(1, g_two, 1), A + 0x1000, MIB);
    assert_int_equal(v.rule, GDU_PIN_FOUND);
    assert_int_equal(v.err, 0);
    assert_int_equal(v.start, A);
    assert_int_equal(v.length, MIB + 64 * 1024);
    assert_int_equal(v.pages, 17);
    assert_int_equal(v.memory, 0x100);
    char buf[300];
    assert_non_null(strstr(gdu_pin_explain(&v, buf, sizeof buf), "found"));
}

/* p2p.c:886-887: the validation ignores the VA space, so a second registered
 * VA space validates too and the object answers NV_ERR_GENERIC; the outer
 * loop then ends NOT_FOUND: -EINVAL. The shim's old behaviour (every
 * FERMI_VASPACE_A of the device registered) fails here. */
static void two_vaspaces_not_found(void **state)
{
    gdu_pin_verdict v = lookup1(object(2, g_two, 1), A, MIB);
    assert_int_equal(v.rule, GDU_PIN_MANY_VASPACES);
    assert_int_equal(v.err, -EINVAL);
    assert_int_equal(v.nv_status, GDU_NV_ERR_OBJECT_NOT_FOUND);
    assert_string_equal(v.where, "p2p.c:886-887");
    char buf[400];
    assert_non_null(strstr(gdu_pin_explain(&v, buf, sizeof buf), "2 VA spaces"));
}

/* third_party_p2p.c:440: no VA space, the loop's first step fails. */
static void no_vaspace(void **state)
{
    gdu_pin_verdict v = lookup1(object(0, g_two, 1), A, MIB);
    assert_int_equal(v.rule, GDU_PIN_NO_VASPACE);
    assert_int_equal(v.err, -EINVAL);
}

/* third_party_p2p.c:618: no registration holds the start. */
static void not_registered(void **state)
{
    gdu_pin_verdict v = lookup1(object(1, g_two, 1), A + 8 * MIB, MIB);
    assert_int_equal(v.rule, GDU_PIN_NOT_REGISTERED);
    assert_int_equal(v.err, -EINVAL);
    gdu_pin_state empty = {.pid = PID};
    gdu_pin_lookup(&empty, A, MIB, &v);
    assert_int_equal(v.rule, GDU_PIN_NOT_REGISTERED);
    assert_int_equal(v.object, SIZE_MAX);
}

/* third_party_p2p.c:627: the whole rounded range must lie in one
 * registration; two adjacent allocations do not make one. */
static void spans_two_allocations(void **state)
{
    gdu_pin_verdict v = lookup1(object(1, g_two, 2), A + MIB, 2 * MIB);
    assert_int_equal(v.rule, GDU_PIN_SPANS);
    assert_int_equal(v.err, -EINVAL);
    char buf[400];
    assert_non_null(strstr(gdu_pin_explain(&v, buf, sizeof buf), "one piece"));
    v = lookup1(object(1, g_two, 1), A + MIB, 2 * MIB);
    assert_int_equal(v.rule, GDU_PIN_PAST_END);
}

/* The rounding can push a buffer that fits its allocation past it: 64 KiB at
 * offset 16 of a 64 KiB registration is asked as 128 KiB. */
static void rounding_past_end(void **state)
{
    gdu_pin_vidmem one = {0x200, A, 64 * 1024, 0};
    gdu_pin_verdict v = lookup1(object(1, &one, 1), A + 16, 64 * 1024 - 16);
    assert_int_equal(v.rule, GDU_PIN_FOUND);
    v = lookup1(object(1, &one, 1), A + 16, 64 * 1024);
    assert_int_equal(v.rule, GDU_PIN_PAST_END);
    assert_int_equal(v.length, 128 * 1024);
}

/* p2p.c:966-971: two objects of the process hold it: NV_ERR_GENERIC, -EIO. */
static void two_objects_eio(void **state)
{
    gdu_pin_object objs[2] = {object(1, g_two, 1), object(1, g_two, 1)};
    objs[1].gpu = 1;
    gdu_pin_state st = {.pid = PID, .objects = objs, .n_objects = 2};
    gdu_pin_verdict v;
    gdu_pin_lookup(&st, A, MIB, &v);
    assert_int_equal(v.rule, GDU_PIN_TWO_OBJECTS);
    assert_int_equal(v.err, -EIO);
    assert_int_equal(v.nv_status, GDU_NV_ERR_GENERIC);
    /* An object of the two that fails (two VA spaces) leaves the other found. */
    objs[0].n_vaspaces = 2;
    gdu_pin_lookup(&st, A, MIB, &v);
    assert_int_equal(v.rule, GDU_PIN_FOUND);
    assert_int_equal(v.gpu, 1);
}

/* third_party_p2p.c:300-342: only objects of the calling process count. */
static void other_process_ignored(void **state)
{
    gdu_pin_object o = object(1, g_two, 1);
    o.pid = PID + 1;
    gdu_pin_state st = {.pid = PID, .objects = &o, .n_objects = 1};
    gdu_pin_verdict v;
    gdu_pin_lookup(&st, A, MIB, &v);
    assert_int_equal(v.rule, GDU_PIN_NOT_REGISTERED);
}

/* p2p.c:1030: bar1 - mapped >= 36 MiB + length; p2p.c:579: else
 * NV_ERR_INSUFFICIENT_RESOURCES, -ENOMEM (nv-p2p.c:66). */
static void bar1_budget(void **state)
{
    assert_int_equal(gdu_pin_bar1_budget(256 * MIB, 0), 220 * MIB);
    assert_int_equal(gdu_pin_bar1_budget(256 * MIB, 220 * MIB), 0);
    assert_int_equal(gdu_pin_bar1_budget(256 * MIB, 300 * MIB), 0);
    gdu_pin_vidmem big = {0x300, A, 512 * MIB, 0};
    gdu_pin_object o = object(1, &big, 1);
    gdu_pin_gpu g = {.gpu = 0, .bar1_bytes = 256 * MIB};
    gdu_pin_state st = {.pid = PID, .objects = &o, .n_objects = 1, .gpus = &g, .n_gpus = 1};
    gdu_pin_verdict v;
    gdu_pin_lookup(&st, A, 220 * MIB, &v);
    assert_int_equal(v.rule, GDU_PIN_FOUND);
    gdu_pin_lookup(&st, A, 220 * MIB + 1, &v);
    assert_int_equal(v.rule, GDU_PIN_BAR1_FULL);
    assert_int_equal(v.err, -ENOMEM);
    assert_int_equal(v.nv_status, GDU_NV_ERR_INSUFFICIENT_RESOURCES);
    g.mapped_bytes = 200 * MIB;
    gdu_pin_lookup(&st, A, 64 * MIB, &v);
    assert_int_equal(v.rule, GDU_PIN_BAR1_FULL);
    char buf[400];
    assert_non_null(strstr(gdu_pin_explain(&v, buf, sizeof buf), "BAR1 256 MiB, 200 MiB pinned"));
}

/* Other processes' pins and mappings take from the same BAR1: with RM's
 * count of the unused part known, the budget is at most that less the
 * reserve, whatever this process's own mappings leave. */
static void rm_count_shared_by_every_process(void **state)
{
    gdu_pin_gpu none = {.gpu = 0};
    assert_true(gdu_pin_gpu_budget(&none) == UINT64_MAX);
    gdu_pin_vidmem big = {0x300, A, 512 * MIB, 0};
    gdu_pin_object o = object(1, &big, 1);
    gdu_pin_gpu g = {.gpu = 0, .bar1_bytes = 256 * MIB, .bar1_available = 100 * MIB};
    assert_int_equal(gdu_pin_gpu_budget(&g), 64 * MIB);
    gdu_pin_state st = {.pid = PID, .objects = &o, .n_objects = 1, .gpus = &g, .n_gpus = 1};
    gdu_pin_verdict v;
    gdu_pin_lookup(&st, A, 64 * MIB, &v);
    assert_int_equal(v.rule, GDU_PIN_FOUND);
    gdu_pin_lookup(&st, A, 128 * MIB, &v); /* within 220 MiB of this process's own budget */
    assert_int_equal(v.rule, GDU_PIN_BAR1_FULL);
    char buf[400];
    assert_non_null(strstr(gdu_pin_explain(&v, buf, sizeof buf), "RM counts 100 MiB unused"));
    /* RM's count alone (no PCI size known) is checked too. */
    g.bar1_bytes = 0;
    gdu_pin_lookup(&st, A, 128 * MIB, &v);
    assert_int_equal(v.rule, GDU_PIN_BAR1_FULL);
    g.bar1_available = 20 * MIB; /* less than the reserve: nothing fits */
    assert_int_equal(gdu_pin_gpu_budget(&g), 0);
}

/* p2p.c:1364 and 1417: NV_ERR_NOT_SUPPORTED is -ENOTSUPP (524), nv-p2p.c:71. */
static void not_supported_is_524(void **state)
{
    gdu_pin_object o = object(1, g_two, 1);
    gdu_pin_gpu g = {.gpu = 0, .no_rm_object = true};
    gdu_pin_state st = {.pid = PID, .objects = &o, .n_objects = 1, .gpus = &g, .n_gpus = 1};
    gdu_pin_verdict v;
    gdu_pin_lookup(&st, A, MIB, &v);
    assert_int_equal(v.err, -524);
    assert_int_not_equal(v.err, -95);
    g.no_rm_object = false;
    g.apm = true;
    gdu_pin_lookup(&st, A, MIB, &v);
    assert_int_equal(v.rule, GDU_PIN_NOT_SUPPORTED);
    char buf[300];
    assert_non_null(strstr(gdu_pin_explain(&v, buf, sizeof buf), "-ENOTSUPP (524)"));
}

/* nvfs-core.c:1275-1280: a range that wraps is refused; so is length 0. */
static void bad_lengths(void **state)
{
    gdu_pin_verdict v = lookup1(object(1, g_two, 1), A, 0);
    assert_int_equal(v.rule, GDU_PIN_BAD_LENGTH);
    assert_int_equal(v.err, -EINVAL);
    v = lookup1(object(1, g_two, 1), UINT64_MAX - 10, 100);
    assert_int_equal(v.rule, GDU_PIN_BAD_LENGTH);
    v = lookup1(object(1, g_two, 1), 0, UINT64_MAX);
    assert_int_equal(v.rule, GDU_PIN_BAD_LENGTH);
}

static void rule_names(void **state)
{
    assert_string_equal(gdu_pin_rule_name(GDU_PIN_FOUND), "found");
    assert_string_equal(gdu_pin_rule_name(GDU_PIN_MANY_VASPACES), "many-vaspaces");
    assert_string_equal(gdu_pin_rule_name((gdu_pin_rule)99), "unknown");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(found_rounded),
        cmocka_unit_test(two_vaspaces_not_found),
        cmocka_unit_test(no_vaspace),
        cmocka_unit_test(not_registered),
        cmocka_unit_test(spans_two_allocations),
        cmocka_unit_test(rounding_past_end),
        cmocka_unit_test(two_objects_eio),
        cmocka_unit_test(other_process_ignored),
        cmocka_unit_test(bar1_budget),
        cmocka_unit_test(rm_count_shared_by_every_process),
        cmocka_unit_test(not_supported_is_524),
        cmocka_unit_test(bad_lengths),
        cmocka_unit_test(rule_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
