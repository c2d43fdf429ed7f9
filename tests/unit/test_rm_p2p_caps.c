/* Decoding of the RM's P2P caps bits and statuses into names and links. */
#include "rm/p2p_caps.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

static void test_link_of_caps(void **state)
{
    assert_int_equal(gdu_p2p_caps_link(0), GDU_P2P_LINK_NONE);
    assert_int_equal(gdu_p2p_caps_link(GDU_P2P_CAPS_READS | GDU_P2P_CAPS_WRITES),
                     GDU_P2P_LINK_NONE);
    /* As the RM fills them for each connectivity (client_resource.c, 580). */
    assert_int_equal(gdu_p2p_caps_link(0x1b), GDU_P2P_LINK_NVLINK);       /* W R NVLINK ATOMICS */
    assert_int_equal(gdu_p2p_caps_link(0x2043), GDU_P2P_LINK_PCIE_BAR1);  /* W R PCI BAR1 */
    assert_int_equal(gdu_p2p_caps_link(0x47), GDU_P2P_LINK_PCIE_MAILBOX); /* W R PROP PCI */
    assert_int_equal(gdu_p2p_caps_link(0x780), GDU_P2P_LINK_NVLINK_INDIRECT);
    assert_int_equal(gdu_p2p_caps_link(0x1013), GDU_P2P_LINK_C2C);
    assert_string_equal(gdu_p2p_link_id(GDU_P2P_LINK_PCIE_BAR1), "pcie_bar1");
    assert_string_equal(gdu_p2p_link_name(GDU_P2P_LINK_PCIE_MAILBOX), "PCIe mailbox");
    assert_string_equal(gdu_p2p_link_id((gdu_p2p_link)77), "unknown");
}

static void test_bit_names(void **state)
{
    const char *names[4];
    size_t n = gdu_p2p_caps_bit_names(0x2043, names, 4);
    assert_int_equal(n, 4);
    assert_string_equal(names[0], "writes");
    assert_string_equal(names[1], "reads");
    assert_string_equal(names[2], "pci");
    assert_string_equal(names[3], "pci_bar1");
    /* More bits than room: the count is still complete. */
    n = gdu_p2p_caps_bit_names(0xffffffffu, names, 2);
    assert_int_equal(n, 32);
    assert_string_equal(names[1], "reads");
    n = gdu_p2p_caps_bit_names(1u << 31, names, 4);
    assert_int_equal(n, 1);
    assert_string_equal(names[0], "bit31");
    assert_int_equal(gdu_p2p_caps_bit_names(0, names, 4), 0);
}

static void test_status_and_index_names(void **state)
{
    assert_string_equal(gdu_p2p_caps_status_id(0), "ok");
    assert_string_equal(gdu_p2p_caps_status_id(1), "chipset_not_supported");
    assert_string_equal(gdu_p2p_caps_status_id(2), "gpu_not_supported");
    assert_string_equal(gdu_p2p_caps_status_id(3), "ioh_topology_not_supported");
    assert_string_equal(gdu_p2p_caps_status_id(4), "disabled_by_regkey");
    assert_string_equal(gdu_p2p_caps_status_id(5), "not_supported");
    assert_string_equal(gdu_p2p_caps_status_id(6), "unknown");
    assert_string_equal(gdu_p2p_caps_status_id(255), "unknown");
    assert_non_null(strstr(gdu_p2p_caps_status_text(2), "SKU"));
    assert_string_equal(gdu_p2p_caps_status_text(200), "unknown status");
    assert_string_equal(gdu_p2p_caps_index_name(GDU_P2P_CAPS_INDEX_READ), "read");
    assert_string_equal(gdu_p2p_caps_index_name(GDU_P2P_CAPS_INDEX_PCI_BAR1), "pci_bar1");
    assert_null(gdu_p2p_caps_index_name(GDU_P2P_CAPS_INDEX_COUNT));
}

static void test_allowed(void **state)
{
    gdu_p2p_rm_caps c;
    memset(&c, 0, sizeof c);
    memset(c.status, GDU_P2P_CAPS_STATUS_NOT_SUPPORTED, sizeof c.status);
    assert_false(gdu_p2p_caps_allowed(&c));
    c.status[GDU_P2P_CAPS_INDEX_WRITE] = GDU_P2P_CAPS_STATUS_OK; /* writes only: P2P allowed */
    assert_true(gdu_p2p_caps_allowed(&c));
    c.status[GDU_P2P_CAPS_INDEX_WRITE] = GDU_P2P_CAPS_STATUS_GPU_NOT_SUPPORTED;
    c.status[GDU_P2P_CAPS_INDEX_NVLINK] = GDU_P2P_CAPS_STATUS_OK; /* only READ/WRITE decide */
    assert_false(gdu_p2p_caps_allowed(&c));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_link_of_caps),
        cmocka_unit_test(test_bit_names),
        cmocka_unit_test(test_status_and_index_names),
        cmocka_unit_test(test_allowed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
