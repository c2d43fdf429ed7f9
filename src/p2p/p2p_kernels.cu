// The SM kernels of gdunlock p2p. Not built by the project: p2p_kernels.ptx
// is generated from this file by p2p_kernels_gen.sh (nvcc -ptx for
// compute_75) and committed; the library embeds that PTX and the driver
// JIT-compiles it for the GPU at hand. Kernel parameters are plain integers
// and pointers so that cuLaunchKernel's parameter array is easy to build.
#include "p2p/p2p_sm_pattern.h"

// dst[i] = src[i] for i < n16 (16-byte vectors), grid-stride.
extern "C" __global__ void gdu_p2p_copy(uint4 *dst, const uint4 *src, unsigned long long n16)
{
    unsigned long long stride = (unsigned long long)blockDim.x * gridDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n16;
         i += stride)
        dst[i] = src[i];
}

// dst[i] = gdu_p2p_sm_word(seed, i) for i < nwords, grid-stride.
extern "C" __global__ void gdu_p2p_fill(unsigned int *dst, unsigned long long nwords,
                                        unsigned int seed)
{
    unsigned long long stride = (unsigned long long)blockDim.x * gridDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
         i < nwords; i += stride)
        dst[i] = gdu_p2p_sm_word(seed, i);
}

// One thread follows hops pointers from *state (each node holds the address
// of the next) and leaves where it stopped in *state. ld.global.cv: every
// load goes to the memory's point of coherence again, none is served by L1.
extern "C" __global__ void gdu_p2p_chase(unsigned long long *state, unsigned long long hops)
{
    if (blockIdx.x != 0 || threadIdx.x != 0)
        return;
    unsigned long long p = *state;
    for (unsigned long long h = 0; h < hops; h++)
        p = __ldcv((const unsigned long long *)p);
    *state = p;
}
