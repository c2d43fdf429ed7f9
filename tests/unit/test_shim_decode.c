/* The shim's block decoders and the 64 KiB alignment rule. */
#include "driverabi/nv_escape.h"
#include "driverabi/nvos.h"
#include "shim/shim_decode.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

static void watched(void **state)
{
    assert_true(gdu_rm_call_watched(0x2B, 48));
    assert_true(gdu_rm_call_watched(0x2B, 32));
    assert_false(gdu_rm_call_watched(0x2B, 40));
    assert_true(gdu_rm_call_watched(0x29, 16));
    assert_true(gdu_rm_call_watched(0x2A, 32));
    assert_false(gdu_rm_call_watched(0x4E, 56)); /* RM_MAP_MEMORY: not watched */
    assert_int_equal(gdu_uvm_watched_size(34, NULL), 24);
    assert_int_equal(gdu_uvm_watched_size(33, NULL), 0);
    assert_int_equal(gdu_uvm_watched_size(35, NULL), 0);
}

static void decode_alloc_forms(void **state)
{
    gdu_nvos64 a64 = {.hRoot = 0xc1d00001,
                      .hObjectParent = 0x5c000002,
                      .hObjectNew = 0x5c000003,
                      .hClass = 0x2080,
                      .pAllocParms = 0x1234,
                      .paramsSize = 4,
                      .status = 0x22};
    gdu_rm_call c;
    assert_true(gdu_rm_call_decode(0x2B, &a64, sizeof a64, &c));
    assert_int_equal(c.op, GDU_RM_OP_ALLOC);
    assert_int_equal(c.client, 0xc1d00001);
    assert_int_equal(c.parent, 0x5c000002);
    assert_int_equal(c.handle, 0x5c000003);
    assert_int_equal(c.cls, 0x2080);
    assert_int_equal(c.params, 0x1234);
    assert_int_equal(c.status, 0x22);
    /* NVOS21: status at 28, paramsSize at 24 (the seed article read 24 as status). */
    gdu_nvos21 a21 = {.hRoot = 1, .hClass = 0x503c, .paramsSize = 4, .status = 0x22};
    assert_true(gdu_rm_call_decode(0x2B, &a21, sizeof a21, &c));
    assert_int_equal(c.status, 0x22);
    assert_int_equal(c.params_size, 4);
    gdu_nvos54 ctl = {.hClient = 1,
                      .hObject = 2,
                      .cmd = 0x503c0104,
                      .params = 8,
                      .paramsSize = 32,
                      .status = 0x19};
    assert_true(gdu_rm_call_decode(0x2A, &ctl, sizeof ctl, &c));
    assert_int_equal(c.op, GDU_RM_OP_CONTROL);
    assert_int_equal(c.cmd, 0x503c0104);
    assert_int_equal(c.status, 0x19);
    gdu_nvos00 fr = {.hRoot = 1, .hObjectParent = 1, .hObjectOld = 7, .status = 0x57};
    assert_true(gdu_rm_call_decode(0x29, &fr, sizeof fr, &c));
    assert_int_equal(c.handle, 7);
    assert_int_equal(c.status, 0x57);
    gdu_nvos55 dup = {.hClient = 1, .hParent = 2, .hObject = 3, .hClientSrc = 4, .hObjectSrc = 5};
    assert_true(gdu_rm_call_decode(0x34, &dup, sizeof dup, &c));
    assert_int_equal(c.src_client, 4);
    assert_int_equal(c.src_handle, 5);
    gdu_nvos02_with_fd am = {
        .params = {.hRoot = 1, .hObjectParent = 2, .hObjectNew = 3, .hClass = 0x71}, .fd = 9};
    assert_true(gdu_rm_call_decode(0x27, &am, sizeof am, &c));
    assert_int_equal(c.cls, 0x71);
    assert_false(gdu_rm_call_decode(0x2B, &a64, 40, &c));
}

static void uvm_ranges(void **state)
{
    gdu_uvm_free_params f = {.base = 0x7f0000000000ull, .length = 1 << 21, .rmStatus = 0x57};
    gdu_uvm_range r;
    gdu_uvm_range_decode(GDU_UVM_FREE, &f, &r);
    assert_true(r.base == f.base && r.length == f.length);
    assert_int_equal(r.status, 0x57);
    gdu_uvm_unmap_external_params u = {.base = 5, .length = 6, .rmStatus = 7};
    gdu_uvm_range_decode(GDU_UVM_UNMAP_EXTERNAL, &u, &r);
    assert_int_equal(r.base, 5);
    assert_int_equal(r.status, 7);
}

static void alignment(void **state)
{
    uint64_t a, s, o;
    assert_true(gdu_vidmem_aligned_part(0x200000, 0x200000, 0, &a, &s, &o));
    assert_true(a == 0x200000 && s == 0x200000 && o == 0);
    /* 0x5eb000 bytes: the 64 KiB multiple below it. */
    assert_true(gdu_vidmem_aligned_part(0x7f8be3a00000ull, 0x5eb000, 0, &a, &s, &o));
    assert_int_equal(s, 0x5e0000);
    assert_true(gdu_vidmem_aligned_part(0x10001000, 0x400000, 0x1000, &a, &s, &o));
    assert_true(a == 0x10010000 && o == 0x10000 && s == 0x3f0000);
    assert_false(gdu_vidmem_aligned_part(0x10001000, 0x400000, 0, &a, &s, &o));
    assert_false(gdu_vidmem_aligned_part(0x10000, 0x8000, 0, &a, &s, &o));
    assert_int_equal(s, 0);
    assert_false(gdu_vidmem_aligned_part(0x10001000, 0x1000, 0x1000, &a, &s, &o));
    assert_false(gdu_vidmem_aligned_part(UINT64_MAX - 10, 100, 0, &a, &s, &o));
    assert_false(gdu_vidmem_aligned_part(0x1000, 0x100000, UINT64_MAX - 0x100, &a, &s, &o));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(watched),
        cmocka_unit_test(decode_alloc_forms),
        cmocka_unit_test(uvm_ranges),
        cmocka_unit_test(alignment),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
