/* The BAR1 window study's library code against an in-process fake RM:
 * card info, device and subdevice of the right instance, contiguous video
 * memory, RM_MAP_MEMORY armed on a fresh device file that is then mmap()ed
 * at offset 0 (a regular file stands in for /dev/nvidiaN, so the mapping is
 * real memory), unmap with the address RM gave, the I/O-memory probe on a
 * registered device file; the smaps and CapEff parsers; and which source
 * line a refusal is attributed to. */
#include "p2p_window_study.h"
#include "rm_bar1.h"

#include "driverabi/ctrl0000_gpu_id.h"
#include "driverabi/nv_card_info.h"
#include "driverabi/nv_classes.h"
#include "driverabi/nv_escape.h"
#include "driverabi/nv_status.h"
#include "driverabi/nvos.h"
#include "driverabi/rm_memory.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#define CLIENT 0xc1d00042u
#define DEVICE 0xcaf00001u
#define SUBDEVICE 0xcaf00002u
#define MEMORY 0xcaf00003u
#define GPU_ID 0x700u
#define BAR1 0x38000000000ull
#define FB_OFFSET 0x1230000ull
#define SIZE (2u << 20)

static struct {
    int ctl_fd, registered_fd;
    uint32_t map_status, io_status;
    int maps, unmaps, frees, io_probes;
    uint64_t unmapped_at;
    uint32_t freed[8];
} rm;

static char dev_path[64];

static int fake_ioctl(int fd, unsigned long request, void *arg)
{
    unsigned nr = 0;
    size_t size = 0;
    assert_true(gdu_nv_ioctl_decode(request, &nr, &size));
    switch (nr) {
    case GDU_NV_ESC_RM_ALLOC: {
        assert_int_equal(size, sizeof(gdu_nvos21));
        gdu_nvos21 *p = arg;
        assert_int_equal(p->hObjectNew, 0);
        p->status = 0;
        if (p->hClass == GDU_NV01_ROOT_CLIENT) {
            rm.ctl_fd = fd;
            p->hObjectNew = CLIENT;
        } else if (p->hClass == GDU_NV01_DEVICE_0) {
            const gdu_nv0080_alloc_params *d = (const void *)(uintptr_t)p->pAllocParms;
            assert_int_equal(p->hObjectParent, CLIENT);
            assert_int_equal(p->paramsSize, sizeof *d);
            assert_int_equal(d->deviceId, 3); /* GET_ID_INFO_V2's answer */
            p->hObjectNew = DEVICE;
        } else if (p->hClass == GDU_NV20_SUBDEVICE_0) {
            assert_int_equal(p->hObjectParent, DEVICE);
            p->hObjectNew = SUBDEVICE;
        } else if (p->hClass == GDU_NV01_MEMORY_LOCAL_USER) {
            gdu_nv_memory_alloc_params *m = (void *)(uintptr_t)p->pAllocParms;
            assert_int_equal(p->hObjectParent, DEVICE);
            assert_int_equal(p->paramsSize, 128);
            assert_int_equal((m->attr >> 25) & 3, 0); /* video memory */
            assert_int_equal((m->attr >> 27) & 3, 2); /* physically contiguous */
            assert_int_equal(m->size, SIZE);
            m->offset = FB_OFFSET;
            p->hObjectNew = MEMORY;
        } else {
            fail_msg("unexpected class 0x%x", p->hClass);
        }
        return 0;
    }
    case GDU_NV_ESC_RM_CONTROL: {
        gdu_nvos54 *p = arg;
        assert_int_equal(p->cmd, GDU_NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2);
        assert_int_equal(p->hObject, CLIENT);
        assert_int_equal(p->paramsSize, 32);
        gdu_nv0000_gpu_id_info_v2_params *q = (void *)(uintptr_t)p->params;
        assert_int_equal(q->gpuId, GPU_ID);
        q->deviceInstance = 3;
        p->status = 0;
        return 0;
    }
    case GDU_NV_ESC_CARD_INFO: {
        assert_int_equal(fd, rm.ctl_fd);
        assert_int_equal(size, GDU_NV_MAX_DEVICES * sizeof(gdu_nv_card_info));
        gdu_nv_card_info *ci = arg;
        memset(ci, 0, size);
        for (int i = 0; i < 2; i++)
            ci[i] = (gdu_nv_card_info){.valid = 1,
                                       .pci_info = {.bus = (uint8_t)(6 + i)},
                                       .gpu_id = GPU_ID + (uint32_t)i,
                                       .minor_number = (uint32_t)i,
                                       .reg_address = 0xf0000000ull + ((uint64_t)i << 24),
                                       .reg_size = 16u << 20,
                                       .fb_address = BAR1 + ((uint64_t)i << 38),
                                       .fb_size = 256ull << 30};
        return 0;
    }
    case GDU_NV_ESC_RM_MAP_MEMORY: {
        assert_int_equal(size, sizeof(gdu_nvos33_with_fd));
        gdu_nvos33_with_fd *p = arg;
        struct stat st;
        assert_int_equal(fstat(p->fd, &st), 0); /* a file the caller opened for this mapping */
        assert_int_not_equal(p->fd, rm.ctl_fd);
        assert_int_equal(p->params.hClient, CLIENT);
        assert_int_equal(p->params.hDevice, SUBDEVICE);
        assert_int_equal(p->params.hMemory, MEMORY);
        assert_int_equal(p->params.length, SIZE);
        rm.maps++;
        p->params.status = rm.map_status;
        p->params.pLinearAddress = BAR1 + FB_OFFSET;
        return 0;
    }
    case GDU_NV_ESC_RM_UNMAP_MEMORY: {
        assert_int_equal(size, sizeof(gdu_nvos34));
        gdu_nvos34 *p = arg;
        assert_int_equal(p->hDevice, SUBDEVICE);
        rm.unmaps++;
        rm.unmapped_at = p->pLinearAddress;
        p->status = 0;
        return 0;
    }
    case GDU_NV_ESC_REGISTER_FD: {
        assert_int_equal(size, sizeof(gdu_nv_register_fd));
        assert_int_equal(((gdu_nv_register_fd *)arg)->ctl_fd, rm.ctl_fd);
        rm.registered_fd = fd;
        return 0;
    }
    case GDU_NV_ESC_RM_ALLOC_MEMORY: {
        assert_int_equal(size, sizeof(gdu_nvos02_with_fd));
        assert_int_equal(fd, rm.registered_fd); /* on the registered device file */
        gdu_nvos02_with_fd *p = arg;
        assert_int_equal(p->params.hClass, GDU_NV01_MEMORY_SYSTEM_OS_DESCRIPTOR);
        assert_int_equal(p->params.hRoot, CLIENT);
        assert_int_equal(p->params.hObjectParent, DEVICE);
        assert_int_equal(p->params.flags, 0x40000000u); /* PCI, uncached, contiguous, no map */
        assert_int_equal(p->params.limit, SIZE - 1);
        rm.io_probes++;
        p->params.status = rm.io_status;
        return 0;
    }
    case GDU_NV_ESC_RM_FREE: {
        gdu_nvos00 *p = arg;
        if (rm.frees < 8)
            rm.freed[rm.frees] = p->hObjectOld;
        rm.frees++;
        p->status = 0;
        return 0;
    }
    }
    fail_msg("unexpected escape 0x%x", nr);
    return -1;
}

static const gdu_rm_calls fake_calls = {fake_ioctl, close};

static gdu_rm_client client;

static int open_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return -1;
    while (readdir(d) != NULL)
        n++;
    closedir(d);
    return n;
}

static int setup(void **state)
{
    memset(&rm, 0, sizeof rm);
    rm.io_status = GDU_NV_ERR_INVALID_ADDRESS;
    snprintf(dev_path, sizeof dev_path, "/tmp/gdu-test-nvidia-XXXXXX");
    int fd = mkstemp(dev_path);
    if (fd < 0 || ftruncate(fd, SIZE) != 0)
        return -1;
    close(fd);
    char why[256];
    return gdu_rm_client_open(&client, "/dev/null", &fake_calls, why, sizeof why);
}

static int teardown(void **state)
{
    gdu_rm_client_close(&client);
    unlink(dev_path);
    return 0;
}

static void cards(void **state)
{
    gdu_rm_card c[GDU_NV_MAX_DEVICES];
    size_t n = 0;
    char why[256];
    assert_int_equal(gdu_rm_cards(&client, c, GDU_NV_MAX_DEVICES, &n, why, sizeof why), 0);
    assert_int_equal(n, 2);
    const gdu_rm_card *one = gdu_rm_card_find(c, n, 0, 7, 0);
    assert_non_null(one);
    assert_int_equal(one->minor, 1);
    assert_int_equal(one->gpu_id, GPU_ID + 1);
    assert_true(one->bar1_addr == BAR1 + (1ull << 38));
    assert_true(one->bar1_size == 256ull << 30);
    assert_null(gdu_rm_card_find(c, n, 0, 8, 0));
    const gdu_rm_card *which = NULL;
    int bar = -1;
    assert_int_equal(gdu_rm_cards_bar_of(c, n, BAR1 + FB_OFFSET, SIZE, &which, &bar), 1);
    assert_ptr_equal(which, &c[0]);
    assert_int_equal(bar, 1);
    assert_int_equal(gdu_rm_cards_bar_of(c, n, 0xf1000000ull, 4096, &which, &bar), 1);
    assert_ptr_equal(which, &c[1]);
    assert_int_equal(bar, 0);
    assert_int_equal(gdu_rm_cards_bar_of(c, n, 0x1000, 4096, &which, &bar), 0);
    /* The last byte before a BAR is outside, the first one inside. */
    assert_int_equal(gdu_rm_cards_bar_of(c, n, BAR1 - 4096, 4096, &which, &bar), 0);
    assert_int_equal(gdu_rm_cards_bar_of(c, n, BAR1 - 4096, 4097, &which, &bar), 1);
}

static void map_write_remap(void **state)
{
    gdu_rm_device d;
    gdu_rm_vidmem m;
    uint32_t st = 0xdead;
    char why[256];
    int fds = open_fds();
    assert_int_equal(gdu_rm_device_open(&client, GPU_ID, &d, &st, why, sizeof why), 0);
    assert_int_equal(d.hdevice, DEVICE);
    assert_int_equal(d.hsubdevice, SUBDEVICE);
    assert_int_equal(d.device_instance, 3);
    assert_int_equal(gdu_rm_vidmem_alloc(&client, &d, SIZE, &m, &st, why, sizeof why), 0);
    assert_true(m.fb_offset == FB_OFFSET);
    assert_int_equal(gdu_rm_vidmem_map(&client, &d, &m, dev_path, &st, why, sizeof why), 0);
    assert_int_equal(st, GDU_NV_OK);
    assert_non_null(m.cpu);
    assert_true(m.bus_addr == BAR1 + FB_OFFSET);
    memset(m.cpu, 0xa5, SIZE);
    gdu_rm_vidmem_unmap(&client, &d, &m);
    assert_null(m.cpu);
    assert_int_equal(rm.unmaps, 1);
    assert_true(rm.unmapped_at == BAR1 + FB_OFFSET);
    /* A fresh mapping (a fresh file: one mapping context per file) sees the bytes. */
    assert_int_equal(gdu_rm_vidmem_map(&client, &d, &m, dev_path, &st, why, sizeof why), 0);
    assert_int_equal(rm.maps, 2);
    assert_int_equal(((unsigned char *)m.cpu)[SIZE - 1], 0xa5);
    gdu_rm_vidmem_free(&client, &d, &m);
    assert_int_equal(rm.unmaps, 2);
    assert_int_equal(rm.freed[0], MEMORY);
    assert_int_equal(open_fds(), fds); /* no device file left open */
    /* Sizes the I/O path cannot take are refused before RM. */
    assert_int_equal(gdu_rm_vidmem_alloc(&client, &d, 4096, &m, &st, why, sizeof why), -EINVAL);
}

static void map_refused(void **state)
{
    gdu_rm_device d;
    gdu_rm_vidmem m;
    uint32_t st = 0;
    char why[256];
    int fds = open_fds();
    rm.map_status = GDU_NV_ERR_STATE_IN_USE;
    assert_int_equal(gdu_rm_device_open(&client, GPU_ID, &d, &st, why, sizeof why), 0);
    assert_int_equal(gdu_rm_vidmem_alloc(&client, &d, SIZE, &m, &st, why, sizeof why), 0);
    assert_int_equal(gdu_rm_vidmem_map(&client, &d, &m, dev_path, &st, why, sizeof why), -EIO);
    assert_int_equal(st, GDU_NV_ERR_STATE_IN_USE);
    assert_non_null(strstr(why, "RM_MAP_MEMORY): RM returned NV_ERR_STATE_IN_USE (0x63)"));
    assert_null(m.cpu);
    assert_int_equal(open_fds(), fds);
    assert_int_equal(
        gdu_rm_vidmem_map(&client, &d, &m, "/nonexistent/nvidia9", &st, why, sizeof why), -ENOENT);
    assert_non_null(strstr(why, "cannot open /nonexistent/nvidia9"));
    gdu_rm_vidmem_free(&client, &d, &m);
    assert_int_equal(rm.unmaps, 0); /* nothing was mapped */
}

static void probe_io_memory(void **state)
{
    gdu_rm_device d;
    uint32_t st = 0;
    char why[256];
    static char range[SIZE] __attribute__((aligned(4096)));
    assert_int_equal(gdu_rm_device_open(&client, GPU_ID, &d, &st, why, sizeof why), 0);
    int frees = rm.frees;
    assert_int_equal(
        gdu_rm_probe_io_memory(&client, &d, dev_path, range, SIZE, &st, why, sizeof why), -EIO);
    assert_int_equal(st, GDU_NV_ERR_INVALID_ADDRESS);
    assert_non_null(strstr(why, "NV_ERR_INVALID_ADDRESS (0x1e)"));
    assert_int_equal(rm.io_probes, 1);
    assert_int_equal(rm.frees, frees); /* nothing to free */
    rm.io_status = GDU_NV_OK;
    assert_int_equal(
        gdu_rm_probe_io_memory(&client, &d, dev_path, range, SIZE, &st, why, sizeof why), 0);
    assert_int_equal(st, GDU_NV_OK);
    assert_int_equal(rm.frees, frees + 1); /* accepted, and freed again at once */
    assert_int_equal(rm.freed[frees], 0x67647701u);
}

static const char SMAPS[] = "55d0c0000000-55d0c0021000 r--p 00000000 08:01 1234   /usr/bin/prog\n"
                            "Size:                132 kB\n"
                            "VmFlags: rd mr mw me dw sd\n"
                            "7f0000000000-7f0000200000 rw-s 00000000 00:05 777    /dev/nvidia0\n"
                            "Size:               2048 kB\n"
                            "AnonHugePages:         0 kB\n"
                            "VmFlags: rd wr sh mr mw me ms io pf dc de dd sd \n"
                            "7f0000200000-7f0000201000 rw-p 00000000 00:00 0\n"
                            "Size:                  4 kB\n";

static void smaps(void **state)
{
    char flags[128];
    assert_int_equal(gdu_smaps_vmflags(SMAPS, 0x7f0000000000ull, flags, sizeof flags), 0);
    assert_string_equal(flags, "rd wr sh mr mw me ms io pf dc de dd sd");
    assert_true(gdu_vmflags_has(flags, "io"));
    assert_true(gdu_vmflags_has(flags, "pf"));
    assert_false(gdu_vmflags_has(flags, "mi"));
    assert_false(gdu_vmflags_has("rdio", "io"));
    assert_int_equal(gdu_smaps_vmflags(SMAPS, 0x7f00001fffffull, flags, sizeof flags), 0);
    assert_int_equal(gdu_smaps_vmflags(SMAPS, 0x55d0c0000010ull, flags, sizeof flags), 0);
    assert_string_equal(flags, "rd mr mw me dw sd");
    assert_false(gdu_vmflags_has(flags, "io"));
    /* End of a mapping is outside; a mapping without VmFlags; no mapping. */
    assert_int_equal(gdu_smaps_vmflags(SMAPS, 0x7f0000200000ull, flags, sizeof flags), -1);
    assert_int_equal(gdu_smaps_vmflags(SMAPS, 0x1000, flags, sizeof flags), -1);
    assert_int_equal(gdu_smaps_vmflags("", 0x1000, flags, sizeof flags), -1);
}

static void capabilities(void **state)
{
    assert_int_equal(gdu_proc_status_cap("Name:\tx\nCapEff:\t000001ffffffffff\nCapBnd:\t0\n", 21),
                     1);
    assert_int_equal(gdu_proc_status_cap("CapEff:\t0000000000000000\n", 21), 0);
    assert_int_equal(gdu_proc_status_cap("CapEff:\t0000000000200000", 21), 1);
    assert_int_equal(gdu_proc_status_cap("CapPrm:\t000001ffffffffff\n", 21), -1);
    assert_int_equal(gdu_proc_status_cap("CapEff:\tzz\n", 21), -1);
    assert_int_equal(gdu_proc_status_cap("CapEff:\t1\n", 64), -1);
}

static void refusals(void **state)
{
    gdu_p2p_window_refusal r;
    gdu_p2p_window_facts f = {
        .status = GDU_NV_ERR_INVALID_ADDRESS, .vma_io_pfnmap = 1, .in_gpu_bar = 1, .sys_admin = 1};
    gdu_p2p_window_refusal_of(&f, &r);
    assert_true(r.known);
    assert_string_equal(r.check, "osCheckGpuBarsOverlapAddrRange");
    assert_string_equal(r.source, "src/nvidia/arch/nvalloc/unix/src/osmemdesc.c:483-490 "
                                  "(the check: :352-394)");
    f.vma_io_pfnmap = 0;
    gdu_p2p_window_refusal_of(&f, &r);
    assert_string_equal(r.check, "os_lookup_user_io_memory");
    assert_string_equal(r.source, "kernel-open/nvidia/os-mlock.c:184-192");
    f.vma_io_pfnmap = 1;
    f.in_gpu_bar = 0;
    gdu_p2p_window_refusal_of(&f, &r);
    assert_string_equal(r.check, "get_io_ptes");
    f.in_gpu_bar = -1;
    gdu_p2p_window_refusal_of(&f, &r);
    assert_false(r.known);
    assert_non_null(strstr(r.why, "no check"));
    f.status = GDU_NV_ERR_INSUFFICIENT_PERMISSIONS;
    gdu_p2p_window_refusal_of(&f, &r);
    assert_string_equal(r.source, "src/nvidia/arch/nvalloc/unix/src/osmemdesc.c:452-466");
    assert_non_null(strstr(r.why, "CAP_SYS_ADMIN"));
    f.status = GDU_NV_ERR_INVALID_FLAGS;
    gdu_p2p_window_refusal_of(&f, &r);
    assert_string_equal(r.source, "src/nvidia/arch/nvalloc/unix/src/osmemdesc.c:440-444");
    f.status = GDU_NV_ERR_STATE_IN_USE;
    gdu_p2p_window_refusal_of(&f, &r);
    assert_false(r.known);
    /* The named codes are the table's. */
    assert_string_equal(gdu_nv_status_name(GDU_NV_ERR_INVALID_ADDRESS),
                        "NV_ERR_INVALID_ADDRESS (0x1e)");
    assert_string_equal(gdu_nv_status_name(GDU_NV_ERR_INSUFFICIENT_PERMISSIONS),
                        "NV_ERR_INSUFFICIENT_PERMISSIONS (0x1b)");
    assert_string_equal(gdu_nv_status_name(GDU_NV_ERR_INVALID_FLAGS),
                        "NV_ERR_INVALID_FLAGS (0x29)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(cards, setup, teardown),
        cmocka_unit_test_setup_teardown(map_write_remap, setup, teardown),
        cmocka_unit_test_setup_teardown(map_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(probe_io_memory, setup, teardown),
        cmocka_unit_test(smaps),
        cmocka_unit_test(capabilities),
        cmocka_unit_test(refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
