/* The sysfs/procfs text parsers, cufile.json reading and registry keys. */
#include "probe/cufile_config.h"
#include "probe/driver_probe.h"
#include "probe/text_parse.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

static void kv_finds_keys_with_spaces_and_tabs(void **state)
{
    const char *info =
        "Model: \t\t NVIDIA H200\nGPU UUID: \t GPU-1234  \nGPU Firmware: \t 580.159.04\n";
    char v[64];
    assert_int_equal(gdu_text_kv(info, "Model", v, sizeof v), 0);
    assert_string_equal(v, "NVIDIA H200");
    assert_int_equal(gdu_text_kv(info, "GPU UUID", v, sizeof v), 0);
    assert_string_equal(v, "GPU-1234");
    assert_int_equal(gdu_text_kv(info, "GPU Firmware", v, sizeof v), 0);
    assert_string_equal(v, "580.159.04");
    assert_int_equal(gdu_text_kv(info, "GPU", v, sizeof v), -ENOENT);
    assert_int_equal(gdu_text_kv("", "Model", v, sizeof v), -ENOENT);
    char tiny[4];
    assert_int_equal(gdu_text_kv(info, "Model", tiny, sizeof tiny), 0);
    assert_string_equal(tiny, "NVI");
}

static void nvidia_version_open_and_proprietary(void **state)
{
    gdu_nvidia_version v;
    assert_int_equal(gdu_parse_nvidia_version(
                         "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  "
                         "Release Build  (dvs-builder@U22)  Thu\nGCC version: gcc 12.3.0\n",
                         &v),
                     0);
    assert_string_equal(v.version, "580.159.04");
    assert_int_equal(v.major, 580);
    assert_true(v.open_module);
    assert_int_equal(gdu_parse_nvidia_version(
                         "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.129.03  Thu Oct  5 "
                         "21:05:19 UTC 2023\n",
                         &v),
                     0);
    assert_string_equal(v.version, "535.129.03");
    assert_false(v.open_module);
    assert_int_equal(gdu_parse_nvidia_version("GCC version: 12.3\n", &v), -ENOENT);
    assert_int_equal(gdu_parse_nvidia_version("NVRM version: nothing here\n", &v), -EINVAL);
}

static void link_generations(void **state)
{
    assert_int_equal(gdu_parse_link_gen("2.5 GT/s PCIe"), 1);
    assert_int_equal(gdu_parse_link_gen("8.0 GT/s PCIe"), 3);
    assert_int_equal(gdu_parse_link_gen("16.0 GT/s PCIe"), 4);
    assert_int_equal(gdu_parse_link_gen("32.0 GT/s PCIe"), 5);
    assert_int_equal(gdu_parse_link_gen("Unknown"), 0);
    assert_int_equal(gdu_parse_link_gen("12 GT/s"), 0);
}

static void mountinfo_lines(void **state)
{
    gdu_mount m;
    assert_int_equal(gdu_parse_mountinfo_line("40 28 259:1 / /data\\040set rw,noatime shared:30 "
                                              "master:2 - ext4 /dev/nvme0n1p1 rw,data=ordered",
                                              &m),
                     0);
    assert_int_equal(m.major, 259);
    assert_int_equal(m.minor, 1);
    assert_string_equal(m.mount_point, "/data set");
    assert_string_equal(m.fstype, "ext4");
    assert_string_equal(m.source, "/dev/nvme0n1p1");
    assert_string_equal(m.super_options, "rw,data=ordered");
    assert_int_equal(gdu_parse_mountinfo_line("41 28 0:45 / /scratch rw - tmpfs tmpfs rw", &m), 0);
    assert_int_equal(m.major, 0);
    assert_int_equal(gdu_parse_mountinfo_line("41 28 0:45 / /scratch rw tmpfs tmpfs rw", &m),
                     -EINVAL);
    assert_int_equal(gdu_parse_mountinfo_line("", &m), -EINVAL);
    assert_int_equal(gdu_parse_mountinfo_line("1 2 x / / rw - ext4 a b", &m), -EINVAL);
}

static void cmdline_values(void **state)
{
    char v[32];
    const char *cmd = "BOOT_IMAGE=/vmlinuz root=UUID=1 ro intel_iommu=on iommu=pt quiet iommu=off";
    assert_int_equal(gdu_cmdline_get(cmd, "iommu", v, sizeof v), 0);
    assert_string_equal(v, "off"); /* the last one wins */
    assert_int_equal(gdu_cmdline_get(cmd, "intel_iommu", v, sizeof v), 0);
    assert_string_equal(v, "on");
    assert_int_equal(gdu_cmdline_get(cmd, "quiet", v, sizeof v), 0);
    assert_string_equal(v, "");
    assert_int_equal(gdu_cmdline_get(cmd, "amd_iommu", v, sizeof v), -ENOENT);
}

static void cufile_json_with_comments(void **state)
{
    gdu_cufile_config c;
    const char *text = "{ // top\n \"logging\": {\"level\": \"ERROR\"},\n"
                       " \"properties\": { /* path */ \"allow_compat_mode\": false,\n"
                       "   \"use_pci_p2pdma\": true, \"url\": \"http://x//y\",\n"
                       "   \"max_direct_io_size_kb\": 16384 } }";
    assert_int_equal(gdu_cufile_config_parse(text, &c), 0);
    assert_true(c.parsed);
    assert_int_equal(c.allow_compat_mode, 0);
    assert_int_equal(c.use_pci_p2pdma, 1);
    assert_int_equal(c.max_direct_io_size_kb, 16384);
    assert_int_equal(c.max_device_pinned_mem_size_kb, -1);
    assert_string_equal(c.logging_level, "ERROR");
    assert_int_equal(gdu_cufile_config_parse("{ \"properties\": ", &c), -EINVAL);
    assert_false(c.parsed);
    assert_non_null(strstr(c.error, "not valid JSON"));
    assert_int_equal(gdu_cufile_config_parse("[1]", &c), -EINVAL);
}

static void strips_comments_outside_strings(void **state)
{
    char text[] = "{\"a\": \"//not\" /* x */, // y\n\"b\": \"\\\"/*\"}";
    gdu_strip_json_comments(text);
    assert_string_equal(text, "{\"a\": \"//not\"  , \n\"b\": \"\\\"/*\"}");
}

static void registry_dwords(void **state)
{
    unsigned long v;
    assert_int_equal(gdu_registry_dword("RMForceP2PType=1;RMPcieP2PType=0x2", "RMPcieP2PType", &v),
                     0);
    assert_int_equal(v, 2);
    assert_int_equal(gdu_registry_dword("RMForceP2PType=1;RMPcieP2PType=0x2", "RMForceP2PType", &v),
                     0);
    assert_int_equal(v, 1);
    assert_int_equal(gdu_registry_dword("RMForceP2PTypeX=1", "RMForceP2PType", &v), -ENOENT);
    assert_int_equal(gdu_registry_dword("ForceP2P=zz", "ForceP2P", &v), -EINVAL);
    assert_int_equal(gdu_registry_dword("", "ForceP2P", &v), -ENOENT);
}

static void kernel_release_and_config(void **state)
{
    int major = 0, minor = 0;
    assert_int_equal(gdu_parse_kernel_release("6.8.0-49-generic", &major, &minor), 0);
    assert_int_equal(major, 6);
    assert_int_equal(minor, 8);
    assert_int_equal(gdu_parse_kernel_release("junk", &major, &minor), -EINVAL);
    const char *config = "CONFIG_PCI=y\n# CONFIG_PCI_P2PDMA_X is not set\nCONFIG_PCI_P2PDMA=y\n";
    assert_int_equal(gdu_kernel_config_option(config, "CONFIG_PCI_P2PDMA"), 1);
    assert_int_equal(
        gdu_kernel_config_option("# CONFIG_PCI_P2PDMA is not set\n", "CONFIG_PCI_P2PDMA"), 0);
    assert_int_equal(gdu_kernel_config_option("# CONFIG_PCI_P2PDMA is\n", "CONFIG_PCI_P2PDMA"), -1);
    assert_int_equal(gdu_kernel_config_option("CONFIG_NVME_CORE=m\n", "CONFIG_NVME_CORE"), 1);
    assert_int_equal(gdu_kernel_config_option("CONFIG_PCI=y\n", "CONFIG_PCI_P2PDMA"), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kernel_release_and_config),
        cmocka_unit_test(kv_finds_keys_with_spaces_and_tabs),
        cmocka_unit_test(nvidia_version_open_and_proprietary),
        cmocka_unit_test(link_generations),
        cmocka_unit_test(mountinfo_lines),
        cmocka_unit_test(cmdline_values),
        cmocka_unit_test(cufile_json_with_comments),
        cmocka_unit_test(strips_comments_outside_strings),
        cmocka_unit_test(registry_dwords),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
