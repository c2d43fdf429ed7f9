/* RM memory objects as a CPU mapping of video memory needs them: allocation
 * of NV01_MEMORY_LOCAL_USER (NV_MEMORY_ALLOCATION_PARAMS with NVOS32
 * attributes), NV_ESC_RM_MAP_MEMORY / NV_ESC_RM_UNMAP_MEMORY (NVOS33 with
 * the file descriptor the mapping is then mmap()ed from, NVOS34), and the
 * NVOS02 flags of an OS-descriptor allocation (NV01_MEMORY_SYSTEM_OS_DESCRIPTOR
 * through NV_ESC_RM_ALLOC_MEMORY), which is what cuMemHostRegister issues.
 * Our own definitions of the layouts in open-gpu-kernel-modules 580.142
 * (src/common/sdk/nvidia/inc/nvos.h, src/nvidia/arch/nvalloc/unix/include/
 * nv-unix-nvos-params-wrappers.h); every size and offset is asserted. */
#ifndef GDUNLOCK_DRIVERABI_RM_MEMORY_H
#define GDUNLOCK_DRIVERABI_RM_MEMORY_H

#include <stddef.h>
#include <stdint.h>

/* Alloc parameters of NV01_MEMORY_LOCAL_USER (and the other heap classes). */
typedef struct {
    uint32_t owner; /* in: any tag of the allocator's choosing */
    uint32_t type;  /* in: GDU_NVOS32_TYPE_* */
    uint32_t flags; /* in: GDU_NVOS32_ALLOC_FLAGS_* */
    uint32_t width, height;
    int32_t pitch;
    uint32_t attr, attr2; /* in/out: GDU_NVOS32_ATTR_* / _ATTR2_* fields */
    uint32_t format, comprCovg, zcullCovg;
    _Alignas(8) uint64_t rangeLo;
    _Alignas(8) uint64_t rangeHi;
    _Alignas(8) uint64_t size;      /* in/out */
    _Alignas(8) uint64_t alignment; /* in, with GDU_NVOS32_ALLOC_FLAGS_ALIGNMENT_FORCE */
    _Alignas(8) uint64_t offset;    /* out: offset in video memory */
    _Alignas(8) uint64_t limit;     /* out */
    _Alignas(8) uint64_t address;   /* out */
    uint32_t ctagOffset;
    uint32_t hVASpace;
    uint32_t internalflags;
    uint32_t tag;
    int32_t numaNode;
} gdu_nv_memory_alloc_params;

_Static_assert(sizeof(gdu_nv_memory_alloc_params) == 128, "NV_MEMORY_ALLOCATION_PARAMS size");
_Static_assert(offsetof(gdu_nv_memory_alloc_params, flags) == 8,
               "NV_MEMORY_ALLOCATION_PARAMS.flags offset");
_Static_assert(offsetof(gdu_nv_memory_alloc_params, attr) == 24,
               "NV_MEMORY_ALLOCATION_PARAMS.attr offset");
_Static_assert(offsetof(gdu_nv_memory_alloc_params, attr2) == 28,
               "NV_MEMORY_ALLOCATION_PARAMS.attr2 offset");
_Static_assert(offsetof(gdu_nv_memory_alloc_params, rangeLo) == 48,
               "NV_MEMORY_ALLOCATION_PARAMS.rangeLo offset");
_Static_assert(offsetof(gdu_nv_memory_alloc_params, size) == 64,
               "NV_MEMORY_ALLOCATION_PARAMS.size offset");
_Static_assert(offsetof(gdu_nv_memory_alloc_params, alignment) == 72,
               "NV_MEMORY_ALLOCATION_PARAMS.alignment offset");
_Static_assert(offsetof(gdu_nv_memory_alloc_params, offset) == 80,
               "NV_MEMORY_ALLOCATION_PARAMS.offset offset");
_Static_assert(offsetof(gdu_nv_memory_alloc_params, limit) == 88,
               "NV_MEMORY_ALLOCATION_PARAMS.limit offset");
_Static_assert(offsetof(gdu_nv_memory_alloc_params, address) == 96,
               "NV_MEMORY_ALLOCATION_PARAMS.address offset");
_Static_assert(offsetof(gdu_nv_memory_alloc_params, ctagOffset) == 104,
               "NV_MEMORY_ALLOCATION_PARAMS.ctagOffset offset");
_Static_assert(offsetof(gdu_nv_memory_alloc_params, hVASpace) == 108,
               "NV_MEMORY_ALLOCATION_PARAMS.hVASpace offset");
_Static_assert(offsetof(gdu_nv_memory_alloc_params, internalflags) == 112,
               "NV_MEMORY_ALLOCATION_PARAMS.internalflags offset");
_Static_assert(offsetof(gdu_nv_memory_alloc_params, tag) == 116,
               "NV_MEMORY_ALLOCATION_PARAMS.tag offset");
_Static_assert(offsetof(gdu_nv_memory_alloc_params, numaNode) == 120,
               "NV_MEMORY_ALLOCATION_PARAMS.numaNode offset");

/* NVOS32 surface type, attribute fields (bits hi:lo of attr) and alloc flags. */
enum {
    GDU_NVOS32_TYPE_IMAGE = 0,
    GDU_NVOS32_ATTR_PAGE_SIZE_SHIFT = 23, /* 24:23 */
    GDU_NVOS32_ATTR_PAGE_SIZE_DEFAULT = 0,
    GDU_NVOS32_ATTR_LOCATION_SHIFT = 25, /* 26:25 */
    GDU_NVOS32_ATTR_LOCATION_VIDMEM = 0,
    GDU_NVOS32_ATTR_PHYSICALITY_SHIFT = 27, /* 28:27 */
    GDU_NVOS32_ATTR_PHYSICALITY_CONTIGUOUS = 2,
    GDU_NVOS32_ATTR_COHERENCY_SHIFT = 29, /* 31:29 */
    GDU_NVOS32_ATTR_COHERENCY_UNCACHED = 0,
    GDU_NVOS32_ALLOC_FLAGS_ALIGNMENT_FORCE = 0x00000100,
};

/* NV_ESC_RM_MAP_MEMORY (NVOS33): maps hMemory (under hDevice, a device or
 * subdevice) for the CPU. On Linux RM answers the bus address of the BAR
 * window in pLinearAddress and arms an mmap context on the /dev/nvidiaN file
 * passed as fd; the caller then mmap()s length bytes of that file at offset 0
 * (kernel-open/nvidia/nv-mmap.c refuses any other offset). One context per
 * file: a second map on the same file answers NV_ERR_STATE_IN_USE. */
typedef struct {
    uint32_t hClient;
    uint32_t hDevice;
    uint32_t hMemory;
    _Alignas(8) uint64_t offset;
    _Alignas(8) uint64_t length;
    _Alignas(8) uint64_t pLinearAddress; /* out */
    uint32_t status;
    uint32_t flags; /* GDU_NVOS33_FLAGS_*; RM forces the caching type to its default */
} gdu_nvos33;

_Static_assert(sizeof(gdu_nvos33) == 48, "NVOS33 size");
_Static_assert(offsetof(gdu_nvos33, hMemory) == 8, "NVOS33.hMemory offset");
_Static_assert(offsetof(gdu_nvos33, offset) == 16, "NVOS33.offset offset");
_Static_assert(offsetof(gdu_nvos33, length) == 24, "NVOS33.length offset");
_Static_assert(offsetof(gdu_nvos33, pLinearAddress) == 32, "NVOS33.pLinearAddress offset");
_Static_assert(offsetof(gdu_nvos33, status) == 40, "NVOS33.status offset");
_Static_assert(offsetof(gdu_nvos33, flags) == 44, "NVOS33.flags offset");

typedef struct {
    gdu_nvos33 params;
    int32_t fd;
} gdu_nvos33_with_fd;

_Static_assert(sizeof(gdu_nvos33_with_fd) == 56, "nv_ioctl_nvos33_parameters_with_fd size");
_Static_assert(offsetof(gdu_nvos33_with_fd, fd) == 48,
               "nv_ioctl_nvos33_parameters_with_fd.fd offset");

enum {
    GDU_NVOS33_FLAGS_ACCESS_READ_WRITE = 0, /* 1:0 */
};

/* NV_ESC_RM_UNMAP_MEMORY (NVOS34): pLinearAddress as RM_MAP_MEMORY answered it. */
typedef struct {
    uint32_t hClient;
    uint32_t hDevice;
    uint32_t hMemory;
    _Alignas(8) uint64_t pLinearAddress;
    uint32_t status;
    uint32_t flags;
} gdu_nvos34;

_Static_assert(sizeof(gdu_nvos34) == 32, "NVOS34 size");
_Static_assert(offsetof(gdu_nvos34, hMemory) == 8, "NVOS34.hMemory offset");
_Static_assert(offsetof(gdu_nvos34, pLinearAddress) == 16, "NVOS34.pLinearAddress offset");
_Static_assert(offsetof(gdu_nvos34, status) == 24, "NVOS34.status offset");
_Static_assert(offsetof(gdu_nvos34, flags) == 28, "NVOS34.flags offset");

/* NVOS02 flags (gdu_nvos02.flags, nvos.h) of an OS descriptor of I/O memory:
 * location PCI (11:8 = 0), coherency uncached (15:12 = 0), physically
 * contiguous (7:4 = 0), not mapped by RM (31:30 = NO_MAP). RM's I/O-memory
 * path (osCreateOsDescriptorFromIoMemory) accepts only uncached contiguous. */
enum {
    GDU_NVOS02_FLAGS_PHYSICALITY_CONTIGUOUS = 0u << 4,
    GDU_NVOS02_FLAGS_LOCATION_PCI = 0u << 8,
    GDU_NVOS02_FLAGS_COHERENCY_UNCACHED = 0u << 12,
    GDU_NVOS02_FLAGS_MAPPING_NO_MAP = 1 << 30,
};

#define GDU_NVOS02_FLAGS_IO_MEMORY                                                                 \
    ((uint32_t)(GDU_NVOS02_FLAGS_PHYSICALITY_CONTIGUOUS | GDU_NVOS02_FLAGS_LOCATION_PCI |          \
                GDU_NVOS02_FLAGS_COHERENCY_UNCACHED | GDU_NVOS02_FLAGS_MAPPING_NO_MAP))

#endif
