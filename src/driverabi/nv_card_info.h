/* Driver-private escapes of /dev/nvidiactl and /dev/nvidiaN that an RM
 * client of a GPU's memory needs besides the RM escapes: NV_ESC_CARD_INFO
 * (every GPU's PCI address, device minor and the bus addresses of BAR0 and
 * BAR1) and NV_ESC_REGISTER_FD (ties a /dev/nvidiaN file to the control
 * file its RM client was allocated on, so that RM accepts that client's
 * escapes on the device file). Layouts of kernel-open/common/inc/nv-ioctl.h,
 * open-gpu-kernel-modules 580.142. Both are non-privileged. */
#ifndef GDUNLOCK_DRIVERABI_NV_CARD_INFO_H
#define GDUNLOCK_DRIVERABI_NV_CARD_INFO_H

#include <stddef.h>
#include <stdint.h>

/* The most devices one NV_ESC_CARD_INFO answers (NV_MAX_DEVICES); the
 * kernel refuses a smaller array than it has devices (-EINVAL). */
#define GDU_NV_MAX_DEVICES 32

typedef struct {
    uint32_t domain;
    uint8_t bus;
    uint8_t slot;
    uint8_t function;
    uint16_t vendor_id;
    uint16_t device_id;
} gdu_nv_pci_info;

_Static_assert(sizeof(gdu_nv_pci_info) == 12, "nv_pci_info_t size");
_Static_assert(offsetof(gdu_nv_pci_info, bus) == 4, "nv_pci_info_t.bus offset");
_Static_assert(offsetof(gdu_nv_pci_info, slot) == 5, "nv_pci_info_t.slot offset");
_Static_assert(offsetof(gdu_nv_pci_info, vendor_id) == 8, "nv_pci_info_t.vendor_id offset");
_Static_assert(offsetof(gdu_nv_pci_info, device_id) == 10, "nv_pci_info_t.device_id offset");

/* One entry of NV_ESC_CARD_INFO's array (the ioctl size is the array's). */
typedef struct {
    uint8_t valid;
    gdu_nv_pci_info pci_info;
    uint32_t gpu_id;
    uint16_t interrupt_line;
    _Alignas(8) uint64_t reg_address; /* BAR0 bus address */
    _Alignas(8) uint64_t reg_size;
    _Alignas(8) uint64_t fb_address; /* BAR1 bus address */
    _Alignas(8) uint64_t fb_size;
    uint32_t minor_number; /* /dev/nvidia<minor_number> */
    uint8_t dev_name[10];
} gdu_nv_card_info;

_Static_assert(sizeof(gdu_nv_card_info) == 72, "nv_ioctl_card_info_t size");
_Static_assert(offsetof(gdu_nv_card_info, pci_info) == 4, "nv_ioctl_card_info_t.pci_info offset");
_Static_assert(offsetof(gdu_nv_card_info, gpu_id) == 16, "nv_ioctl_card_info_t.gpu_id offset");
_Static_assert(offsetof(gdu_nv_card_info, interrupt_line) == 20,
               "nv_ioctl_card_info_t.interrupt_line offset");
_Static_assert(offsetof(gdu_nv_card_info, reg_address) == 24,
               "nv_ioctl_card_info_t.reg_address offset");
_Static_assert(offsetof(gdu_nv_card_info, reg_size) == 32, "nv_ioctl_card_info_t.reg_size offset");
_Static_assert(offsetof(gdu_nv_card_info, fb_address) == 40,
               "nv_ioctl_card_info_t.fb_address offset");
_Static_assert(offsetof(gdu_nv_card_info, fb_size) == 48, "nv_ioctl_card_info_t.fb_size offset");
_Static_assert(offsetof(gdu_nv_card_info, minor_number) == 56,
               "nv_ioctl_card_info_t.minor_number offset");
_Static_assert(offsetof(gdu_nv_card_info, dev_name) == 60, "nv_ioctl_card_info_t.dev_name offset");

/* NV_ESC_REGISTER_FD, issued on the /dev/nvidiaN file. */
typedef struct {
    int32_t ctl_fd;
} gdu_nv_register_fd;

_Static_assert(sizeof(gdu_nv_register_fd) == 4, "nv_ioctl_register_fd_t size");

#endif
