#include "p2p/p2p_kernels.h"

#include <stdio.h>
#include <string.h>

enum { THREADS = 512, BLOCKS_PER_SM = 4, JIT_LOG = 512 };

gdu_CUresult gdu_p2p_kernels_load(const gdu_cuda *cu, int sm_count, gdu_p2p_kernels *k, char *why,
                                  size_t why_len)
{
    char log[JIT_LOG] = "";
    int options[] = {GDU_CU_JIT_ERROR_LOG_BUFFER, GDU_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *values[] = {log, (void *)(uintptr_t)sizeof log};
    memset(k, 0, sizeof *k);
    gdu_CUresult r = cu->cuModuleLoadDataEx(&k->module, gdu_p2p_kernels_ptx, 2, options, values);
    if (r != GDU_CUDA_SUCCESS) {
        log[sizeof log - 1] = '\0';
        char *nl = strchr(log, '\n');
        if (nl != NULL)
            *nl = '\0';
        snprintf(why, why_len, "loading the SM kernels (PTX ISA 6.3, sm_75): %s%s%s",
                 gdu_cuda_result_name(r), log[0] ? ": " : "", log);
        k->module = NULL;
        return r;
    }
    static const char *const names[] = {"gdu_p2p_copy", "gdu_p2p_fill", "gdu_p2p_chase"};
    gdu_CUfunction *fns[] = {&k->copy, &k->fill, &k->chase};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        r = cu->cuModuleGetFunction(fns[i], k->module, names[i]);
        if (r != GDU_CUDA_SUCCESS) {
            snprintf(why, why_len, "cuModuleGetFunction(%s): %s", names[i],
                     gdu_cuda_result_name(r));
            gdu_p2p_kernels_unload(cu, k);
            return r;
        }
    }
    k->blocks = (unsigned)(sm_count > 0 ? sm_count : 1) * BLOCKS_PER_SM;
    return GDU_CUDA_SUCCESS;
}

void gdu_p2p_kernels_unload(const gdu_cuda *cu, gdu_p2p_kernels *k)
{
    if (k->module != NULL)
        cu->cuModuleUnload(k->module);
    memset(k, 0, sizeof *k);
}

/* Enough blocks of THREADS for n items, at most k->blocks (the loops are grid-stride). */
static unsigned grid_for(const gdu_p2p_kernels *k, uint64_t n)
{
    uint64_t g = (n + THREADS - 1) / THREADS;
    return g == 0 ? 1 : g < k->blocks ? (unsigned)g : k->blocks;
}

gdu_CUresult gdu_p2p_launch_copy(const gdu_cuda *cu, const gdu_p2p_kernels *k, gdu_CUstream s,
                                 gdu_CUdeviceptr dst, gdu_CUdeviceptr src, size_t bytes)
{
    unsigned long long n16 = bytes / 16;
    void *params[] = {&dst, &src, &n16};
    return cu->cuLaunchKernel(k->copy, grid_for(k, n16), 1, 1, THREADS, 1, 1, 0, s, params, NULL);
}

gdu_CUresult gdu_p2p_launch_fill(const gdu_cuda *cu, const gdu_p2p_kernels *k, gdu_CUstream s,
                                 gdu_CUdeviceptr dst, size_t bytes, uint32_t seed)
{
    unsigned long long words = bytes / 4;
    unsigned int sd = seed;
    void *params[] = {&dst, &words, &sd};
    return cu->cuLaunchKernel(k->fill, grid_for(k, words), 1, 1, THREADS, 1, 1, 0, s, params, NULL);
}

gdu_CUresult gdu_p2p_launch_chase(const gdu_cuda *cu, const gdu_p2p_kernels *k, gdu_CUstream s,
                                  gdu_CUdeviceptr state, uint64_t hops)
{
    unsigned long long h = hops;
    void *params[] = {&state, &h};
    return cu->cuLaunchKernel(k->chase, 1, 1, 1, 1, 1, 1, 0, s, params, NULL);
}
