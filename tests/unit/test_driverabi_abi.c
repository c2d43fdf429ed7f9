/* Driver ABI: status names, ioctl request codes, UVM layout choice by driver version. */
#include "driverabi/nv_escape.h"
#include "driverabi/nv_status.h"
#include "driverabi/nvos.h"
#include "driverabi/uvm_abi.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

static void status_names(void **state)
{
    assert_string_equal(gdu_nv_status_name(0x63), "NV_ERR_STATE_IN_USE (0x63)");
    assert_string_equal(gdu_nv_status_name(0), "NV_OK (0x0)");
    assert_string_equal(gdu_nv_status_name(0x19), "NV_ERR_INSERT_DUPLICATE_NAME (0x19)");
    assert_string_equal(gdu_nv_status_name(0x1f), "NV_ERR_INVALID_ARGUMENT (0x1f)");
    assert_string_equal(gdu_nv_status_name(0x57), "NV_ERR_OBJECT_NOT_FOUND (0x57)");
    assert_string_equal(gdu_nv_status_name(0xffff), "NV_ERR_GENERIC (0xffff)");
    assert_string_equal(gdu_nv_status_name(0x12345), "unknown NV_STATUS (0x12345)");
    assert_null(gdu_nv_status_symbol(0xdeadbeef));
    assert_int_equal(gdu_nv_status_count(), 150);
}

/* Each constant gdunlock compares with is the code of its own name in the
 * table (nvstatuscodes.h): GDU_NV_ERR_X is NV_ERR_X. */
static void status_constants_match_their_names(void **state)
{
#define NAMED(c)                                                                                   \
    {                                                                                              \
        c, &#c[4]                                                                                  \
    }
    static const struct {
        unsigned code;
        const char *name;
    } named[] = {
        NAMED(GDU_NV_OK),
        NAMED(GDU_NV_ERR_INSERT_DUPLICATE_NAME),
        NAMED(GDU_NV_ERR_INSUFFICIENT_RESOURCES),
        NAMED(GDU_NV_ERR_INSUFFICIENT_PERMISSIONS),
        NAMED(GDU_NV_ERR_INVALID_ADDRESS),
        NAMED(GDU_NV_ERR_INVALID_ARGUMENT),
        NAMED(GDU_NV_ERR_INVALID_CLASS),
        NAMED(GDU_NV_ERR_INVALID_CLIENT),
        NAMED(GDU_NV_ERR_INVALID_FLAGS),
        NAMED(GDU_NV_ERR_INVALID_OBJECT_PARENT),
        NAMED(GDU_NV_ERR_NOT_SUPPORTED),
        NAMED(GDU_NV_ERR_OBJECT_NOT_FOUND),
        NAMED(GDU_NV_ERR_OBJECT_TYPE_MISMATCH),
        NAMED(GDU_NV_ERR_STATE_IN_USE),
        NAMED(GDU_NV_ERR_GENERIC),
    };
#undef NAMED
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) {
        const char *symbol = gdu_nv_status_symbol(named[i].code);
        if (symbol == NULL || strcmp(symbol, named[i].name) != 0)
            fail_msg("0x%x is %s, not %s", named[i].code, symbol ? symbol : "unknown",
                     named[i].name);
    }
}

static void escape_requests(void **state)
{
    /* Values libcuda passes: _IOWR('F', nr, size). */
    assert_true(gdu_nv_ioctl_request(0x2B, sizeof(gdu_nvos64)) == 0xc030462bUL);
    assert_true(gdu_nv_ioctl_request(0x2A, sizeof(gdu_nvos54)) == 0xc020462aUL);
    assert_true(gdu_nv_ioctl_request(0x29, sizeof(gdu_nvos00)) == 0xc0104629UL);
    unsigned nr;
    size_t size;
    assert_true(gdu_nv_ioctl_decode(0xc020462bUL, &nr, &size));
    assert_int_equal(nr, 0x2B);
    assert_int_equal(size, 32);
    assert_false(gdu_nv_ioctl_decode(0x5401UL /* TCGETS */, &nr, &size));
    assert_false(gdu_nv_ioctl_decode(GDU_UVM_MAP_EXTERNAL_ALLOCATION, &nr, &size));
}

static void version_parse(void **state)
{
    unsigned v[3];
    assert_int_equal(gdu_nv_driver_version_parse("580.159.04\n", v), 0);
    assert_int_equal(v[0], 580);
    assert_int_equal(v[1], 159);
    assert_int_equal(v[2], 4);
    const char *proc =
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.40.07  Release Build  "
        "(dvs-builder@U16-I3-B03-4-3)  Fri Jan  5 13:29:59 UTC 2024\n"
        "GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n";
    assert_int_equal(gdu_nv_driver_version_parse(proc, v), 0);
    assert_int_equal(v[0], 550);
    assert_int_equal(v[2], 7);
    assert_int_equal(gdu_nv_driver_version_parse("570.86\n", v), 0);
    assert_int_equal(v[1], 86);
    assert_int_equal(gdu_nv_driver_version_parse("", v), -1);
    assert_int_equal(gdu_nv_driver_version_parse("no version here\n12.3.0\n", v), -1);
    assert_int_equal(gdu_nv_driver_version_parse("1.2.3.4", v), -1);
    assert_int_equal(gdu_nv_driver_version_parse(NULL, v), -1);
}

static void layouts(void **state)
{
    gdu_uvm_layout l;
    char why[160];
    assert_int_equal(gdu_uvm_layout_for_driver("580.159.04", &l, why, sizeof why), 0);
    assert_int_equal(l.max_gpus, 256);
    assert_int_equal(l.off_client, 9252);
    assert_int_equal(l.size, 9264);
    assert_int_equal(gdu_uvm_layout_for_driver("550.40.53", &l, why, sizeof why), 0);
    assert_int_equal(l.max_gpus, 256);
    assert_int_equal(gdu_uvm_layout_for_driver("550.40.07", &l, why, sizeof why), 0);
    assert_int_equal(l.max_gpus, 32);
    assert_int_equal(l.off_client, 1188);
    assert_int_equal(l.size, 1200);
    assert_int_equal(gdu_uvm_layout_for_driver("535.288.01", &l, why, sizeof why), 0);
    assert_int_equal(l.max_gpus, 32);
    assert_int_equal(gdu_uvm_layout_for_driver("595.45.04", &l, why, sizeof why), 0);
    assert_int_equal(l.max_gpus, 256);
    assert_int_equal(gdu_uvm_layout_for_driver("470.256.02", &l, why, sizeof why), -1);
    assert_non_null(strstr(why, "470.256.2"));
    assert_int_equal(gdu_uvm_layout_for_driver("600.10", &l, why, sizeof why), -1);
    assert_non_null(strstr(why, "not known"));
    assert_int_equal(gdu_uvm_layout_for_driver("garbage", &l, why, sizeof why), -1);
}

static void read_block(void **state)
{
    gdu_uvm_map_external_params_256 p;
    memset(&p, 0, sizeof p);
    p.base = 0x7f0000200000ULL;
    p.length = 2u << 20;
    p.offset = 0x10000;
    p.gpuAttributesCount = 1;
    p.rmCtrlFd = 7;
    p.hClient = 0xc1d00042;
    p.hMemory = 0x5c000123;
    p.rmStatus = 0;
    gdu_uvm_layout l;
    char why[160];
    assert_int_equal(gdu_uvm_layout_for_driver("580.159.04", &l, why, sizeof why), 0);
    gdu_uvm_map_external m;
    gdu_uvm_map_external_read(&l, &p, &m);
    assert_true(m.base == p.base && m.length == p.length && m.offset == p.offset);
    assert_int_equal(m.gpu_count, 1);
    assert_int_equal(m.rm_ctrl_fd, 7);
    assert_int_equal(m.h_client, 0xc1d00042);
    assert_int_equal(m.h_memory, 0x5c000123);

    gdu_uvm_map_external_params_32 q;
    memset(&q, 0, sizeof q);
    q.hClient = 0xc1d00001;
    q.hMemory = 0xbeef;
    q.rmCtrlFd = 3;
    assert_int_equal(gdu_uvm_layout_for_driver("535.1.1", &l, why, sizeof why), 0);
    gdu_uvm_map_external_read(&l, &q, &m);
    assert_int_equal(m.h_client, 0xc1d00001);
    assert_int_equal(m.h_memory, 0xbeef);
    assert_int_equal(m.rm_ctrl_fd, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(status_names),    cmocka_unit_test(status_constants_match_their_names),
        cmocka_unit_test(escape_requests), cmocka_unit_test(version_parse),
        cmocka_unit_test(layouts),         cmocka_unit_test(read_block),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
