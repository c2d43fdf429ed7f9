#include "rm/p2p_caps.h"

gdu_p2p_link gdu_p2p_caps_link(uint32_t caps)
{
    /* The RM reports one connectivity per pair; C2C and NVLink win over PCIe. */
    if (caps & GDU_P2P_CAPS_C2C)
        return GDU_P2P_LINK_C2C;
    if (caps & GDU_P2P_CAPS_NVLINK)
        return GDU_P2P_LINK_NVLINK;
    if (caps & GDU_P2P_CAPS_INDIRECT_NVLINK)
        return GDU_P2P_LINK_NVLINK_INDIRECT;
    if (caps & GDU_P2P_CAPS_PCI_BAR1)
        return GDU_P2P_LINK_PCIE_BAR1;
    if (caps & (GDU_P2P_CAPS_PCI | GDU_P2P_CAPS_PROP))
        return GDU_P2P_LINK_PCIE_MAILBOX;
    return GDU_P2P_LINK_NONE;
}

static const struct {
    const char *name, *id;
} link_names[] = {
    [GDU_P2P_LINK_NONE] = {"none (staged through host)", "none"},
    [GDU_P2P_LINK_NVLINK] = {"NVLink", "nvlink"},
    [GDU_P2P_LINK_NVLINK_INDIRECT] = {"NVLink via NVSwitch", "nvlink_indirect"},
    [GDU_P2P_LINK_C2C] = {"C2C", "c2c"},
    [GDU_P2P_LINK_PCIE_BAR1] = {"PCIe BAR1", "pcie_bar1"},
    [GDU_P2P_LINK_PCIE_MAILBOX] = {"PCIe mailbox", "pcie_mailbox"},
    [GDU_P2P_LINK_UNKNOWN] = {"unknown", "unknown"},
};

const char *gdu_p2p_link_name(gdu_p2p_link link)
{
    if ((unsigned)link >= sizeof link_names / sizeof link_names[0])
        link = GDU_P2P_LINK_UNKNOWN;
    return link_names[link].name;
}

const char *gdu_p2p_link_id(gdu_p2p_link link)
{
    if ((unsigned)link >= sizeof link_names / sizeof link_names[0])
        link = GDU_P2P_LINK_UNKNOWN;
    return link_names[link].id;
}

size_t gdu_p2p_caps_bit_names(uint32_t caps, const char **names, size_t cap)
{
    static const char *const bit_names[32] = {
        "writes",
        "reads",
        "prop",
        "nvlink",
        "atomics",
        "loopback",
        "pci",
        "indirect_writes",
        "indirect_reads",
        "indirect_atomics",
        "indirect_nvlink",
        "bit11",
        "c2c",
        "pci_bar1",
        "bit14",
        "bit15",
        "bit16",
        "bit17",
        "bit18",
        "bit19",
        "bit20",
        "bit21",
        "bit22",
        "bit23",
        "bit24",
        "bit25",
        "bit26",
        "bit27",
        "bit28",
        "bit29",
        "bit30",
        "bit31",
    };
    size_t n = 0;
    for (unsigned bit = 0; bit < 32; bit++) {
        if (!(caps & (1u << bit)))
            continue;
        if (n < cap)
            names[n] = bit_names[bit];
        n++;
    }
    return n;
}

const char *gdu_p2p_caps_index_name(unsigned index)
{
    static const char *const names[GDU_P2P_CAPS_INDEX_COUNT] = {
        "read", "write", "nvlink", "atomics", "prop", "loopback", "pci", "c2c", "pci_bar1",
    };
    return index < GDU_P2P_CAPS_INDEX_COUNT ? names[index] : NULL;
}

static const struct {
    const char *id, *text;
} status_names[] = {
    [GDU_P2P_CAPS_STATUS_OK] = {"ok", "supported"},
    [GDU_P2P_CAPS_STATUS_CHIPSET_NOT_SUPPORTED] =
        {"chipset_not_supported", "the chipset / root complex is not approved for P2P"},
    [GDU_P2P_CAPS_STATUS_GPU_NOT_SUPPORTED] = {"gpu_not_supported",
                                               "the GPU has P2P disabled (product/SKU lock)"},
    [GDU_P2P_CAPS_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED] =
        {"ioh_topology_not_supported", "the GPUs sit under different I/O hubs (CPU sockets)"},
    [GDU_P2P_CAPS_STATUS_DISABLED_BY_REGKEY] = {"disabled_by_regkey",
                                                "disabled by a driver registry key"},
    [GDU_P2P_CAPS_STATUS_NOT_SUPPORTED] = {"not_supported", "not supported"},
};

const char *gdu_p2p_caps_status_id(uint8_t status)
{
    return status < sizeof status_names / sizeof status_names[0] ? status_names[status].id
                                                                 : "unknown";
}

const char *gdu_p2p_caps_status_text(uint8_t status)
{
    return status < sizeof status_names / sizeof status_names[0] ? status_names[status].text
                                                                 : "unknown status";
}

int gdu_p2p_caps_allowed(const gdu_p2p_rm_caps *caps)
{
    return caps->status[GDU_P2P_CAPS_INDEX_READ] == GDU_P2P_CAPS_STATUS_OK ||
           caps->status[GDU_P2P_CAPS_INDEX_WRITE] == GDU_P2P_CAPS_STATUS_OK;
}
