/* Fuzzes the sysfs/procfs text parsers doctor applies to captured files:
 * key: value lines, the NVRM version line, link speeds, PCI resource files,
 * mountinfo lines, the kernel command line, registry dwords, JSON comment
 * stripping and sysfs device paths. */
#include "probe/driver_probe.h"
#include "probe/text_parse.h"
#include "probe/topo_path.h"
#include "util/pci_resource.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = strndup((const char *)data, size); /* the parsers read C strings */
    if (text == NULL)
        return 0;

    char value[64];
    gdu_text_kv(text, "Model", value, sizeof value);
    gdu_text_kv(text, "GPU Firmware", value, sizeof value);
    gdu_nvidia_version v;
    gdu_parse_nvidia_version(text, &v);
    gdu_parse_link_gen(text);
    uint64_t sizes[GDU_PCI_BARS];
    int bar1;
    if (gdu_pci_resource_parse(text, sizes) >= 0)
        gdu_pci_bar1(sizes, &bar1);
    gdu_cmdline_get(text, "iommu", value, sizeof value);
    int major, minor;
    gdu_parse_kernel_release(text, &major, &minor);
    gdu_kernel_config_option(text, "CONFIG_PCI_P2PDMA");
    unsigned long dword;
    gdu_registry_dword(text, "RMForceP2PType", &dword);

    gdu_pcie_path path;
    gdu_pcie_path_classify(text, 0, "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0", 0, &path);
    char bdf[16];
    gdu_sysfs_path_last_bdf(text, bdf, sizeof bdf);

    char *copy = strdup(text);
    if (copy != NULL) {
        char *save = NULL;
        gdu_mount m;
        for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
            gdu_parse_mountinfo_line(line, &m);
        free(copy);
    }
    gdu_strip_json_comments(text);
    free(text);
    return 0;
}
