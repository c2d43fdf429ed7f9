/* One GPU opened in our RM client (rm_client.h): its NV01_DEVICE_0 and
 * NV20_SUBDEVICE_0, which the per-GPU controls (NV2080_*) are issued on. */
#ifndef GDUNLOCK_RM_RM_DEVICE_H
#define GDUNLOCK_RM_RM_DEVICE_H

#include "rm/rm_client.h"

#include <stddef.h>
#include <stdint.h>

typedef struct gdu_rm_device {
    uint32_t device_instance;
    uint32_t hdevice, hsubdevice;
} gdu_rm_device;

/* Allocates the device and subdevice of RM gpuId gpu_id (its device instance
 * from GET_ID_INFO_V2). The process must hold the GPU's /dev/nvidiaN open
 * (RM refuses otherwise); a CUDA context on it does. */
int gdu_rm_device_open(gdu_rm_client *c, uint32_t gpu_id, gdu_rm_device *d, uint32_t *status,
                       char *why, size_t why_len);

/* Frees the device and its subdevice; safe on one that failed to open. */
void gdu_rm_device_close(gdu_rm_client *c, gdu_rm_device *d);

#endif
