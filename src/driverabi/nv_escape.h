/* NVIDIA RM escape ioctls: request numbers and the helpers that build and
 * take apart their ioctl request codes. Facts from the open kernel modules
 * (nv_escape.h, nv-ioctl-numbers.h, nv-ioctl.h), branch 580. */
#ifndef GDUNLOCK_DRIVERABI_NV_ESCAPE_H
#define GDUNLOCK_DRIVERABI_NV_ESCAPE_H

#include <linux/ioctl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Every RM escape is an _IOC request of this type on /dev/nvidiactl or /dev/nvidiaN;
 * the kernel reads only the number and size fields, not the direction. */
#define GDU_NV_IOCTL_MAGIC 'F'

/* Escape numbers (the _IOC "nr" field). */
enum {
    GDU_NV_ESC_RM_ALLOC_MEMORY = 0x27,
    GDU_NV_ESC_RM_ALLOC_OBJECT = 0x28,
    GDU_NV_ESC_RM_FREE = 0x29,
    GDU_NV_ESC_RM_CONTROL = 0x2A,
    GDU_NV_ESC_RM_ALLOC = 0x2B,
    GDU_NV_ESC_RM_DUP_OBJECT = 0x34,
    GDU_NV_ESC_RM_SHARE = 0x35,
    GDU_NV_ESC_RM_VID_HEAP_CONTROL = 0x4A,
    GDU_NV_ESC_RM_MAP_MEMORY = 0x4E,
    GDU_NV_ESC_RM_UNMAP_MEMORY = 0x4F,
    GDU_NV_ESC_RM_MAP_MEMORY_DMA = 0x57,
    GDU_NV_ESC_RM_UNMAP_MEMORY_DMA = 0x58,
    GDU_NV_ESC_RM_EXPORT_OBJECT_TO_FD = 0x5C,
    GDU_NV_ESC_RM_IMPORT_OBJECT_FROM_FD = 0x5D,
    /* Driver-private escapes start at 200. */
    GDU_NV_ESC_CARD_INFO = 200,
    GDU_NV_ESC_REGISTER_FD = 201,
    GDU_NV_ESC_CHECK_VERSION_STR = 210,
    /* Carries another escape whose block does not fit the _IOC size field. */
    GDU_NV_ESC_IOCTL_XFER_CMD = 211,
    GDU_NV_ESC_ATTACH_GPUS_TO_FD = 212,
};

/* Payload of GDU_NV_ESC_IOCTL_XFER_CMD: the real escape number, size and block. */
typedef struct {
    uint32_t cmd;
    uint32_t size;
    _Alignas(8) uint64_t ptr;
} gdu_nv_ioctl_xfer;

_Static_assert(sizeof(gdu_nv_ioctl_xfer) == 16, "nv_ioctl_xfer_t size");
_Static_assert(offsetof(gdu_nv_ioctl_xfer, size) == 4, "nv_ioctl_xfer_t.size offset");
_Static_assert(offsetof(gdu_nv_ioctl_xfer, ptr) == 8, "nv_ioctl_xfer_t.ptr offset");

/* The request code libcuda passes for escape nr with a parameter block of size bytes. */
static inline unsigned long gdu_nv_ioctl_request(unsigned nr, size_t size)
{
    return (unsigned long)_IOC(_IOC_READ | _IOC_WRITE, GDU_NV_IOCTL_MAGIC, nr, size);
}

/* True when request is an RM escape; then *nr and *size are its number and block size. */
static inline bool gdu_nv_ioctl_decode(unsigned long request, unsigned *nr, size_t *size)
{
    if (_IOC_TYPE(request) != (unsigned)GDU_NV_IOCTL_MAGIC)
        return false;
    *nr = _IOC_NR(request);
    *size = _IOC_SIZE(request);
    return true;
}

#endif
