/* The one spelling of a PCI function's address, sysfs's: "0000:1b:00.0"
 * (domain, bus, device, function in lower-case hex). */
#ifndef GDUNLOCK_UTIL_PCI_ADDR_H
#define GDUNLOCK_UTIL_PCI_ADDR_H

#include <stddef.h>

/* Room for an address and its NUL. */
enum { GDU_PCI_ADDR_SIZE = 16 };

/* Writes the address of domain:bus:device.function into out. */
void gdu_pci_addr_format(char *out, size_t len, unsigned domain, unsigned bus, unsigned device,
                         unsigned function);

/* The address from any spelling CUDA, nvidia-smi or the driver use
 * ("00000000:1B:00.0", "0000:1b:00.0", "1b:00.0" with domain 0). Returns 0,
 * or -EINVAL for anything else (out untouched). */
int gdu_pci_addr_normalize(const char *in, char *out, size_t len);

#endif
