/* NV01_ROOT (client) GPU controls used to list the GPUs the RM has attached
 * and map their RM gpuIds to PCI addresses (hence to CUDA devices). Numbers
 * and layouts from ctrl0000gpu.h of open-gpu-kernel-modules 580.142; both
 * controls are non-privileged. */
#ifndef GDUNLOCK_DRIVERABI_CTRL0000_GPU_H
#define GDUNLOCK_DRIVERABI_CTRL0000_GPU_H

#include <stddef.h>
#include <stdint.h>

#define GDU_NV0000_CTRL_CMD_GPU_GET_ATTACHED_IDS 0x201u
#define GDU_NV0000_CTRL_CMD_GPU_GET_PCI_INFO 0x21bu
#define GDU_NV0000_GPU_MAX_ATTACHED_GPUS 32u
#define GDU_NV0000_GPU_INVALID_ID 0xffffffffu

/* Valid entries are contiguous; the first GDU_NV0000_GPU_INVALID_ID ends them. */
typedef struct gdu_nv0000_attached_ids_params {
    uint32_t gpuIds[GDU_NV0000_GPU_MAX_ATTACHED_GPUS];
} gdu_nv0000_attached_ids_params;

typedef struct gdu_nv0000_pci_info_params {
    uint32_t gpuId;  /* in */
    uint32_t domain; /* out */
    uint16_t bus;    /* out */
    uint16_t slot;   /* out: the PCI device number */
} gdu_nv0000_pci_info_params;

_Static_assert(sizeof(gdu_nv0000_attached_ids_params) == 128, "GET_ATTACHED_IDS params size");
_Static_assert(offsetof(gdu_nv0000_pci_info_params, domain) == 4, "pci info domain offset");
_Static_assert(offsetof(gdu_nv0000_pci_info_params, bus) == 8, "pci info bus offset");
_Static_assert(offsetof(gdu_nv0000_pci_info_params, slot) == 10, "pci info slot offset");
_Static_assert(sizeof(gdu_nv0000_pci_info_params) == 12, "GET_PCI_INFO params size");

#endif
