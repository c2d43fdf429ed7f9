/* NV20_SUBDEVICE_0 control NV2080_CTRL_CMD_GPU_GET_ID: the RM gpuId of a
 * subdevice (which NV0000_CTRL_CMD_GPU_GET_PCI_INFO, ctrl0000_gpu.h, turns
 * into a PCI address). Number and layout from ctrl2080gpu.h of
 * open-gpu-kernel-modules 580.142; non-privileged. */
#ifndef GDUNLOCK_DRIVERABI_CTRL2080_GPU_H
#define GDUNLOCK_DRIVERABI_CTRL2080_GPU_H

#include <stdint.h>

#define GDU_NV2080_CTRL_CMD_GPU_GET_ID 0x20800142u

typedef struct {
    uint32_t gpuId; /* out */
} gdu_nv2080_gpu_get_id_params;

_Static_assert(sizeof(gdu_nv2080_gpu_get_id_params) == 4, "NV2080_CTRL_GPU_GET_ID_PARAMS size");

#endif
