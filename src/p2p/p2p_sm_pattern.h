/* The 32-bit words of the SM store check: word i of a buffer the fill kernel
 * wrote with seed is gdu_p2p_sm_word(seed, i). The kernel (p2p_kernels.cu
 * includes this header) and the host that checks compute it from the same
 * code, so a mismatch is the route's fault, not a second implementation's. */
#ifndef GDUNLOCK_P2P_P2P_SM_PATTERN_H
#define GDUNLOCK_P2P_P2P_SM_PATTERN_H

#include <stdint.h>

#ifdef __CUDACC__
#define GDU_P2P_HOST_DEVICE __host__ __device__
#else
#define GDU_P2P_HOST_DEVICE
#endif

/* murmur3's finaliser of an odd multiple of the index plus the seed: a
 * bijection of the low 32 index bits, so no two words of a buffer up to
 * 16 GiB are equal and a shifted, stale or zeroed store shows. */
GDU_P2P_HOST_DEVICE static inline uint32_t gdu_p2p_sm_word(uint32_t seed, uint64_t i)
{
    uint32_t x = (uint32_t)i * 0x9e3779b1u + seed;
    x ^= (uint32_t)(i >> 32) * 0x85ebca6bu;
    x ^= x >> 16;
    x *= 0x85ebca6bu;
    x ^= x >> 13;
    x *= 0xc2b2ae35u;
    x ^= x >> 16;
    return x;
}

#endif
