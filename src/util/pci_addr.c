#include "util/pci_addr.h"

#include <errno.h>
#include <stdio.h>

void gdu_pci_addr_format(char *out, size_t len, unsigned domain, unsigned bus, unsigned device,
                         unsigned function)
{
    snprintf(out, len, "%04x:%02x:%02x.%x", domain & 0xffff, bus & 0xff, device & 0x1f,
             function & 7);
}

int gdu_pci_addr_normalize(const char *in, char *out, size_t len)
{
    unsigned domain = 0, bus, dev, fn;
    int used = 0;
    if (sscanf(in, "%x:%x:%x.%1x%n", &domain, &bus, &dev, &fn, &used) != 4 || in[used] != '\0') {
        domain = 0;
        used = 0;
        if (sscanf(in, "%x:%x.%1x%n", &bus, &dev, &fn, &used) != 3 || in[used] != '\0')
            return -EINVAL;
    }
    if (domain > 0xffff || bus > 0xff || dev > 0x1f || fn > 7)
        return -EINVAL;
    gdu_pci_addr_format(out, len, domain, bus, dev, fn);
    return 0;
}
