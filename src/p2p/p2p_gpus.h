/* What CUDA says about each GPU and each ordered GPU pair. */
#ifndef GDUNLOCK_P2P_P2P_GPUS_H
#define GDUNLOCK_P2P_P2P_GPUS_H

#include "cuda/cuda_api.h"

#include <stddef.h>
#include <stdint.h>

typedef struct gdu_p2p_gpu {
    int ordinal; /* CUDA device ordinal */
    char name[96];
    char pci_bus_id[32]; /* "0000:1B:00.0" as CUDA spells it */
    unsigned domain, bus, device;
    uint64_t memory_bytes;
    int cc_major, cc_minor;
} gdu_p2p_gpu;

typedef struct gdu_p2p_cuda_pair {
    int can_access;       /* cuDeviceCanAccessPeer(src, dst) */
    int performance_rank; /* P2P attributes (src -> dst) */
    int access_supported;
    int native_atomics;
    int cuda_array_access;
} gdu_p2p_cuda_pair;

/* Returns 0 or -1 with the failing call and its CUDA result in why. */
int gdu_p2p_gpu_query(const gdu_cuda *cu, int ordinal, gdu_p2p_gpu *out, char *why, size_t why_len);
int gdu_p2p_cuda_pair_query(const gdu_cuda *cu, int src, int dst, gdu_p2p_cuda_pair *out, char *why,
                            size_t why_len);

#endif
