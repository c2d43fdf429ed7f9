/* Controls of the ThirdPartyP2P object (class NV50_THIRD_PARTY_P2P) and their
 * parameter blocks. Our own definitions of the facts in the open kernel
 * modules' ctrl503c.h (branch 580). Kernel rules (third_party_p2p_ctrl.c):
 * REGISTER_VIDMEM needs address, size and offset 64 KiB aligned, size > 0,
 * offset + size within the memory, the memory under the same device as the
 * NV503C's subdevice; registrations are keyed by hMemory (and their VA ranges
 * may not overlap), so a second one returns NV_ERR_INSERT_DUPLICATE_NAME. */
#ifndef GDUNLOCK_DRIVERABI_NV503C_H
#define GDUNLOCK_DRIVERABI_NV503C_H

#include <stddef.h>
#include <stdint.h>

enum {
    GDU_NV503C_CTRL_CMD_REGISTER_VA_SPACE = 0x503c0102,
    GDU_NV503C_CTRL_CMD_UNREGISTER_VA_SPACE = 0x503c0103,
    GDU_NV503C_CTRL_CMD_REGISTER_VIDMEM = 0x503c0104,
    GDU_NV503C_CTRL_CMD_UNREGISTER_VIDMEM = 0x503c0105,
    GDU_NV503C_CTRL_CMD_REGISTER_PID = 0x503c0106,
};

/* Alignment RM demands of registered ranges (NVRM_P2P_PAGESIZE_BIG_64K). */
#define GDU_NV503C_VIDMEM_ALIGN ((uint64_t)64 * 1024)

typedef struct {
    uint32_t hVASpace;
    _Alignas(8) uint64_t vaSpaceToken; /* out */
} gdu_nv503c_register_va_space;

_Static_assert(sizeof(gdu_nv503c_register_va_space) == 16,
               "NV503C_CTRL_REGISTER_VA_SPACE_PARAMS size");
_Static_assert(offsetof(gdu_nv503c_register_va_space, vaSpaceToken) == 8,
               "NV503C_CTRL_REGISTER_VA_SPACE_PARAMS.vaSpaceToken offset");

typedef struct {
    uint32_t hVASpace;
} gdu_nv503c_unregister_va_space;

_Static_assert(sizeof(gdu_nv503c_unregister_va_space) == 4,
               "NV503C_CTRL_UNREGISTER_VA_SPACE_PARAMS size");

typedef struct {
    uint32_t hMemory;
    _Alignas(8) uint64_t address; /* GPU VA of the registered range */
    _Alignas(8) uint64_t size;
    _Alignas(8) uint64_t offset; /* into the memory object */
} gdu_nv503c_register_vidmem;

_Static_assert(sizeof(gdu_nv503c_register_vidmem) == 32, "NV503C_CTRL_REGISTER_VIDMEM_PARAMS size");
_Static_assert(offsetof(gdu_nv503c_register_vidmem, address) == 8,
               "REGISTER_VIDMEM.address offset");
_Static_assert(offsetof(gdu_nv503c_register_vidmem, size) == 16, "REGISTER_VIDMEM.size offset");
_Static_assert(offsetof(gdu_nv503c_register_vidmem, offset) == 24, "REGISTER_VIDMEM.offset offset");

typedef struct {
    uint32_t hMemory;
} gdu_nv503c_unregister_vidmem;

_Static_assert(sizeof(gdu_nv503c_unregister_vidmem) == 4,
               "NV503C_CTRL_UNREGISTER_VIDMEM_PARAMS size");

#endif
