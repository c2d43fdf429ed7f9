/* NV01_ROOT control NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2: the device instance
 * (the deviceId of an NV01_DEVICE_0 allocation) and subdevice instance of
 * an RM gpuId. Number and layout from ctrl0000gpu.h of
 * open-gpu-kernel-modules 580.142; non-privileged. */
#ifndef GDUNLOCK_DRIVERABI_CTRL0000_GPU_ID_H
#define GDUNLOCK_DRIVERABI_CTRL0000_GPU_ID_H

#include <stddef.h>
#include <stdint.h>

#define GDU_NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2 0x205u

typedef struct {
    uint32_t gpuId; /* in */
    uint32_t gpuFlags;
    uint32_t deviceInstance;
    uint32_t subDeviceInstance;
    uint32_t sliStatus;
    uint32_t boardId;
    uint32_t gpuInstance;
    int32_t numaId;
} gdu_nv0000_gpu_id_info_v2_params;

_Static_assert(sizeof(gdu_nv0000_gpu_id_info_v2_params) == 32, "GET_ID_INFO_V2 params size");
_Static_assert(offsetof(gdu_nv0000_gpu_id_info_v2_params, deviceInstance) == 8,
               "GET_ID_INFO_V2 deviceInstance offset");
_Static_assert(offsetof(gdu_nv0000_gpu_id_info_v2_params, subDeviceInstance) == 12,
               "GET_ID_INFO_V2 subDeviceInstance offset");
_Static_assert(offsetof(gdu_nv0000_gpu_id_info_v2_params, numaId) == 28,
               "GET_ID_INFO_V2 numaId offset");

#endif
