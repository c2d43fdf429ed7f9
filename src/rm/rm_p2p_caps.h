/* Through our own RM client (rm_client.h): the NV0000 controls that list
 * attached GPUs, map them to PCI addresses and report P2P caps for a GPU
 * pair. All controls used are non-privileged. */
#ifndef GDUNLOCK_RM_RM_P2P_CAPS_H
#define GDUNLOCK_RM_RM_P2P_CAPS_H

#include "driverabi/ctrl0000_gpu.h"
#include "rm/p2p_caps.h"
#include "rm/rm_client.h"

#include <stddef.h>
#include <stdint.h>

/* The most GPUs the RM lists. */
#define GDU_RM_MAX_GPUS GDU_NV0000_GPU_MAX_ATTACHED_GPUS

/* One GPU the RM has attached (GPUs are attached while a process, e.g. our
 * own CUDA context, has them open, or under persistence mode). */
typedef struct gdu_rm_gpu {
    uint32_t gpu_id; /* the RM's opaque gpuId */
    uint32_t domain;
    uint16_t bus;
    uint16_t device;
} gdu_rm_gpu;

/* The attached GPUs with their PCI addresses, into out[0..cap); *count is how
 * many were stored. Returns 0 or -errno with why. */
int gdu_rm_attached_gpus(gdu_rm_client *client, gdu_rm_gpu *out, size_t cap, size_t *count,
                         char *why, size_t why_len);

/* The RM's P2P caps from GPU src_id to GPU dst_id (equal ids: loopback).
 * Returns 0 or -errno with why. */
int gdu_rm_p2p_caps(gdu_rm_client *client, uint32_t src_id, uint32_t dst_id, gdu_p2p_rm_caps *out,
                    char *why, size_t why_len);

#endif
