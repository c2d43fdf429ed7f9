/* RM's BAR1 figures through our RM client (rm/rm_bar1_info.h) against an
 * in-process fake RM: the device and subdevice opened for the query and
 * freed after it, NV2080_CTRL_CMD_FB_GET_INFO_V2 asked on the subdevice for
 * BAR1_SIZE and BAR1_AVAIL_SIZE, KiB turned into bytes, the static BAR1's
 * mode, a refusal named by its status, an empty answer taken for no answer. */
#include "rm/rm_bar1_info.h"

#include "driverabi/ctrl0000_gpu_id.h"
#include "driverabi/ctrl2080_fb.h"
#include "driverabi/nv_classes.h"
#include "driverabi/nv_escape.h"
#include "driverabi/nvos.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <unistd.h>

enum { CLIENT = 0xc1d00042u, DEVICE = 0xcaf00001u, SUBDEVICE = 0xcaf00002u, GPU_ID = 0x1b00 };

static struct {
    uint32_t control_status; /* the FB control's answer */
    uint32_t static_status;  /* the static BAR1 control's answer */
    uint32_t size_kib, avail_kib;
    int device_allocs, device_frees;
} rm;

static int fake_ioctl(int fd, unsigned long request, void *arg)
{
    unsigned nr = 0;
    size_t size = 0;
    assert_true(gdu_nv_ioctl_decode(request, &nr, &size));
    if (nr == GDU_NV_ESC_RM_ALLOC) {
        gdu_nvos21 *p = arg;
        p->status = 0;
        if (p->hClass == GDU_NV01_ROOT_CLIENT)
            p->hObjectNew = CLIENT;
        else if (p->hClass == GDU_NV01_DEVICE_0) {
            rm.device_allocs++;
            p->hObjectNew = DEVICE;
        } else {
            assert_int_equal(p->hClass, GDU_NV20_SUBDEVICE_0);
            assert_int_equal(p->hObjectParent, DEVICE);
            p->hObjectNew = SUBDEVICE;
        }
        return 0;
    }
    if (nr == GDU_NV_ESC_RM_FREE) {
        gdu_nvos00 *p = arg;
        rm.device_frees += p->hObjectOld == DEVICE;
        p->status = 0;
        return 0;
    }
    assert_int_equal(nr, GDU_NV_ESC_RM_CONTROL);
    gdu_nvos54 *p = arg;
    void *params = (void *)(uintptr_t)p->params;
    p->status = 0;
    if (p->cmd == GDU_NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2) {
        gdu_nv0000_gpu_id_info_v2_params *q = params;
        assert_int_equal(q->gpuId, GPU_ID);
        q->deviceInstance = 0;
        return 0;
    }
    assert_int_equal(p->hObject, SUBDEVICE);
    if (p->cmd == GDU_NV2080_CTRL_CMD_FB_GET_STATIC_BAR1_INFO) {
        assert_int_equal(p->paramsSize, 24);
        gdu_nv2080_fb_static_bar1_info_params *q = params;
        q->bStaticBar1Enabled = 1;
        q->bStaticBar1WriteCombined = 1;
        q->staticBar1Size = (uint64_t)rm.size_kib << 10;
        p->status = rm.static_status;
        return 0;
    }
    assert_int_equal(p->cmd, GDU_NV2080_CTRL_CMD_FB_GET_INFO_V2);
    assert_int_equal(p->paramsSize, sizeof(gdu_nv2080_fb_get_info_v2_params));
    gdu_nv2080_fb_get_info_v2_params *q = params;
    assert_int_equal(q->fbInfoListSize, 2);
    for (uint32_t i = 0; i < q->fbInfoListSize; i++)
        q->fbInfoList[i].data =
            q->fbInfoList[i].index == GDU_NV2080_CTRL_FB_INFO_INDEX_BAR1_SIZE         ? rm.size_kib
            : q->fbInfoList[i].index == GDU_NV2080_CTRL_FB_INFO_INDEX_BAR1_AVAIL_SIZE ? rm.avail_kib
                                                                                      : 0xdead;
    p->status = rm.control_status;
    return 0;
}

static const gdu_rm_calls fake_calls = {fake_ioctl, close};

static void query(uint32_t status, int expect, gdu_rm_bar1 *out, uint32_t *got)
{
    gdu_rm_client c;
    char why[256] = "";
    rm.control_status = status;
    rm.device_allocs = rm.device_frees = 0;
    assert_int_equal(gdu_rm_client_open(&c, "/dev/null", &fake_calls, why, sizeof why), 0);
    assert_int_equal(gdu_rm_bar1_query(&c, GPU_ID, out, got, why, sizeof why), expect);
    gdu_rm_client_close(&c);
    /* The device opened for the query is freed after it, answered or not. */
    assert_int_equal(rm.device_allocs, 1);
    assert_int_equal(rm.device_frees, 1);
}

/* A GeForce without Resizable BAR: 256 MiB of BAR1, 200 MiB unused now. */
static void figures_in_bytes(void **state)
{
    gdu_rm_bar1 b;
    uint32_t status = 0;
    rm.size_kib = 256 << 10;
    rm.avail_kib = 200 << 10;
    query(0, 0, &b, &status);
    assert_int_equal(b.total, 256ull << 20);
    assert_int_equal(b.available, 200ull << 20);
    /* The static BAR1 on the same subdevice: all of it, write-combined. */
    assert_true(b.static_known && b.static_enabled && b.write_combined);
    assert_int_equal(b.static_size, 256ull << 20);
    /* A driver that does not answer it leaves it unknown, not an error. */
    rm.static_status = 0x56;
    query(0, 0, &b, &status);
    assert_false(b.static_known);
    assert_int_equal(b.total, 256ull << 20);
    rm.static_status = 0;
    /* The H200's 256 GiB do not fit 32 bits in bytes; in KiB they do. */
    rm.size_kib = 256u << 20;
    query(0, 0, &b, &status);
    assert_int_equal(b.total, 256ull << 30);
}

static void refusal_and_no_answer(void **state)
{
    gdu_rm_bar1 b;
    uint32_t status = 0;
    query(0x56 /* NV_ERR_NOT_SUPPORTED */, -EIO, &b, &status);
    assert_int_equal(status, 0x56);
    rm.size_kib = 0; /* RM could not count */
    query(0, -ENODATA, &b, &status);
    assert_int_equal(b.total, 0);
}

static void by_address(void **state)
{
    gdu_rm_bar1 b;
    char why[256] = "";
    assert_int_equal(gdu_rm_bar1_of("not an address", &gdu_rm_kernel_calls, &b, why, sizeof why),
                     -EINVAL);
    assert_non_null(strstr(why, "no PCI address"));
    /* No GPU is ever at ffff:ff:1f.7: an error with its reason, whatever
     * driver this machine has. */
    why[0] = '\0';
    assert_true(gdu_rm_bar1_of("ffff:ff:1f.7", &gdu_rm_kernel_calls, &b, why, sizeof why) < 0);
    assert_true(why[0] != '\0');
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(figures_in_bytes),
        cmocka_unit_test(refusal_and_no_answer),
        cmocka_unit_test(by_address),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
