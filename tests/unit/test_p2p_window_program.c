/* The BAR1 window feasibility program (tests/gpu/p2p_window.c, compiled in)
 * end to end on the CPU: the fake multi-GPU libcuda (LD_LIBRARY_PATH) and a
 * fake RM whose device files are regular files, so every mapping is real
 * memory. Checks the PASS/FAIL/SKIP lines of each step and that the study
 * stops at the first refusal: refused by RM (one GPU), accepted by RM and
 * CUDA (two GPUs: steps 2 and 3 with copies, SM loads, stores and a chase
 * through the window), and RM accepting where CUDA refuses. */
#define main p2p_window_main
#include "../gpu/p2p_window.c"
#undef main

#include "driverabi/ctrl0000_gpu.h"
#include "driverabi/ctrl0000_gpu_id.h"
#include "driverabi/nv_classes.h"
#include "driverabi/nv_escape.h"
#include "driverabi/nvos.h"
#include "driverabi/rm_memory.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#define BAR1_BASE 0x38000000000ull
#define WINDOW (128u << 10)

static struct {
    uint32_t next_handle, io_status;
    uint32_t devices[2]; /* device handles by GPU */
    int io_probes, maps, unmaps;
} rm;

static char dir[64], ctl[96];

static int fake_rm(int fd, unsigned long request, void *arg)
{
    unsigned nr = 0;
    size_t size = 0;
    assert_true(gdu_nv_ioctl_decode(request, &nr, &size));
    switch (nr) {
    case GDU_NV_ESC_RM_ALLOC: {
        gdu_nvos21 *p = arg;
        p->hObjectNew = ++rm.next_handle;
        p->status = 0;
        if (p->hClass == GDU_NV01_DEVICE_0) {
            const gdu_nv0080_alloc_params *d = (const void *)(uintptr_t)p->pAllocParms;
            assert_true(d->deviceId < 2);
            rm.devices[d->deviceId] = p->hObjectNew;
        }
        if (p->hClass == GDU_NV01_MEMORY_LOCAL_USER)
            ((gdu_nv_memory_alloc_params *)(uintptr_t)p->pAllocParms)->offset = 0x200000;
        return 0;
    }
    case GDU_NV_ESC_RM_CONTROL: {
        gdu_nvos54 *p = arg;
        void *q = (void *)(uintptr_t)p->params;
        p->status = 0;
        if (p->cmd == GDU_NV0000_CTRL_CMD_GPU_GET_ATTACHED_IDS) {
            gdu_nv0000_attached_ids_params *a = q;
            memset(a, 0xff, sizeof *a);
            a->gpuIds[0] = 0x700;
            a->gpuIds[1] = 0x701;
        } else if (p->cmd == GDU_NV0000_CTRL_CMD_GPU_GET_PCI_INFO) {
            gdu_nv0000_pci_info_params *i = q;
            i->domain = 0;
            i->bus = (uint16_t)(0x10 + (i->gpuId - 0x700)); /* the fake libcuda's buses */
            i->slot = 0;
        } else if (p->cmd == GDU_NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2) {
            gdu_nv0000_gpu_id_info_v2_params *i = q;
            i->deviceInstance = i->gpuId - 0x700;
        } else {
            p->status = GDU_NV_ERR_NOT_SUPPORTED;
        }
        return 0;
    }
    case GDU_NV_ESC_CARD_INFO: {
        gdu_nv_card_info *ci = arg;
        memset(ci, 0, size);
        for (uint32_t i = 0; i < 2; i++)
            ci[i] = (gdu_nv_card_info){.valid = 1,
                                       .pci_info = {.bus = (uint8_t)(0x10 + i)},
                                       .gpu_id = 0x700 + i,
                                       .minor_number = i,
                                       .reg_address = 0xf0000000ull + ((uint64_t)i << 24),
                                       .reg_size = 16u << 20,
                                       .fb_address = BAR1_BASE + ((uint64_t)i << 38),
                                       .fb_size = 256ull << 30};
        return 0;
    }
    case GDU_NV_ESC_RM_MAP_MEMORY: {
        gdu_nvos33_with_fd *p = arg;
        rm.maps++;
        p->params.status = 0;
        p->params.pLinearAddress = BAR1_BASE + 0x200000; /* GPU 0's memory */
        return 0;
    }
    case GDU_NV_ESC_RM_UNMAP_MEMORY:
        rm.unmaps++;
        ((gdu_nvos34 *)arg)->status = 0;
        return 0;
    case GDU_NV_ESC_REGISTER_FD:
        return 0;
    case GDU_NV_ESC_RM_ALLOC_MEMORY: {
        gdu_nvos02_with_fd *p = arg;
        rm.io_probes++;
        p->params.status = rm.io_status;
        return 0;
    }
    case GDU_NV_ESC_RM_FREE:
        ((gdu_nvos00 *)arg)->status = 0;
        return 0;
    }
    fail_msg("unexpected escape 0x%x", nr);
    return -1;
}

static int fake_setup(void **state)
{
    snprintf(dir, sizeof dir, "/tmp/gdu-window-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return -1;
    for (int i = 0; i < 2; i++) {
        char path[128];
        snprintf(path, sizeof path, "%s/nvidia%d", dir, i);
        FILE *f = fopen(path, "w");
        if (f == NULL || ftruncate(fileno(f), WINDOW) != 0)
            return -1;
        fclose(f);
    }
    snprintf(ctl, sizeof ctl, "%s/nvidiactl", dir);
    FILE *f = fopen(ctl, "w");
    if (f == NULL)
        return -1;
    fclose(f);
    window_ioctl = fake_rm;
    window_ctl = ctl;
    window_dev_dir = dir;
    return 0;
}

static int fake_teardown(void **state)
{
    char path[128];
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/nvidia%d", dir, i);
        unlink(path);
    }
    unlink(ctl);
    snprintf(path, sizeof path, "%s/window.json", dir);
    unlink(path);
    rmdir(dir);
    return 0;
}

/* Runs the program with GPUs fake GPUs; returns its stdout (caller frees). */
static char *run_program(int gpus, uint32_t io_status, int cuda_accepts)
{
    memset(&rm, 0, sizeof rm);
    rm.io_status = io_status;
    char n[8];
    snprintf(n, sizeof n, "%d", gpus);
    setenv("GDU_FAKE_P2P_GPUS", n, 1);
    if (cuda_accepts)
        setenv("GDU_FAKE_P2P_IOMEM_OK", "1", 1);
    else
        unsetenv("GDU_FAKE_P2P_IOMEM_OK");
    char out[128], json[128], size[16];
    snprintf(out, sizeof out, "%s/stdout", dir);
    snprintf(json, sizeof json, "%s/window.json", dir);
    snprintf(size, sizeof size, "%u", WINDOW);
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    FILE *f = freopen(out, "w", stdout);
    assert_non_null(f);
    char *argv[] = {"p2p_window", "--size", size, "--out", json, NULL};
    int rc = p2p_window_main(5, argv);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    assert_int_equal(rc, 0);
    char *text = read_proc(out);
    unlink(out);
    assert_non_null(text);
    return text;
}

static void expect(const char *text, const char *want)
{
    if (strstr(text, want) == NULL)
        fail_msg("output lacks '%s':\n%s", want, text);
}

static void refused_by_rm(void **state)
{
    char *t = run_program(1, GDU_NV_ERR_INVALID_ADDRESS, 0);
    expect(t, "PASS p2p-window-1-map: 128 KiB of GPU 0's video memory (offset 0x200000) mapped "
              "for the CPU at bus address 0x38000200000 (inside its BAR1; BAR1 0x38000000000 + "
              "0x200000), VmFlags: rd wr sh");
    expect(t, "PASS p2p-window-1-cpu: CPU wrote and read back 4 KiB, then 128 KiB through BAR1, "
              "a fresh mapping read the same bytes");
    /* A regular file's mapping is not VM_IO|VM_PFNMAP: the lookup's own check. */
    expect(t, "PASS p2p-window-2-rm: RM refuses GPU 0's BAR1 mapping as I/O memory of GPU 0: "
              "NV_ERR_INVALID_ADDRESS (0x1e), os_lookup_user_io_memory at "
              "kernel-open/nvidia/os-mlock.c:184-192");
    expect(t, "PASS p2p-window-2-cuda: cuMemHostRegister(IOMEMORY) on GPU 0 refuses too: ");
    expect(t, "SKIP p2p-window-2-copy: step 2 refused");
    expect(t, "SKIP p2p-window-3: step 2 refused");
    assert_null(strstr(t, "FAIL"));
    assert_int_equal(rm.io_probes, 1);
    assert_int_equal(rm.maps, rm.unmaps); /* every mapping undone */
    free(t);
    /* The record names the status and the source line. */
    char json[128];
    snprintf(json, sizeof json, "%s/window.json", dir);
    json_error_t err;
    json_t *doc = json_load_file(json, 0, &err);
    assert_non_null(doc);
    json_t *facts = json_object_get(doc, "facts");
    json_t *s2 = json_object_get(facts, "step2_rm");
    assert_string_equal(json_string_value(json_object_get(s2, "status")),
                        "NV_ERR_INVALID_ADDRESS (0x1e)");
    assert_string_equal(json_string_value(json_object_get(s2, "source")),
                        "kernel-open/nvidia/os-mlock.c:184-192");
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(facts, "mapping"), "bus_address")),
        BAR1_BASE + 0x200000);
    assert_int_equal(json_array_size(json_object_get(doc, "lines")), 6);
    json_decref(doc);
}

static void accepted_two_gpus(void **state)
{
    char *t = run_program(2, GDU_NV_OK, 1);
    expect(t, "PASS p2p-window-2-rm: RM accepts GPU 0's BAR1 mapping as I/O memory of GPU 0");
    expect(t, "PASS p2p-window-2-cuda: cuMemHostRegister(IOMEMORY) on GPU 0 accepts the window");
    expect(t, "PASS p2p-window-2-copy: GPU 0's copy engine read 4 KiB, 64 KiB, 128 KiB through the "
              "window");
    expect(t, "wrote 128 KiB that the CPU read back exact");
    expect(t, "PASS p2p-window-3-rm: RM accepts GPU 0's BAR1 mapping as I/O memory of GPU 1");
    expect(t, "PASS p2p-window-3-cuda: cuMemHostRegister(IOMEMORY) on GPU 1 accepts the window");
    expect(t, "PASS p2p-window-3-copy: GPU 1's copy engine read");
    expect(t,
           "PASS p2p-window-3-sm: GPU 1's SM loads from GPU 0's memory through the window: exact");
    expect(t, "SM stores: exact");
    expect(t, "pointer chase ended on the right node");
    assert_null(strstr(t, "FAIL"));
    assert_null(strstr(t, "SKIP"));
    free(t);
}

static void accepted_one_gpu(void **state)
{
    char *t = run_program(1, GDU_NV_OK, 1);
    expect(t, "PASS p2p-window-2-copy:");
    expect(t, "SKIP p2p-window-3: one GPU");
    free(t);
}

static void rm_accepts_cuda_refuses(void **state)
{
    char *t = run_program(2, GDU_NV_OK, 0);
    expect(t, "FAIL p2p-window-2-cuda: cuMemHostRegister(IOMEMORY) on GPU 0 refuses although RM "
              "accepted");
    expect(t, "SKIP p2p-window-3: step 2 refused");
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(refused_by_rm),
        cmocka_unit_test(accepted_two_gpus),
        cmocka_unit_test(accepted_one_gpu),
        cmocka_unit_test(rm_accepts_cuda_refuses),
    };
    return cmocka_run_group_tests(tests, fake_setup, fake_teardown);
}
