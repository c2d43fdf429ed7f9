/* The RM lifetime program (tests/gpu/shim_rm_lifetime.c, compiled in) on the
 * fake RM (fake_rm.c), with a regular file the fake takes for the GPU's
 * device file: as on the driver, RM gives a device only to a process that
 * holds that file open (device.c:140-147, 580.142). A differential test: on
 * the fake the program must print, step by step, what it printed on the H200
 * (tests/fixtures/rm-lifetime-h200-2026-12-02.txt: an NV503C invalidated by
 * a VA space once registered with it, not by one it never had); where it
 * opens another file it must say that RM refused the device, and why. */
#define main rm_lifetime_main
#include "../gpu/shim_rm_lifetime.c"
#undef main

#include "fake_rm.h"

#include "driverabi/ctrl0000_gpu.h"
#include "driverabi/ctrl0000_gpu_id.h"
#include "driverabi/nv_escape.h"
#include "driverabi/nvos.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cmocka.h>
#include <unistd.h>

/* The one GPU the driver lists: its PCI address, RM gpuId and minor. */
#define GPU_BUS 0x1b
#define GPU_ID 0x1b00
#define GPU_MINOR 0

static fake_rm *rm;
static char dir[64], ctl[96], gpu[96], other_dir[96];

/* The driver's GPU list (card info, RM's attached GPUs) answered here; every
 * other escape goes to the fake RM. */
static int driver(int fd, unsigned long request, void *arg)
{
    unsigned nr = 0;
    size_t size = 0;
    assert_true(gdu_nv_ioctl_decode(request, &nr, &size));
    if (nr == GDU_NV_ESC_CARD_INFO) {
        gdu_nv_card_info *ci = arg;
        memset(ci, 0, size);
        ci[0] = (gdu_nv_card_info){
            .valid = 1, .pci_info = {.bus = GPU_BUS}, .gpu_id = GPU_ID, .minor_number = GPU_MINOR};
        return 0;
    }
    if (nr == GDU_NV_ESC_RM_CONTROL) {
        gdu_nvos54 *p = arg;
        void *q = (void *)(uintptr_t)p->params;
        if (p->cmd == GDU_NV0000_CTRL_CMD_GPU_GET_ATTACHED_IDS) {
            gdu_nv0000_attached_ids_params *a = q;
            memset(a, 0xff, sizeof *a);
            a->gpuIds[0] = GPU_ID;
            p->status = GDU_NV_OK;
            return 0;
        }
        if (p->cmd == GDU_NV0000_CTRL_CMD_GPU_GET_PCI_INFO) {
            gdu_nv0000_pci_info_params *i = q;
            i->domain = 0;
            i->bus = GPU_BUS;
            i->slot = 0;
            p->status = GDU_NV_OK;
            return 0;
        }
        if (p->cmd == GDU_NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2) {
            ((gdu_nv0000_gpu_id_info_v2_params *)q)->deviceInstance = 0;
            p->status = GDU_NV_OK;
            return 0;
        }
    }
    fake_rm_set_fd(rm, fd, GDU_FD_RM);
    return fake_rm_ioctl(rm, fd, request, arg);
}

static const gdu_rm_calls driver_calls = {driver, close};

static void touch(const char *path)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
}

static int setup(void **state)
{
    snprintf(dir, sizeof dir, "/tmp/gdu-lifetime-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return -1;
    snprintf(ctl, sizeof ctl, "%s/nvidiactl", dir);
    snprintf(gpu, sizeof gpu, "%s/nvidia%d", dir, GPU_MINOR);
    snprintf(other_dir, sizeof other_dir, "%s/other", dir);
    touch(ctl);
    touch(gpu);
    mkdir(other_dir, 0700);
    char other[128];
    snprintf(other, sizeof other, "%s/nvidia%d", other_dir, GPU_MINOR);
    touch(other);
    rm = fake_rm_new();
    fake_rm_set_gpu_file(rm, gpu);
    lifetime_ioctl = driver;
    lifetime_ctl = ctl;
    return 0;
}

static int teardown(void **state)
{
    char other[128];
    snprintf(other, sizeof other, "%s/nvidia%d", other_dir, GPU_MINOR);
    unlink(other);
    rmdir(other_dir);
    unlink(gpu);
    unlink(ctl);
    rmdir(dir);
    fake_rm_free(rm);
    return 0;
}

/* Runs the program with its GPU files in dev_dir; returns its stdout (the
 * caller frees) and its exit status in *rc. */
static char *run_program(const char *dev_dir, int *rc)
{
    lifetime_dev_dir = dev_dir;
    char out[128];
    snprintf(out, sizeof out, "%s/stdout", dir);
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    assert_non_null(freopen(out, "w", stdout));
    *rc = rm_lifetime_main();
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    FILE *f = fopen(out, "r");
    assert_non_null(f);
    char *text = calloc(1, 8192);
    size_t n = fread(text, 1, 8191, f);
    text[n] = '\0';
    fclose(f);
    unlink(out);
    return text;
}

/* What the program printed on the H200 (open kernel module 580.159.04,
 * 2026-12-02, tree eea25c4): every STATUS line and the RESULT. */
#define H200_RUN GDUNLOCK_FIXTURES "/rm-lifetime-h200-2026-12-02.txt"

static char *h200_expected(void)
{
    FILE *f = fopen(H200_RUN, "r");
    if (f == NULL)
        fail_msg("cannot open %s", H200_RUN);
    char *want = calloc(1, 8192);
    size_t n = fread(want, 1, 8191, f);
    fclose(f);
    want[n] = '\0';
    assert_non_null(strstr(want, "STATUS case1-free-T1 NV_OK (0x0)\n"));
    assert_non_null(strstr(want, "RESULT case1=invalidated case2=alive\n"));
    return want;
}

static void expect(const char *text, const char *want)
{
    if (strstr(text, want) == NULL)
        fail_msg("output lacks '%s':\n%s", want, text);
}

/* The GPU's file held, libcuda's order: line for line what the H200 printed
 * (case 1 invalidated, case 2 alive), and every object the program made is
 * freed with its client. */
static void finds_the_lifetime_rule(void **state)
{
    int rc = -1;
    char *t = run_program(dir, &rc);
    assert_int_equal(rc, 0);
    char *want = h200_expected();
    const char *got = t, *w = want;
    for (unsigned line = 1; *w != '\0' || *got != '\0'; line++) {
        size_t gl = strcspn(got, "\n"), wl = strcspn(w, "\n");
        if (gl != wl || memcmp(got, w, wl) != 0)
            fail_msg("line %u: the H200 printed '%.*s', the fake RM '%.*s'; the whole output:\n%s",
                     line, (int)wl, w, (int)gl, got, t);
        got += gl + (got[gl] == '\n');
        w += wl + (w[wl] == '\n');
    }
    assert_int_equal(fake_rm_count_class(rm, GDU_NV50_THIRD_PARTY_P2P), 0);
    assert_int_equal(fake_rm_count_class(rm, GDU_NV01_DEVICE_0), 0);
    free(want);
    free(t);
}

/* Another file than the GPU's held (the GPU run of 6f90e50 held none): RM
 * refuses the device and the program says so, naming the step. */
static void says_when_rm_refuses_the_device(void **state)
{
    int rc = -1;
    char *t = run_program(other_dir, &rc);
    assert_int_equal(rc, 1);
    expect(t, "STATUS device-and-subdevice NV_ERR_INSUFFICIENT_PERMISSIONS (0x1b)\n");
    expect(t, "SETUP failed: allocating the device (NV01_DEVICE_0): RM returned "
              "NV_ERR_INSUFFICIENT_PERMISSIONS (0x1b)");
    free(t);
}

/* The fake's rule itself: NV01_DEVICE_0 only while the GPU's file is open. */
static void device_needs_the_gpu_file(void **state)
{
    gdu_rm_client cl;
    char w[256];
    assert_int_equal(gdu_rm_client_open(&cl, ctl, &driver_calls, w, sizeof w), 0);
    gdu_nv0080_alloc_params dp = {.deviceId = 0, .hClientShare = cl.hclient};
    uint32_t h = 0, st = 0;
    assert_int_not_equal(gdu_rm_alloc(&cl, cl.hclient, GDU_NV01_DEVICE_0, &dp, sizeof dp, &h, &st,
                                      "device", w, sizeof w),
                         0);
    assert_int_equal(st, GDU_NV_ERR_INSUFFICIENT_PERMISSIONS);
    int fd = open(gpu, O_RDWR | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(gdu_rm_alloc(&cl, cl.hclient, GDU_NV01_DEVICE_0, &dp, sizeof dp, &h, &st,
                                  "device", w, sizeof w),
                     0);
    close(fd);
    gdu_rm_client_close(&cl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(finds_the_lifetime_rule, setup, teardown),
        cmocka_unit_test_setup_teardown(says_when_rm_refuses_the_device, setup, teardown),
        cmocka_unit_test_setup_teardown(device_needs_the_gpu_file, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
