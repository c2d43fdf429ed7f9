/* Fake libcuda.so.1 for verify's CPU tests: a weak do-nothing definition of
 * every entry of GDU_CUDA_FUNCTIONS under its exported (versioned) name, so
 * the loader finds the whole table even as entries are added.
 * test_verify_fake_cuda.c overrides the ones verify and the engine use. */
#include "cuda/cuda_api.h"

#define FAKE_DEFAULT(name, sym, params)                                                            \
    __attribute__((weak)) gdu_CUresult fake_##name params __asm__(sym);                            \
    __attribute__((weak)) gdu_CUresult fake_##name params { return GDU_CUDA_SUCCESS; }
GDU_CUDA_FUNCTIONS(FAKE_DEFAULT)
