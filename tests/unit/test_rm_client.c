/* The RM client against an in-process fake RM: request codes and block
 * sizes as the driver checks them, the generated client handle, statuses by
 * name, the attached-GPU walk and the caps copy-out. */
#include "rm/rm_p2p_caps.h"

#include "driverabi/ctrl0000_gpu.h"
#include "driverabi/nv_escape.h"
#include "driverabi/nvos.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>
#include <stdlib.h>
#include <unistd.h>

#define CLIENT 0xc1d00042u

/* What the fake RM does; tests set these. */
static struct {
    uint32_t alloc_status; /* RM_ALLOC result */
    uint32_t caps_status;  /* P2P caps control result */
    uint32_t free_status;  /* RM_FREE result */
    int ioctl_errno;       /* make every ioctl fail with this errno */
    int gpus;              /* attached GPUs: ids 0x100, 0x200, ... */
    int allocs, frees, controls;
    uint32_t last_pair[2], last_count;
} rm;

static int fake_ioctl(int fd, unsigned long request, void *arg)
{
    unsigned nr = 0;
    size_t size = 0;
    assert_true(gdu_nv_ioctl_decode(request, &nr, &size));
    if (rm.ioctl_errno) {
        errno = rm.ioctl_errno;
        return -1;
    }
    switch (nr) {
    case GDU_NV_ESC_RM_ALLOC: {
        assert_int_equal(size, sizeof(gdu_nvos21));
        gdu_nvos21 *p = arg;
        assert_int_equal(p->hClass, 0x41);
        assert_int_equal(p->hRoot, 0);
        assert_int_equal(p->hObjectNew, 0);
        rm.allocs++;
        p->status = rm.alloc_status;
        if (p->status == 0)
            p->hObjectNew = CLIENT;
        return 0;
    }
    case GDU_NV_ESC_RM_FREE: {
        assert_int_equal(size, sizeof(gdu_nvos00));
        gdu_nvos00 *p = arg;
        assert_int_equal(p->hRoot, CLIENT);
        assert_int_equal(p->hObjectOld, CLIENT);
        rm.frees++;
        p->status = rm.free_status;
        return 0;
    }
    case GDU_NV_ESC_RM_CONTROL: {
        assert_int_equal(size, sizeof(gdu_nvos54));
        gdu_nvos54 *p = arg;
        assert_int_equal(p->hClient, CLIENT);
        assert_int_equal(p->hObject, CLIENT);
        void *params = (void *)(uintptr_t)p->params;
        rm.controls++;
        p->status = 0;
        if (p->cmd == GDU_NV0000_CTRL_CMD_GPU_GET_ATTACHED_IDS) {
            assert_int_equal(p->paramsSize, 128);
            gdu_nv0000_attached_ids_params *a = params;
            for (int i = 0; i < 32; i++)
                a->gpuIds[i] = i < rm.gpus ? 0x100u * (unsigned)(i + 1) : 0xffffffffu;
        } else if (p->cmd == GDU_NV0000_CTRL_CMD_GPU_GET_PCI_INFO) {
            assert_int_equal(p->paramsSize, 12);
            gdu_nv0000_pci_info_params *q = params;
            q->domain = 0;
            q->bus = (uint16_t)(0x1b + (q->gpuId >> 8));
            q->slot = 0;
        } else if (p->cmd == GDU_NV0000_CTRL_CMD_SYSTEM_GET_P2P_CAPS_V2) {
            assert_int_equal(p->paramsSize, 8348);
            gdu_nv0000_p2p_caps_v2_params *c = params;
            rm.last_count = c->gpuCount;
            rm.last_pair[0] = c->gpuIds[0];
            rm.last_pair[1] = c->gpuIds[1];
            p->status = rm.caps_status;
            if (p->status == 0) {
                c->p2pCaps = 0x1b;
                c->p2pOptimalReadCEs = 0x30;
                c->p2pOptimalWriteCEs = 0xc0;
                memset(c->p2pCapsStatus, 5, sizeof c->p2pCapsStatus);
                c->p2pCapsStatus[0] = c->p2pCapsStatus[1] = c->p2pCapsStatus[2] = 0;
            }
        } else {
            p->status = 0x56;
        }
        return 0;
    }
    }
    fail_msg("unexpected escape 0x%x", nr);
    return -1;
}

static const gdu_rm_calls fake_calls = {fake_ioctl, close};

/* Replay of the answers the real RM gave PyTorch on two NVLink H200s
 * (580.159.04; tests/fixtures/p2p/rm-h200-x2.jsonl, cut from the recorded
 * trace tests/fixtures/rm-traces/torch.jsonl). */
static json_t *recorded;

static int hex_to_bytes(const char *hex, void *out, size_t len)
{
    if (hex == NULL || strlen(hex) != 2 * len)
        return -1;
    unsigned char *o = out;
    for (size_t i = 0; i < len; i++)
        if (sscanf(hex + 2 * i, "%2hhx", &o[i]) != 1)
            return -1;
    return 0;
}

/* The recorded answer to the same question: same command, and for the
 * per-GPU controls the same gpuId(s), in either order. */
static json_t *recorded_answer(uint32_t cmd, const unsigned char *params, uint32_t size)
{
    size_t i;
    json_t *r;
    json_array_foreach(recorded, i, r)
    {
        if (json_integer_value(json_object_get(r, "cmd")) != cmd)
            continue;
        unsigned char *in = malloc(size);
        assert_int_equal(hex_to_bytes(json_string_value(json_object_get(r, "params_in")), in, size),
                         0);
        int same = 1;
        if (cmd == GDU_NV0000_CTRL_CMD_GPU_GET_PCI_INFO)
            same = memcmp(in, params, 4) == 0;
        else if (cmd == GDU_NV0000_CTRL_CMD_SYSTEM_GET_P2P_CAPS_V2) {
            uint32_t a[2], b[2];
            memcpy(a, in, 8);
            memcpy(b, params, 8);
            same = (a[0] == b[0] && a[1] == b[1]) || (a[0] == b[1] && a[1] == b[0]);
        }
        free(in);
        if (same)
            return r;
    }
    return NULL;
}

static int replay_ioctl(int fd, unsigned long request, void *arg)
{
    unsigned nr = 0;
    size_t size = 0;
    assert_true(gdu_nv_ioctl_decode(request, &nr, &size));
    if (nr != GDU_NV_ESC_RM_CONTROL)
        return fake_ioctl(fd, request, arg);
    gdu_nvos54 *p = arg;
    json_t *r = recorded_answer(p->cmd, (void *)(uintptr_t)p->params, p->paramsSize);
    if (r == NULL) {
        p->status = 0x1f;
        return 0;
    }
    assert_int_equal(hex_to_bytes(json_string_value(json_object_get(r, "params_out")),
                                  (void *)(uintptr_t)p->params, p->paramsSize),
                     0);
    p->status = (uint32_t)json_integer_value(json_object_get(r, "status"));
    return 0;
}

static const gdu_rm_calls replay_calls = {replay_ioctl, close};

static void test_replay_h200_pair(void **state)
{
    json_error_t err;
    FILE *f = fopen(GDUNLOCK_FIXTURES "/p2p/rm-h200-x2.jsonl", "r");
    assert_non_null(f);
    recorded = json_array();
    json_t *line;
    while ((line = json_loadf(f, JSON_DISABLE_EOF_CHECK, &err)) != NULL)
        json_array_append_new(recorded, line);
    fclose(f);
    assert_int_equal(json_array_size(recorded), 4);

    gdu_rm_client c;
    char why[256] = "";
    assert_int_equal(gdu_rm_client_open(&c, "/dev/null", &replay_calls, why, sizeof why), 0);
    gdu_rm_gpu gpus[GDU_RM_MAX_GPUS];
    size_t n = 0;
    assert_int_equal(gdu_rm_attached_gpus(&c, gpus, GDU_RM_MAX_GPUS, &n, why, sizeof why), 0);
    assert_int_equal(n, 2);
    /* nvidia-smi: GPUs at 0000:00:06.0 and 0000:00:07.0; the RM lists gpuId 7 first. */
    assert_int_equal(gpus[0].gpu_id, 7);
    assert_int_equal(gpus[0].device, 7);
    assert_int_equal(gpus[1].gpu_id, 6);
    assert_int_equal(gpus[1].device, 6);
    assert_int_equal(gpus[1].bus, 0);
    assert_int_equal(gpus[1].domain, 0);

    gdu_p2p_rm_caps caps;
    assert_int_equal(gdu_rm_p2p_caps(&c, 6, 7, &caps, why, sizeof why), 0);
    assert_int_equal(caps.caps, GDU_P2P_CAPS_WRITES | GDU_P2P_CAPS_READS | GDU_P2P_CAPS_NVLINK |
                                    GDU_P2P_CAPS_ATOMICS);
    assert_int_equal(gdu_p2p_caps_link(caps.caps), GDU_P2P_LINK_NVLINK);
    assert_int_equal(caps.status[GDU_P2P_CAPS_INDEX_READ], GDU_P2P_CAPS_STATUS_OK);
    assert_int_equal(caps.status[GDU_P2P_CAPS_INDEX_WRITE], GDU_P2P_CAPS_STATUS_OK);
    assert_int_equal(caps.status[GDU_P2P_CAPS_INDEX_NVLINK], GDU_P2P_CAPS_STATUS_OK);
    assert_int_equal(caps.status[GDU_P2P_CAPS_INDEX_ATOMICS], GDU_P2P_CAPS_STATUS_OK);
    assert_int_equal(caps.status[GDU_P2P_CAPS_INDEX_PCI], GDU_P2P_CAPS_STATUS_NOT_SUPPORTED);
    assert_int_equal(caps.status[GDU_P2P_CAPS_INDEX_PCI_BAR1], GDU_P2P_CAPS_STATUS_NOT_SUPPORTED);
    assert_int_equal(caps.optimal_read_ces, 0x10);
    assert_int_equal(caps.optimal_write_ces, 0x10);
    /* A GPU the RM does not know: its status comes back by name. */
    assert_int_equal(gdu_rm_p2p_caps(&c, 6, 9, &caps, why, sizeof why), -EIO);
    assert_non_null(strstr(why, "NV_ERR_INVALID_ARGUMENT"));
    gdu_rm_client_close(&c);
    json_decref(recorded);
}

static int reset(void **state)
{
    memset(&rm, 0, sizeof rm);
    rm.gpus = 2;
    return 0;
}

static void test_open_query_close(void **state)
{
    gdu_rm_client c;
    char why[256] = "";
    assert_int_equal(gdu_rm_client_open(&c, "/dev/null", &fake_calls, why, sizeof why), 0);
    assert_int_equal(c.hclient, CLIENT);

    gdu_rm_gpu gpus[GDU_RM_MAX_GPUS];
    size_t n = 0;
    assert_int_equal(gdu_rm_attached_gpus(&c, gpus, GDU_RM_MAX_GPUS, &n, why, sizeof why), 0);
    assert_int_equal(n, 2);
    assert_int_equal(gpus[0].gpu_id, 0x100);
    assert_int_equal(gpus[1].bus, 0x1b + 2);

    gdu_p2p_rm_caps caps;
    assert_int_equal(gdu_rm_p2p_caps(&c, 0x200, 0x100, &caps, why, sizeof why), 0);
    assert_int_equal(rm.last_count, 2);
    assert_int_equal(rm.last_pair[0], 0x200);
    assert_int_equal(rm.last_pair[1], 0x100);
    assert_int_equal(caps.caps, 0x1b);
    assert_int_equal(caps.optimal_read_ces, 0x30);
    assert_int_equal(caps.optimal_write_ces, 0xc0);
    assert_int_equal(caps.status[GDU_P2P_CAPS_INDEX_NVLINK], 0);
    assert_int_equal(caps.status[GDU_P2P_CAPS_INDEX_PCI_BAR1], 5);
    assert_int_equal(gdu_p2p_caps_link(caps.caps), GDU_P2P_LINK_NVLINK);

    gdu_rm_client_close(&c);
    assert_int_equal(rm.frees, 1);
    assert_int_equal(c.fd, -1);
    gdu_rm_client_close(&c); /* twice is harmless */
    assert_int_equal(rm.frees, 1);
}

static void test_cap_on_gpu_list(void **state)
{
    gdu_rm_client c;
    char why[256];
    rm.gpus = 5;
    assert_int_equal(gdu_rm_client_open(&c, "/dev/null", &fake_calls, why, sizeof why), 0);
    gdu_rm_gpu gpus[3];
    size_t n = 0;
    assert_int_equal(gdu_rm_attached_gpus(&c, gpus, 3, &n, why, sizeof why), 0);
    assert_int_equal(n, 3);
    gdu_rm_client_close(&c);
}

static void test_rm_status_named(void **state)
{
    gdu_rm_client c;
    char why[256];
    rm.caps_status = 0x1f;
    assert_int_equal(gdu_rm_client_open(&c, "/dev/null", &fake_calls, why, sizeof why), 0);
    gdu_p2p_rm_caps caps = {.caps = 0x77};
    assert_int_equal(gdu_rm_p2p_caps(&c, 1, 2, &caps, why, sizeof why), -EIO);
    assert_non_null(strstr(why, "NV_ERR_INVALID_ARGUMENT"));
    assert_non_null(strstr(why, "P2P caps"));
    assert_int_equal(caps.caps, 0x77); /* untouched on failure */
    gdu_rm_client_close(&c);
}

static void test_alloc_refused(void **state)
{
    gdu_rm_client c;
    char why[256];
    rm.alloc_status = 0x22;
    assert_int_equal(gdu_rm_client_open(&c, "/dev/null", &fake_calls, why, sizeof why), -EIO);
    assert_non_null(strstr(why, "NV_ERR_INVALID_CLASS"));
    assert_int_equal(c.fd, -1);
    gdu_rm_client_close(&c);
    assert_int_equal(rm.frees, 0);
}

/* A free's status comes back to the caller that asks for it, by name when
 * RM refused; the best-effort free says nothing. */
static void test_free_status(void **state)
{
    gdu_rm_client c;
    char why[256] = "";
    uint32_t st = 0xdead;
    assert_int_equal(gdu_rm_client_open(&c, "/dev/null", &fake_calls, why, sizeof why), 0);
    assert_int_equal(gdu_rm_free_checked(&c, 0, CLIENT, &st, "freeing", why, sizeof why), 0);
    assert_int_equal(st, 0);
    rm.free_status = 0x6e;
    assert_int_equal(gdu_rm_free_checked(&c, 0, CLIENT, &st, "freeing", why, sizeof why), -EIO);
    assert_int_equal(st, 0x6e);
    assert_string_equal(why, "freeing: RM returned NV_ERR_RESOURCE_LOST (0x6e)");
    gdu_rm_free(&c, 0, CLIENT);
    assert_int_equal(rm.frees, 3);
    rm.ioctl_errno = ENOTTY;
    st = 0xdead;
    assert_int_equal(gdu_rm_free_checked(&c, 0, CLIENT, &st, "freeing", why, sizeof why), -ENOTTY);
    assert_int_equal(st, 0xdead); /* no call reached RM */
    assert_non_null(strstr(why, "ioctl failed"));
    rm.ioctl_errno = 0;
    rm.free_status = 0;
    gdu_rm_client_close(&c);
}

static void test_ioctl_fails(void **state)
{
    gdu_rm_client c;
    char why[256];
    rm.ioctl_errno = ENOTTY;
    assert_int_equal(gdu_rm_client_open(&c, "/dev/null", &fake_calls, why, sizeof why), -ENOTTY);
    assert_non_null(strstr(why, "ioctl failed"));
}

static void test_no_device(void **state)
{
    gdu_rm_client c;
    char why[256];
    assert_int_equal(gdu_rm_client_open(&c, "/nonexistent/nvidiactl", &fake_calls, why, sizeof why),
                     -ENOENT);
    assert_non_null(strstr(why, "no NVIDIA kernel driver"));
    gdu_rm_client_close(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_open_query_close, reset),
        cmocka_unit_test_setup(test_cap_on_gpu_list, reset),
        cmocka_unit_test_setup(test_rm_status_named, reset),
        cmocka_unit_test_setup(test_alloc_refused, reset),
        cmocka_unit_test_setup(test_free_status, reset),
        cmocka_unit_test_setup(test_ioctl_fails, reset),
        cmocka_unit_test_setup(test_no_device, reset),
        cmocka_unit_test_setup(test_replay_h200_pair, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
