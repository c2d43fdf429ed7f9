/* PCI addresses in their one spelling (util/pci_addr.h), and BAR sizes from
 * sysfs resource files with NVIDIA's BAR1 among them (util/pci_resource.h). */
#include "util/pci_addr.h"
#include "util/nv_device_file.h"
#include "util/pci_resource.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

static void addresses_normalise(void **state)
{
    char out[GDU_PCI_ADDR_SIZE];
    assert_int_equal(gdu_pci_addr_normalize("00000000:1B:00.0", out, sizeof out), 0);
    assert_string_equal(out, "0000:1b:00.0");
    assert_int_equal(gdu_pci_addr_normalize("0001:c1:1f.7", out, sizeof out), 0);
    assert_string_equal(out, "0001:c1:1f.7");
    assert_int_equal(gdu_pci_addr_normalize("41:00.0", out, sizeof out), 0);
    assert_string_equal(out, "0000:41:00.0");
    assert_int_equal(gdu_pci_addr_normalize("0000:01:00", out, sizeof out), -EINVAL);
    assert_int_equal(gdu_pci_addr_normalize("0000:01:20.0", out, sizeof out), -EINVAL);
    assert_int_equal(gdu_pci_addr_normalize("0000:01:00.0x", out, sizeof out), -EINVAL);
    assert_int_equal(gdu_pci_addr_normalize("10000:01:00.0", out, sizeof out), -EINVAL);
    assert_int_equal(gdu_pci_addr_normalize("", out, sizeof out), -EINVAL);
}

static void addresses_format(void **state)
{
    char out[GDU_PCI_ADDR_SIZE];
    gdu_pci_addr_format(out, sizeof out, 0, 0x1b, 0, 0);
    assert_string_equal(out, "0000:1b:00.0");
    gdu_pci_addr_format(out, sizeof out, 0xabc, 0xff, 0x1f, 7);
    assert_string_equal(out, "0abc:ff:1f.7");
}

/* An RTX 3060's regions: BAR0 registers, BAR1 (16 GiB with ReBAR), BAR3, the
 * I/O ports of BAR5, the ROM. */
static const char rtx3060[] = "0x00000000fb000000 0x00000000fbffffff 0x0000000000040200\n"
                              "0x0000006000000000 0x00000063ffffffff 0x000000000014220c\n"
                              "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
                              "0x0000006400000000 0x0000006401ffffff 0x000000000014220c\n"
                              "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
                              "0x000000000000e000 0x000000000000e07f 0x0000000000040101\n"
                              "0x00000000fc000000 0x00000000fc07ffff 0x0000000000046200\n";

static void resource_sizes_and_bar1(void **state)
{
    uint64_t sizes[GDU_PCI_BARS];
    int index;
    assert_int_equal(gdu_pci_resource_parse(rtx3060, sizes), 6);
    assert_int_equal(sizes[0], 16u << 20);
    assert_int_equal(sizes[1], 16ull << 30);
    assert_int_equal(sizes[2], 0);
    assert_int_equal(sizes[3], 32u << 20);
    assert_int_equal(sizes[5], 0); /* I/O ports are no memory BAR */
    assert_int_equal(gdu_pci_bar1(sizes, &index), 16ull << 30);
    assert_int_equal(index, 1);
    assert_int_equal(gdu_pci_resource_parse("junk\n", sizes), -EINVAL);
    assert_int_equal(gdu_pci_resource_parse("", sizes), 0);
    assert_int_equal(gdu_pci_bar1(sizes, &index), 0);
    assert_int_equal(index, -1);
}

/* An I/O-port region before the memory BARs is not taken for BAR1 (the
 * shim's and the I/O engine's readers once differed here). */
static void io_ports_are_not_bar1(void **state)
{
    static const char text[] = "0x000000000000e000 0x000000000000e07f 0x0000000000040101\n"
                               "0x00000000fb000000 0x00000000fbffffff 0x0000000000040200\n"
                               "0x0000006000000000 0x00000063ffffffff 0x000000000014220c\n";
    uint64_t sizes[GDU_PCI_BARS];
    int index;
    assert_int_equal(gdu_pci_resource_parse(text, sizes), 3);
    assert_int_equal(gdu_pci_bar1(sizes, &index), 16ull << 30);
    assert_int_equal(index, 2);
}

/* The live reader: a device that is not there reads as unknown. */
static void absent_device_reads_zero(void **state)
{
    assert_int_equal(gdu_pci_bar1_read("ffff:ff:1f.7"), 0);
    assert_int_equal(gdu_pci_bar1_read("../../../../etc"), 0);
}

/* The minor as the driver writes it (tests/fixtures/doctor/h200-vm), and
 * what is not one. */
static void device_minor(void **state)
{
    assert_int_equal(gdu_nv_device_minor_parse("Model: \t\t NVIDIA H200\n"
                                               "IRQ:   \t\t 10\n"
                                               "Device Minor: \t 1\n"
                                               "Bus Location: \t 0000:00:07.0\n"),
                     1);
    assert_int_equal(gdu_nv_device_minor_parse("Device Minor: 0"), 0);
    assert_int_equal(gdu_nv_device_minor_parse("Device Minor: 254\n"), 254);
    assert_int_equal(gdu_nv_device_minor_parse("Device Minor: 255\n"), -1); /* nvidiactl's */
    assert_int_equal(gdu_nv_device_minor_parse("Device Minor: 12345\n"), -1);
    assert_int_equal(gdu_nv_device_minor_parse("Device Minor: 1x\n"), -1);
    assert_int_equal(gdu_nv_device_minor_parse("Device Minor: \n"), -1);
    assert_int_equal(gdu_nv_device_minor_parse("Model: Device Minor: 3\n"), -1);
    assert_int_equal(gdu_nv_device_minor_parse(""), -1);
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* The file found under a fake root: the information file names minor 1, so
 * /dev/nvidia1 is opened, not /dev/nvidia0. */
static void device_file_open(void **state)
{
    char root[] = "/tmp/gdu-devfile-XXXXXX";
    assert_non_null(mkdtemp(root));
    static const char *const dirs[] = {"proc",
                                       "proc/driver",
                                       "proc/driver/nvidia",
                                       "proc/driver/nvidia/gpus",
                                       "proc/driver/nvidia/gpus/0000:00:07.0",
                                       "dev"};
    char path[512], gpu[512], dev[512];
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", root, dirs[i]);
        assert_int_equal(mkdir(path, 0700), 0);
    }
    snprintf(gpu, sizeof gpu, "%s/proc/driver/nvidia/gpus/0000:00:07.0", root);
    snprintf(dev, sizeof dev, "%s/dev", root);
    write_file(gpu, "information", "Device Minor: \t 1\n");
    write_file(dev, "nvidia0", "zero");
    write_file(dev, "nvidia1", "one");
    int fd = gdu_nv_device_file_open(root, "0000:00:07.0");
    assert_true(fd >= 0);
    char text[8] = {0};
    assert_int_equal(read(fd, text, 3), 3);
    assert_string_equal(text, "one");
    assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    close(fd);
    assert_int_equal(gdu_nv_device_file_open(root, "0000:00:08.0"), -ENOENT);
    assert_int_equal(gdu_nv_device_file_open(root, "../../etc"), -EINVAL);
    write_file(gpu, "information", "Device Minor: none\n");
    assert_int_equal(gdu_nv_device_file_open(root, "0000:00:07.0"), -EINVAL);
    static const char *const files[] = {"dev/nvidia0", "dev/nvidia1",
                                        "proc/driver/nvidia/gpus/0000:00:07.0/information"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", root, files[i]);
        assert_int_equal(unlink(path), 0);
    }
    for (size_t i = sizeof dirs / sizeof dirs[0]; i-- > 0;) {
        snprintf(path, sizeof path, "%s/%s", root, dirs[i]);
        assert_int_equal(rmdir(path), 0);
    }
    assert_int_equal(rmdir(root), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(device_minor),
        cmocka_unit_test(device_file_open),
        cmocka_unit_test(addresses_normalise),
        cmocka_unit_test(addresses_format),
        cmocka_unit_test(resource_sizes_and_bar1),
        cmocka_unit_test(io_ports_are_not_bar1),
        cmocka_unit_test(absent_device_reads_zero),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
