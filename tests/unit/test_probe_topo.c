/* PCIe path classification from sysfs device paths. */
#include "probe/topo_path.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#define RC0 "/sys/devices/pci0000:00"
#define SW RC0 "/0000:00:01.0/0000:01:00.0"

static void same_switch_is_pix(void **state)
{
    gdu_pcie_path p;
    gdu_pcie_path_classify(SW "/0000:02:08.0/0000:03:00.0", 0, SW "/0000:02:10.0/0000:04:00.0", 0,
                           &p);
    assert_int_equal(p.kind, GDU_PATH_PIX);
    assert_int_equal(p.n_bridges, 3);
    assert_string_equal(p.bridges[0], "0000:02:08.0");
    assert_string_equal(p.bridges[1], "0000:01:00.0");
    assert_string_equal(p.bridges[2], "0000:02:10.0");
}

static void nested_switches_are_pxb(void **state)
{
    gdu_pcie_path p;
    gdu_pcie_path_classify(SW "/0000:02:08.0/0000:03:00.0/0000:04:00.0/0000:05:00.0", 0,
                           SW "/0000:02:10.0/0000:06:00.0", 0, &p);
    assert_int_equal(p.kind, GDU_PATH_PXB);
}

static void root_ports_of_one_complex_are_phb(void **state)
{
    gdu_pcie_path p;
    gdu_pcie_path_classify(RC0 "/0000:00:01.0/0000:01:00.0", 0, RC0 "/0000:00:02.0/0000:05:00.0", 0,
                           &p);
    assert_int_equal(p.kind, GDU_PATH_PHB);
    assert_int_equal(p.n_bridges, 2);
    /* devices on the root bus itself (a typical VM) */
    gdu_pcie_path_classify(RC0 "/0000:00:05.0", -1, RC0 "/0000:00:06.0", -1, &p);
    assert_int_equal(p.kind, GDU_PATH_PHB);
    assert_int_equal(p.n_bridges, 0);
}

static void complexes_by_numa_node(void **state)
{
    gdu_pcie_path p;
    const char *a = RC0 "/0000:00:01.0/0000:01:00.0";
    const char *b = "/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0";
    gdu_pcie_path_classify(a, 0, b, 1, &p);
    assert_int_equal(p.kind, GDU_PATH_SYS);
    gdu_pcie_path_classify(a, 0, b, 0, &p);
    assert_int_equal(p.kind, GDU_PATH_NODE);
    gdu_pcie_path_classify(a, -1, b, -1, &p);
    assert_int_equal(p.kind, GDU_PATH_NODE);
}

static void same_device_and_unknowns(void **state)
{
    gdu_pcie_path p;
    gdu_pcie_path_classify(SW, 0, SW, 0, &p);
    assert_int_equal(p.kind, GDU_PATH_X);
    gdu_pcie_path_classify("/sys/devices/virtual/x", 0, SW, 0, &p);
    assert_int_equal(p.kind, GDU_PATH_UNKNOWN);
    gdu_pcie_path_classify(RC0 "/0000:00:01.0", 0, SW, 0, &p); /* a bridge and a device below it */
    assert_int_equal(p.kind, GDU_PATH_PIX);
    assert_string_equal(gdu_path_kind_name(GDU_PATH_NODE), "NODE");
    assert_string_equal(gdu_path_kind_name((gdu_path_kind)99), "?");
}

static void last_bdf_of_block_path(void **state)
{
    char bdf[16];
    assert_int_equal(
        gdu_sysfs_path_last_bdf(RC0 "/0000:00:04.0/virtio1/block/vda/vda1", bdf, sizeof bdf), 0);
    assert_string_equal(bdf, "0000:00:04.0");
    assert_int_equal(gdu_sysfs_path_last_bdf("/sys/devices/virtual/block/dm-0", bdf, sizeof bdf),
                     -ENOENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(same_switch_is_pix),
        cmocka_unit_test(nested_switches_are_pxb),
        cmocka_unit_test(root_ports_of_one_complex_are_phb),
        cmocka_unit_test(complexes_by_numa_node),
        cmocka_unit_test(same_device_and_unknowns),
        cmocka_unit_test(last_bdf_of_block_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
