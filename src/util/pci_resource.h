/* A PCI function's BARs as sysfs lists them in its "resource" file (one
 * "start end flags" line per region: BAR0-5, the ROM, bridge windows), and
 * NVIDIA's BAR1, the window onto GPU memory, among them. */
#ifndef GDUNLOCK_UTIL_PCI_RESOURCE_H
#define GDUNLOCK_UTIL_PCI_RESOURCE_H

#include <stdint.h>

enum { GDU_PCI_BARS = 6 };

/* The kernel's IORESOURCE_MEM flag (include/linux/ioport.h): a memory
 * region, not I/O ports. */
#define GDU_PCI_RESOURCE_MEM 0x200ull

/* sizes[i]: BAR i's size in bytes when it is a memory region, else 0 (unused,
 * or I/O ports). Returns the number of BAR lines read (0..6), or -EINVAL
 * when one of them is not three hex numbers. */
int gdu_pci_resource_parse(const char *text, uint64_t sizes[GDU_PCI_BARS]);

/* NVIDIA's BAR1 is the second memory BAR: register 1 after a 32-bit BAR0
 * (GeForce), 2 after a 64-bit one (H100/H200). Returns its size (0 when there
 * is none) and its register in *index (-1 when none). */
uint64_t gdu_pci_bar1(const uint64_t sizes[GDU_PCI_BARS], int *index);

/* BAR1 of the device at addr ("0000:01:00.0") on this machine, from
 * /sys/bus/pci/devices/<addr>/resource (opened close-on-exec: the shim calls
 * it inside the program it is preloaded into); 0 when it cannot be read. */
uint64_t gdu_pci_bar1_read(const char *addr);

#endif
