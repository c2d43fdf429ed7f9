/* NVIDIA UVM (/dev/nvidia-uvm) ioctls gdunlock watches: request numbers,
 * parameter blocks, and the version-dependent layout of
 * UVM_MAP_EXTERNAL_ALLOCATION. Our own definitions of facts from the open
 * kernel modules' uvm_ioctl.h, uvm_linux_ioctl.h and uvm_types.h.
 * UVM requests are plain numbers, not _IOC codes. */
#ifndef GDUNLOCK_DRIVERABI_UVM_ABI_H
#define GDUNLOCK_DRIVERABI_UVM_ABI_H

#include <stddef.h>
#include <stdint.h>

enum {
    GDU_UVM_REGISTER_GPU_VASPACE = 25,
    GDU_UVM_UNREGISTER_GPU_VASPACE = 26,
    GDU_UVM_MAP_EXTERNAL_ALLOCATION = 33,
    GDU_UVM_FREE = 34,
    GDU_UVM_REGISTER_GPU = 37,
    GDU_UVM_UNREGISTER_GPU = 38,
    GDU_UVM_UNMAP_EXTERNAL = 66,
    GDU_UVM_CREATE_EXTERNAL_RANGE = 73,
    GDU_UVM_MM_INITIALIZE = 75,
    GDU_UVM_ALLOC_DEVICE_P2P = 78,
    GDU_UVM_INITIALIZE = 0x30000001,
    GDU_UVM_DEINITIALIZE = 0x30000002,
};

typedef struct {
    uint8_t uuid[16];
} gdu_nv_processor_uuid;

/* One entry of UVM_MAP_EXTERNAL_ALLOCATION's per-GPU array (UvmGpuMappingAttributes). */
typedef struct {
    gdu_nv_processor_uuid gpuUuid;
    uint32_t gpuMappingType;
    uint32_t gpuCachingType;
    uint32_t gpuFormatType;
    uint32_t gpuElementBits;
    uint32_t gpuCompressionType;
} gdu_uvm_gpu_mapping_attributes;

_Static_assert(sizeof(gdu_uvm_gpu_mapping_attributes) == 36, "UvmGpuMappingAttributes size");

/* UVM_MAP_EXTERNAL_ALLOCATION_PARAMS with a per-GPU array of n entries. The
 * array has UVM_MAX_GPUS entries: 32 (NV_MAX_DEVICES) up to driver 550.40.07,
 * 256 (32 devices x 8 subdevices / sub-processors) from 550.40.53 on. */
#define GDU_UVM_MAP_EXTERNAL_PARAMS(n)                                                             \
    struct {                                                                                       \
        _Alignas(8) uint64_t base;                                                                 \
        _Alignas(8) uint64_t length;                                                               \
        _Alignas(8) uint64_t offset;                                                               \
        gdu_uvm_gpu_mapping_attributes perGpuAttributes[n];                                        \
        _Alignas(8) uint64_t gpuAttributesCount;                                                   \
        int32_t rmCtrlFd;                                                                          \
        uint32_t hClient;                                                                          \
        uint32_t hMemory;                                                                          \
        uint32_t rmStatus;                                                                         \
    }

typedef GDU_UVM_MAP_EXTERNAL_PARAMS(32) gdu_uvm_map_external_params_32;
typedef GDU_UVM_MAP_EXTERNAL_PARAMS(256) gdu_uvm_map_external_params_256;

_Static_assert(offsetof(gdu_uvm_map_external_params_32, perGpuAttributes) == 24,
               "perGpuAttributes offset");
_Static_assert(offsetof(gdu_uvm_map_external_params_32, gpuAttributesCount) == 1176,
               "32: count offset");
_Static_assert(offsetof(gdu_uvm_map_external_params_32, rmCtrlFd) == 1184, "32: rmCtrlFd offset");
_Static_assert(offsetof(gdu_uvm_map_external_params_32, hClient) == 1188, "32: hClient offset");
_Static_assert(offsetof(gdu_uvm_map_external_params_32, hMemory) == 1192, "32: hMemory offset");
_Static_assert(offsetof(gdu_uvm_map_external_params_32, rmStatus) == 1196, "32: rmStatus offset");
_Static_assert(sizeof(gdu_uvm_map_external_params_32) == 1200, "32: size");
_Static_assert(offsetof(gdu_uvm_map_external_params_256, gpuAttributesCount) == 9240,
               "256: count offset");
_Static_assert(offsetof(gdu_uvm_map_external_params_256, rmCtrlFd) == 9248, "256: rmCtrlFd offset");
_Static_assert(offsetof(gdu_uvm_map_external_params_256, hClient) == 9252, "256: hClient offset");
_Static_assert(offsetof(gdu_uvm_map_external_params_256, hMemory) == 9256, "256: hMemory offset");
_Static_assert(offsetof(gdu_uvm_map_external_params_256, rmStatus) == 9260, "256: rmStatus offset");
_Static_assert(sizeof(gdu_uvm_map_external_params_256) == 9264, "256: size");

/* UVM_REGISTER_GPU_VASPACE: the GPU VA space (a FERMI_VASPACE_A of the RM
 * client) that UVM maps into for that GPU. libcuda registers the same one
 * with its ThirdPartyP2P object. */
typedef struct {
    gdu_nv_processor_uuid gpuUuid;
    int32_t rmCtrlFd;
    uint32_t hClient;
    uint32_t hVaSpace;
    uint32_t rmStatus;
} gdu_uvm_register_gpu_vaspace_params;

_Static_assert(sizeof(gdu_uvm_register_gpu_vaspace_params) == 32,
               "UVM_REGISTER_GPU_VASPACE_PARAMS size");
_Static_assert(offsetof(gdu_uvm_register_gpu_vaspace_params, rmCtrlFd) == 16,
               "REGISTER_GPU_VASPACE.rmCtrlFd offset");
_Static_assert(offsetof(gdu_uvm_register_gpu_vaspace_params, hClient) == 20,
               "REGISTER_GPU_VASPACE.hClient offset");
_Static_assert(offsetof(gdu_uvm_register_gpu_vaspace_params, hVaSpace) == 24,
               "REGISTER_GPU_VASPACE.hVaSpace offset");
_Static_assert(offsetof(gdu_uvm_register_gpu_vaspace_params, rmStatus) == 28,
               "REGISTER_GPU_VASPACE.rmStatus offset");

/* UVM_FREE: frees the VA range starting at base (an external mapping included). */
typedef struct {
    _Alignas(8) uint64_t base;
    _Alignas(8) uint64_t length;
    uint32_t rmStatus;
} gdu_uvm_free_params;

_Static_assert(sizeof(gdu_uvm_free_params) == 24, "UVM_FREE_PARAMS size");
_Static_assert(offsetof(gdu_uvm_free_params, rmStatus) == 16, "UVM_FREE_PARAMS.rmStatus offset");

/* UVM_UNMAP_EXTERNAL: unmaps [base, base+length) from one GPU. */
typedef struct {
    _Alignas(8) uint64_t base;
    _Alignas(8) uint64_t length;
    gdu_nv_processor_uuid gpuUuid;
    uint32_t rmStatus;
} gdu_uvm_unmap_external_params;

_Static_assert(sizeof(gdu_uvm_unmap_external_params) == 40, "UVM_UNMAP_EXTERNAL_PARAMS size");
_Static_assert(offsetof(gdu_uvm_unmap_external_params, rmStatus) == 32,
               "UVM_UNMAP_EXTERNAL.rmStatus offset");

typedef struct {
    _Alignas(8) uint64_t flags;
    uint32_t rmStatus;
} gdu_uvm_initialize_params;

_Static_assert(sizeof(gdu_uvm_initialize_params) == 16, "UVM_INITIALIZE_PARAMS size");

/* UVM_ALLOC_DEVICE_P2P (uvm_ioctl.h, open modules >= 565; the route of
 * cuFile's P2PDMA mode): makes [base, base + length) of the process's UVM
 * range, mmap-able from the UVM file, stand for the pages of RM memory
 * hMemory (of hClient, from offset) on the GPU gpuUuid, as PCI P2PDMA pages
 * of its static BAR1. UVM answers (uvm_va_range_device_p2p.c:523-548, 580.142):
 * NV_ERR_INVALID_ARGUMENT for a range not page aligned, NV_ERR_INVALID_DEVICE
 * for a GPU not registered in this UVM file, NV_ERR_NOT_SUPPORTED where the
 * GPU's P2PDMA pages were never made (a kernel without CONFIG_PCI_P2PDMA, no
 * static BAR1, or BAR1 mapped write-combined: uvm_pmm_gpu.c:3477-3560),
 * NV_ERR_ILLEGAL_ACTION on a UVM file not initialised. */
typedef struct {
    _Alignas(8) uint64_t base;
    _Alignas(8) uint64_t length;
    _Alignas(8) uint64_t offset;
    gdu_nv_processor_uuid gpuUuid;
    int32_t rmCtrlFd;
    uint32_t hClient;
    uint32_t hMemory;
    uint32_t rmStatus;
} gdu_uvm_alloc_device_p2p_params;

_Static_assert(sizeof(gdu_uvm_alloc_device_p2p_params) == 56, "UVM_ALLOC_DEVICE_P2P_PARAMS size");
_Static_assert(offsetof(gdu_uvm_alloc_device_p2p_params, length) == 8,
               "ALLOC_DEVICE_P2P.length offset");
_Static_assert(offsetof(gdu_uvm_alloc_device_p2p_params, offset) == 16,
               "ALLOC_DEVICE_P2P.offset offset");
_Static_assert(offsetof(gdu_uvm_alloc_device_p2p_params, gpuUuid) == 24,
               "ALLOC_DEVICE_P2P.gpuUuid offset");
_Static_assert(offsetof(gdu_uvm_alloc_device_p2p_params, rmCtrlFd) == 40,
               "ALLOC_DEVICE_P2P.rmCtrlFd offset");
_Static_assert(offsetof(gdu_uvm_alloc_device_p2p_params, hClient) == 44,
               "ALLOC_DEVICE_P2P.hClient offset");
_Static_assert(offsetof(gdu_uvm_alloc_device_p2p_params, hMemory) == 48,
               "ALLOC_DEVICE_P2P.hMemory offset");
_Static_assert(offsetof(gdu_uvm_alloc_device_p2p_params, rmStatus) == 52,
               "ALLOC_DEVICE_P2P.rmStatus offset");

/* Where the fields after the per-GPU array sit for one driver version. */
typedef struct {
    unsigned max_gpus; /* entries in perGpuAttributes: 32 or 256 */
    size_t size;       /* the whole block */
    size_t off_gpu_count, off_rm_ctrl_fd, off_client, off_memory, off_status;
} gdu_uvm_layout;

/* The fields of a UVM_MAP_EXTERNAL_ALLOCATION block that gdunlock uses. */
typedef struct {
    uint64_t base, length, offset;
    uint64_t gpu_count;
    int32_t rm_ctrl_fd;
    uint32_t h_client, h_memory;
    uint32_t rm_status;
} gdu_uvm_map_external;

/* Parses the driver version out of text: either a bare "580.159.04" (as in
 * /sys/module/nvidia_uvm/version) or /proc/driver/nvidia/version, whose first
 * line carries it. Returns 0 and fills v[0..2] (missing parts are 0), or -1. */
int gdu_nv_driver_version_parse(const char *text, unsigned v[3]);

/* Chooses the UVM_MAP_EXTERNAL_ALLOCATION layout for the driver whose version
 * text is given. Returns 0, or -1 with the reason in why when the version is
 * unreadable or outside the range whose layout is known (515.43.04 .. 595.x). */
int gdu_uvm_layout_for_driver(const char *version_text, gdu_uvm_layout *out, char *why,
                              size_t why_len);

/* Reads the fields of a block laid out as layout says (block must hold layout->size bytes). */
void gdu_uvm_map_external_read(const gdu_uvm_layout *layout, const void *block,
                               gdu_uvm_map_external *out);

#endif
