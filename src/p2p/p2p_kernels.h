/* The SM kernels of gdunlock p2p (p2p_kernels.cu, embedded as the PTX
 * p2p_kernels_gen.sh made of it: PTX ISA 6.3, .target sm_75), loaded into
 * one CUDA context with cuModuleLoadDataEx so that the driver JIT-compiles
 * them for that GPU; no nvcc at run time and no link-time libcuda. */
#ifndef GDUNLOCK_P2P_P2P_KERNELS_H
#define GDUNLOCK_P2P_P2P_KERNELS_H

#include "cuda/cuda_api.h"

#include <stddef.h>
#include <stdint.h>

/* The PTX text, NUL-terminated (generated from p2p_kernels.ptx at build time). */
extern const char gdu_p2p_kernels_ptx[];

typedef struct gdu_p2p_kernels {
    gdu_CUmodule module;
    gdu_CUfunction copy, fill, chase;
    unsigned blocks; /* grid size of the copy and fill kernels */
} gdu_p2p_kernels;

/* Loads the kernels into the current context of a GPU with sm_count
 * multiprocessors. Returns 0, or the failing call's result with why (for a
 * JIT failure, the result and the start of the JIT's error log). */
gdu_CUresult gdu_p2p_kernels_load(const gdu_cuda *cu, int sm_count, gdu_p2p_kernels *k, char *why,
                                  size_t why_len);

/* Unloads them (the context must be current); safe on a failed load. */
void gdu_p2p_kernels_unload(const gdu_cuda *cu, gdu_p2p_kernels *k);

/* Launches on stream s (in the kernels' context). copy: bytes (a multiple of
 * 16) from src to dst. fill: bytes / 4 words gdu_p2p_sm_word(seed, i) at dst.
 * chase: one thread follows hops pointers from the node *state holds and
 * stores where it stopped back into *state. Return cuLaunchKernel's result. */
gdu_CUresult gdu_p2p_launch_copy(const gdu_cuda *cu, const gdu_p2p_kernels *k, gdu_CUstream s,
                                 gdu_CUdeviceptr dst, gdu_CUdeviceptr src, size_t bytes);
gdu_CUresult gdu_p2p_launch_fill(const gdu_cuda *cu, const gdu_p2p_kernels *k, gdu_CUstream s,
                                 gdu_CUdeviceptr dst, size_t bytes, uint32_t seed);
gdu_CUresult gdu_p2p_launch_chase(const gdu_cuda *cu, const gdu_p2p_kernels *k, gdu_CUstream s,
                                  gdu_CUdeviceptr state, uint64_t hops);

#endif
