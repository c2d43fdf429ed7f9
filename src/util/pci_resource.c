#include "util/pci_resource.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

int gdu_pci_resource_parse(const char *text, uint64_t sizes[GDU_PCI_BARS])
{
    memset(sizes, 0, GDU_PCI_BARS * sizeof sizes[0]);
    const char *line = text;
    int n = 0;
    for (; n < GDU_PCI_BARS && line != NULL && *line != '\0'; n++) {
        unsigned long long start, end, flags;
        if (sscanf(line, "%llx %llx %llx", &start, &end, &flags) != 3)
            return -EINVAL;
        bool used = end > start || (end == start && end != 0);
        if (used && (flags & GDU_PCI_RESOURCE_MEM))
            sizes[n] = end - start + 1;
        line = strchr(line, '\n');
        if (line != NULL)
            line++;
    }
    return n;
}

uint64_t gdu_pci_bar1(const uint64_t sizes[GDU_PCI_BARS], int *index)
{
    int seen = 0;
    for (int k = 0; k < GDU_PCI_BARS; k++)
        if (sizes[k] != 0 && ++seen == 2) {
            *index = k;
            return sizes[k];
        }
    *index = -1;
    return 0;
}

uint64_t gdu_pci_bar1_read(const char *addr)
{
    char path[96], text[1024];
    if (snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/resource", addr) >= (int)sizeof path)
        return 0;
    FILE *f = fopen(path, "re"); /* O_CLOEXEC */
    if (f == NULL)
        return 0;
    /* Six BAR lines of 57 bytes come first; the rest is not needed. */
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = '\0';
    uint64_t sizes[GDU_PCI_BARS];
    int index;
    return gdu_pci_resource_parse(text, sizes) < 0 ? 0 : gdu_pci_bar1(sizes, &index);
}
