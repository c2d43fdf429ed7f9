/* RM escape parameter blocks (NVOSxx), as the kernel copies them in and out.
 * Our own definitions of the layouts in the open kernel modules' nvos.h and
 * nv-unix-nvos-params-wrappers.h (branch 580). Handles are 32-bit; pointers
 * travel as 64-bit integers aligned to 8. */
#ifndef GDUNLOCK_DRIVERABI_NVOS_H
#define GDUNLOCK_DRIVERABI_NVOS_H

#include <stddef.h>
#include <stdint.h>

typedef uint32_t gdu_nv_handle;

/* RM_FREE (NVOS00): frees hObjectOld and every object below it. hObjectOld ==
 * hRoot frees the whole client. */
typedef struct {
    gdu_nv_handle hRoot;
    gdu_nv_handle hObjectParent;
    gdu_nv_handle hObjectOld;
    uint32_t status;
} gdu_nvos00;

_Static_assert(sizeof(gdu_nvos00) == 16, "NVOS00 size");
_Static_assert(offsetof(gdu_nvos00, hObjectOld) == 8, "NVOS00.hObjectOld offset");
_Static_assert(offsetof(gdu_nvos00, status) == 12, "NVOS00.status offset");

/* RM_ALLOC_MEMORY (NVOS02 followed by the fd to map through). */
typedef struct {
    gdu_nv_handle hRoot;
    gdu_nv_handle hObjectParent;
    gdu_nv_handle hObjectNew;
    uint32_t hClass;
    uint32_t flags;
    _Alignas(8) uint64_t pMemory;
    _Alignas(8) uint64_t limit;
    uint32_t status;
} gdu_nvos02;

_Static_assert(sizeof(gdu_nvos02) == 48, "NVOS02 size");
_Static_assert(offsetof(gdu_nvos02, pMemory) == 24, "NVOS02.pMemory offset");
_Static_assert(offsetof(gdu_nvos02, limit) == 32, "NVOS02.limit offset");
_Static_assert(offsetof(gdu_nvos02, status) == 40, "NVOS02.status offset");

typedef struct {
    gdu_nvos02 params;
    int32_t fd;
} gdu_nvos02_with_fd;

_Static_assert(sizeof(gdu_nvos02_with_fd) == 56, "nv_ioctl_nvos02_parameters_with_fd size");
_Static_assert(offsetof(gdu_nvos02_with_fd, fd) == 48,
               "nv_ioctl_nvos02_parameters_with_fd.fd offset");

/* RM_ALLOC, short form (NVOS21). hObjectNew == 0 asks RM to generate a handle,
 * which it writes back. For client allocations (NV01_ROOT*) hObjectNew
 * receives the new client handle. */
typedef struct {
    gdu_nv_handle hRoot;
    gdu_nv_handle hObjectParent;
    gdu_nv_handle hObjectNew;
    uint32_t hClass;
    _Alignas(8) uint64_t pAllocParms;
    uint32_t paramsSize;
    uint32_t status;
} gdu_nvos21;

_Static_assert(sizeof(gdu_nvos21) == 32, "NVOS21 size");
_Static_assert(offsetof(gdu_nvos21, hObjectNew) == 8, "NVOS21.hObjectNew offset");
_Static_assert(offsetof(gdu_nvos21, hClass) == 12, "NVOS21.hClass offset");
_Static_assert(offsetof(gdu_nvos21, pAllocParms) == 16, "NVOS21.pAllocParms offset");
_Static_assert(offsetof(gdu_nvos21, paramsSize) == 24, "NVOS21.paramsSize offset");
_Static_assert(offsetof(gdu_nvos21, status) == 28, "NVOS21.status offset");

/* RM_ALLOC, long form with requested access rights (NVOS64); what libcuda 580
 * uses. RM tells the two forms apart by the ioctl size field alone. */
typedef struct {
    gdu_nv_handle hRoot;
    gdu_nv_handle hObjectParent;
    gdu_nv_handle hObjectNew;
    uint32_t hClass;
    _Alignas(8) uint64_t pAllocParms;
    _Alignas(8) uint64_t pRightsRequested;
    uint32_t paramsSize;
    uint32_t flags;
    uint32_t status;
} gdu_nvos64;

_Static_assert(sizeof(gdu_nvos64) == 48, "NVOS64 size");
_Static_assert(offsetof(gdu_nvos64, pAllocParms) == 16, "NVOS64.pAllocParms offset");
_Static_assert(offsetof(gdu_nvos64, pRightsRequested) == 24, "NVOS64.pRightsRequested offset");
_Static_assert(offsetof(gdu_nvos64, paramsSize) == 32, "NVOS64.paramsSize offset");
_Static_assert(offsetof(gdu_nvos64, flags) == 36, "NVOS64.flags offset");
_Static_assert(offsetof(gdu_nvos64, status) == 40, "NVOS64.status offset");

/* RM_CONTROL (NVOS54): command cmd on object hObject of client hClient. */
typedef struct {
    gdu_nv_handle hClient;
    gdu_nv_handle hObject;
    uint32_t cmd;
    uint32_t flags;
    _Alignas(8) uint64_t params;
    uint32_t paramsSize;
    uint32_t status;
} gdu_nvos54;

_Static_assert(sizeof(gdu_nvos54) == 32, "NVOS54 size");
_Static_assert(offsetof(gdu_nvos54, cmd) == 8, "NVOS54.cmd offset");
_Static_assert(offsetof(gdu_nvos54, flags) == 12, "NVOS54.flags offset");
_Static_assert(offsetof(gdu_nvos54, params) == 16, "NVOS54.params offset");
_Static_assert(offsetof(gdu_nvos54, paramsSize) == 24, "NVOS54.paramsSize offset");
_Static_assert(offsetof(gdu_nvos54, status) == 28, "NVOS54.status offset");

/* RM_DUP_OBJECT (NVOS55): duplicates hObjectSrc of hClientSrc as hObject under
 * hParent of hClient (hObject == 0: RM generates it and writes it back). */
typedef struct {
    gdu_nv_handle hClient;
    gdu_nv_handle hParent;
    gdu_nv_handle hObject;
    gdu_nv_handle hClientSrc;
    gdu_nv_handle hObjectSrc;
    uint32_t flags;
    uint32_t status;
} gdu_nvos55;

_Static_assert(sizeof(gdu_nvos55) == 28, "NVOS55 size");
_Static_assert(offsetof(gdu_nvos55, hObject) == 8, "NVOS55.hObject offset");
_Static_assert(offsetof(gdu_nvos55, hObjectSrc) == 16, "NVOS55.hObjectSrc offset");
_Static_assert(offsetof(gdu_nvos55, status) == 24, "NVOS55.status offset");

#endif
