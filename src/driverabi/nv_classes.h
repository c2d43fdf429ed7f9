/* RM class numbers and the allocation parameter blocks gdunlock reads or
 * builds. Our own definitions of facts from the open kernel modules' class
 * headers (cl0000.h, cl0040.h, cl0080.h, cl2080.h, cl90f1.h, cl503c.h, ...),
 * branch 580. */
#ifndef GDUNLOCK_DRIVERABI_NV_CLASSES_H
#define GDUNLOCK_DRIVERABI_NV_CLASSES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    /* Clients: userspace allocations of any of these become NV01_ROOT_CLIENT. */
    GDU_NV01_ROOT = 0x0000,
    GDU_NV01_ROOT_NON_PRIV = 0x0001,
    GDU_NV01_ROOT_CLIENT = 0x0041,
    /* A GPU (or SLI group) inside a client, and one GPU below it. */
    GDU_NV01_DEVICE_0 = 0x0080,
    GDU_NV20_SUBDEVICE_0 = 0x2080,
    /* A GPU virtual address space, child of a device. */
    GDU_FERMI_VASPACE_A = 0x90f1,
    /* ThirdPartyP2P: the object through which third-party drivers (nvidia-fs,
     * nvidia-peermem) find registered GPU memory. Child of a subdevice. */
    GDU_NV50_THIRD_PARTY_P2P = 0x503c,
    /* Memory classes. */
    GDU_NV01_MEMORY_SYSTEM = 0x003e,
    GDU_NV01_MEMORY_LOCAL_PRIVILEGED = 0x003f,
    GDU_NV01_MEMORY_LOCAL_USER = 0x0040,
    GDU_NV01_MEMORY_VIRTUAL = 0x0070,
    GDU_NV01_MEMORY_SYSTEM_OS_DESCRIPTOR = 0x0071,
    GDU_NV01_MEMORY_LIST_FBMEM = 0x0082,
    GDU_NV01_MEMORY_LOCAL_PHYSICAL = 0x00c2,
    GDU_NV_MEMORY_EXPORT = 0x00e0,
    GDU_NV01_MEMORY_FLA = 0x00f3,
    GDU_NV_MEMORY_FABRIC = 0x00f8,
    GDU_NV_MEMORY_MULTICAST_FABRIC = 0x00fd,
    GDU_NV_MEMORY_MAPPER = 0x00fe,
    GDU_NV50_MEMORY_VIRTUAL = 0x50a0,
    GDU_NV01_MEMORY_DEVICELESS = 0x90ce,
};

static inline bool gdu_nv_class_is_client(uint32_t cls)
{
    return cls == GDU_NV01_ROOT || cls == GDU_NV01_ROOT_NON_PRIV || cls == GDU_NV01_ROOT_CLIENT;
}

/* Alloc parameters of NV01_DEVICE_0: deviceId is the device instance (0..31). */
typedef struct {
    uint32_t deviceId;
    uint32_t hClientShare;
    uint32_t hTargetClient;
    uint32_t hTargetDevice;
    uint32_t flags;
    _Alignas(8) uint64_t vaSpaceSize;
    _Alignas(8) uint64_t vaStartInternal;
    _Alignas(8) uint64_t vaLimitInternal;
    uint32_t vaMode;
} gdu_nv0080_alloc_params;

_Static_assert(sizeof(gdu_nv0080_alloc_params) == 56, "NV0080_ALLOC_PARAMETERS size");
_Static_assert(offsetof(gdu_nv0080_alloc_params, flags) == 16, "NV0080.flags offset");
_Static_assert(offsetof(gdu_nv0080_alloc_params, vaSpaceSize) == 24, "NV0080.vaSpaceSize offset");
_Static_assert(offsetof(gdu_nv0080_alloc_params, vaMode) == 48, "NV0080.vaMode offset");

/* Alloc parameters of FERMI_VASPACE_A (NV_VASPACE_ALLOCATION_PARAMETERS,
 * nvos.h); index 0 (NEW) and zeros: a new VA space of the default size. */
typedef struct {
    uint32_t index;
    uint32_t flags;
    _Alignas(8) uint64_t vaSize;
    _Alignas(8) uint64_t vaStartInternal;
    _Alignas(8) uint64_t vaLimitInternal;
    uint32_t bigPageSize;
    _Alignas(8) uint64_t vaBase;
    uint32_t pasid;
} gdu_nv_vaspace_alloc_params;

_Static_assert(sizeof(gdu_nv_vaspace_alloc_params) == 56, "NV_VASPACE_ALLOCATION_PARAMETERS size");
_Static_assert(offsetof(gdu_nv_vaspace_alloc_params, vaSize) == 8, "NV_VASPACE.vaSize offset");
_Static_assert(offsetof(gdu_nv_vaspace_alloc_params, bigPageSize) == 32,
               "NV_VASPACE.bigPageSize offset");
_Static_assert(offsetof(gdu_nv_vaspace_alloc_params, vaBase) == 40, "NV_VASPACE.vaBase offset");
_Static_assert(offsetof(gdu_nv_vaspace_alloc_params, pasid) == 48, "NV_VASPACE.pasid offset");

/* Alloc parameters of NV20_SUBDEVICE_0. */
typedef struct {
    uint32_t subDeviceId;
} gdu_nv2080_alloc_params;

_Static_assert(sizeof(gdu_nv2080_alloc_params) == 4, "NV2080_ALLOC_PARAMETERS size");

/* Alloc parameters of NV50_THIRD_PARTY_P2P; flags bits 1:0 are the type. */
typedef struct {
    uint32_t flags;
} gdu_nv503c_alloc_params;

_Static_assert(sizeof(gdu_nv503c_alloc_params) == 4, "NV503C_ALLOC_PARAMETERS size");

enum {
    GDU_NV503C_ALLOC_FLAGS_TYPE_MASK = 0x3,
    GDU_NV503C_ALLOC_FLAGS_TYPE_PROPRIETARY = 0x0,
    GDU_NV503C_ALLOC_FLAGS_TYPE_BAR1 = 0x1,
    GDU_NV503C_ALLOC_FLAGS_TYPE_NVLINK = 0x2,
};

#endif
