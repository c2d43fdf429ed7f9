/* PCI addresses in their one spelling (util/pci_addr.h). */
#include "util/pci_addr.h"

#include <errno.h>
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(addresses_normalise),
        cmocka_unit_test(addresses_format),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
