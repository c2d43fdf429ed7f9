/* NV_ESC_EXPORT_TO_DMABUF_FD: the escape on a GPU's device file that makes
 * a dma-buf of a client's video memory objects. Facts from the open kernel
 * modules (kernel-open/common/inc/nv-ioctl.h, nv-ioctl-numbers.h; the
 * kernel's checks in kernel-open/nvidia/nv.c and nv-dmabuf.c,
 * docs/rdma-model.md section 3). Two layouts over every tag from 515.43.04
 * to 595.45.04: 570.86.15 added mappingType before the handles, which moved
 * them and grew the block; 580.65.06 put bAllowMmap in the padding after it
 * (same size and offsets, so one definition serves both, bAllowMmap 0). The
 * kernel takes the block only at its exact size (nv.c:2744, 580.142). */
#ifndef GDUNLOCK_DRIVERABI_NV_DMABUF_H
#define GDUNLOCK_DRIVERABI_NV_DMABUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* NV_IOCTL_BASE (200) + 17. */
#define GDU_NV_ESC_EXPORT_TO_DMABUF_FD 217u
/* Memory handles one call may carry (NV_DMABUF_EXPORT_MAX_HANDLES); more
 * are added to the same dma-buf by further calls with its fd and an index. */
#define GDU_NV_DMABUF_MAX_HANDLES 128u

enum {
    GDU_NV_DMABUF_MAPPING_DEFAULT = 0,
    GDU_NV_DMABUF_MAPPING_FORCE_PCIE = 1, /* coherent (C2C) systems only */
};

/* From 570.86.15 on. fd: -1 to create, else the dma-buf to add to. */
typedef struct {
    int32_t fd;
    uint32_t h_client;
    uint32_t total_objects, num_objects, index;
    _Alignas(8) uint64_t total_size;
    uint8_t mapping_type;
    uint8_t allow_mmap; /* 580.65.06 on; padding before: left 0 */
    uint32_t handles[GDU_NV_DMABUF_MAX_HANDLES];
    _Alignas(8) uint64_t offsets[GDU_NV_DMABUF_MAX_HANDLES];
    _Alignas(8) uint64_t sizes[GDU_NV_DMABUF_MAX_HANDLES];
    uint32_t status;
} gdu_nv_dmabuf_export;

_Static_assert(sizeof(gdu_nv_dmabuf_export) == 2608, "nv_ioctl_export_to_dma_buf_fd_t size");
_Static_assert(offsetof(gdu_nv_dmabuf_export, h_client) == 4, "hClient offset");
_Static_assert(offsetof(gdu_nv_dmabuf_export, total_objects) == 8, "totalObjects offset");
_Static_assert(offsetof(gdu_nv_dmabuf_export, num_objects) == 12, "numObjects offset");
_Static_assert(offsetof(gdu_nv_dmabuf_export, index) == 16, "index offset");
_Static_assert(offsetof(gdu_nv_dmabuf_export, total_size) == 24, "totalSize offset");
_Static_assert(offsetof(gdu_nv_dmabuf_export, mapping_type) == 32, "mappingType offset");
_Static_assert(offsetof(gdu_nv_dmabuf_export, allow_mmap) == 33, "bAllowMmap offset");
_Static_assert(offsetof(gdu_nv_dmabuf_export, handles) == 36, "handles offset");
_Static_assert(offsetof(gdu_nv_dmabuf_export, offsets) == 552, "offsets offset");
_Static_assert(offsetof(gdu_nv_dmabuf_export, sizes) == 1576, "sizes offset");
_Static_assert(offsetof(gdu_nv_dmabuf_export, status) == 2600, "status offset");

/* 515.43.04 to 565.x: no mappingType. */
typedef struct {
    int32_t fd;
    uint32_t h_client;
    uint32_t total_objects, num_objects, index;
    _Alignas(8) uint64_t total_size;
    uint32_t handles[GDU_NV_DMABUF_MAX_HANDLES];
    _Alignas(8) uint64_t offsets[GDU_NV_DMABUF_MAX_HANDLES];
    _Alignas(8) uint64_t sizes[GDU_NV_DMABUF_MAX_HANDLES];
    uint32_t status;
} gdu_nv_dmabuf_export_515;

_Static_assert(sizeof(gdu_nv_dmabuf_export_515) == 2600, "nv_ioctl_export_to_dma_buf_fd_t size");
_Static_assert(offsetof(gdu_nv_dmabuf_export_515, total_size) == 24, "totalSize offset");
_Static_assert(offsetof(gdu_nv_dmabuf_export_515, handles) == 32, "handles offset");
_Static_assert(offsetof(gdu_nv_dmabuf_export_515, offsets) == 544, "offsets offset");
_Static_assert(offsetof(gdu_nv_dmabuf_export_515, sizes) == 1568, "sizes offset");
_Static_assert(offsetof(gdu_nv_dmabuf_export_515, status) == 2592, "status offset");

/* Copies the fields both layouts have from block in to block out (either
 * layout each; mapping_type and allow_mmap have no place before 570.86.15). */
#define GDU_NV_DMABUF_COPY_SHARED(out, in)                                                         \
    do {                                                                                           \
        (out)->fd = (in)->fd;                                                                      \
        (out)->h_client = (in)->h_client;                                                          \
        (out)->total_objects = (in)->total_objects;                                                \
        (out)->num_objects = (in)->num_objects;                                                    \
        (out)->index = (in)->index;                                                                \
        (out)->total_size = (in)->total_size;                                                      \
        memcpy((out)->handles, (in)->handles, sizeof(out)->handles);                               \
        memcpy((out)->offsets, (in)->offsets, sizeof(out)->offsets);                               \
        memcpy((out)->sizes, (in)->sizes, sizeof(out)->sizes);                                     \
        (out)->status = (in)->status;                                                              \
    } while (0)

/* Whether driver version v (major, minor, patch) takes gdu_nv_dmabuf_export
 * (570.86.15 on) rather than gdu_nv_dmabuf_export_515. */
static inline bool gdu_nv_dmabuf_has_mapping_type(const unsigned v[3])
{
    return v[0] != 570 ? v[0] > 570 : v[1] != 86 ? v[1] > 86 : v[2] >= 15;
}

#endif
