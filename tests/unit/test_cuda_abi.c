/* Our own CUDA driver API declarations (src/cuda/cuda_api.h) against the real
 * cuda.h: values and layouts must agree. Built only where cuda.h exists. */
#include "cuda/cuda_api.h"

#include <cuda.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

_Static_assert(sizeof(gdu_CUmemAllocationProp) == sizeof(CUmemAllocationProp), "prop size");
_Static_assert(offsetof(gdu_CUmemAllocationProp, location) ==
                   offsetof(CUmemAllocationProp, location),
               "");
_Static_assert(offsetof(gdu_CUmemAllocationProp, allocFlags) ==
                   offsetof(CUmemAllocationProp, allocFlags),
               "");
_Static_assert(sizeof(gdu_CUmemAccessDesc) == sizeof(CUmemAccessDesc), "access desc size");
_Static_assert(sizeof(gdu_CUdeviceptr) == sizeof(CUdeviceptr), "deviceptr");
_Static_assert((int)GDU_CU_ATTR_PCI_BUS_ID == (int)CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, "");
_Static_assert((int)GDU_CU_ATTR_PCI_DEVICE_ID == (int)CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, "");
_Static_assert((int)GDU_CU_ATTR_PCI_DOMAIN_ID == (int)CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, "");
_Static_assert((int)GDU_CU_ATTR_UNIFIED_ADDRESSING == (int)CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING,
               "");
_Static_assert((int)GDU_CU_ATTR_MULTIPROCESSOR_COUNT ==
                   (int)CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
               "");
_Static_assert((int)GDU_CU_ATTR_COMPUTE_CAPABILITY_MAJOR ==
                   (int)CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
               "");
_Static_assert((int)GDU_CU_ATTR_COMPUTE_CAPABILITY_MINOR ==
                   (int)CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
               "");
_Static_assert((int)GDU_CU_ATTR_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED ==
                   (int)CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
               "");
_Static_assert((int)GDU_CU_ATTR_GPU_DIRECT_RDMA_SUPPORTED ==
                   (int)CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED,
               "");
_Static_assert((int)GDU_CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD ==
                   (int)CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
               "");
_Static_assert((int)GDU_CU_ATTR_DMA_BUF_SUPPORTED == (int)CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED,
               "");
_Static_assert((int)GDU_CU_ATTR_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED ==
                   (int)CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED,
               "");
_Static_assert((int)GDU_CU_P2P_ATTR_PERFORMANCE_RANK ==
                   (int)CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK,
               "");
_Static_assert((int)GDU_CU_P2P_ATTR_ACCESS_SUPPORTED ==
                   (int)CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED,
               "");
_Static_assert((int)GDU_CU_P2P_ATTR_NATIVE_ATOMIC_SUPPORTED ==
                   (int)CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED,
               "");
_Static_assert((int)GDU_CU_MEM_ALLOCATION_TYPE_PINNED == (int)CU_MEM_ALLOCATION_TYPE_PINNED, "");
_Static_assert((int)GDU_CU_MEM_LOCATION_TYPE_DEVICE == (int)CU_MEM_LOCATION_TYPE_DEVICE, "");
_Static_assert((int)GDU_CU_MEM_ACCESS_FLAGS_PROT_READWRITE ==
                   (int)CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
               "");
_Static_assert((int)GDU_CUDA_ERROR_OUT_OF_MEMORY == (int)CUDA_ERROR_OUT_OF_MEMORY, "");
_Static_assert((int)GDU_CUDA_ERROR_NO_DEVICE == (int)CUDA_ERROR_NO_DEVICE, "");
_Static_assert((int)GDU_CUDA_ERROR_INVALID_DEVICE == (int)CUDA_ERROR_INVALID_DEVICE, "");
_Static_assert((int)GDU_CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED ==
                   (int)CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED,
               "");
_Static_assert((int)GDU_CUDA_ERROR_PEER_ACCESS_UNSUPPORTED ==
                   (int)CUDA_ERROR_PEER_ACCESS_UNSUPPORTED,
               "");
_Static_assert((int)GDU_CUDA_ERROR_NOT_READY == (int)CUDA_ERROR_NOT_READY, "");
_Static_assert((int)GDU_CU_STREAM_NON_BLOCKING == (int)CU_STREAM_NON_BLOCKING, "");
_Static_assert((int)GDU_CU_EVENT_DISABLE_TIMING == (int)CU_EVENT_DISABLE_TIMING, "");
_Static_assert((int)GDU_CU_MEMHOSTREGISTER_DEVICEMAP == (int)CU_MEMHOSTREGISTER_DEVICEMAP, "");
_Static_assert((int)GDU_CU_MEMHOSTREGISTER_IOMEMORY == (int)CU_MEMHOSTREGISTER_IOMEMORY, "");
_Static_assert((int)GDU_CU_MEMHOSTREGISTER_READ_ONLY == (int)CU_MEMHOSTREGISTER_READ_ONLY, "");
_Static_assert((int)GDU_CU_MEMORYTYPE_HOST == (int)CU_MEMORYTYPE_HOST, "");
_Static_assert((int)GDU_CU_MEMORYTYPE_DEVICE == (int)CU_MEMORYTYPE_DEVICE, "");
_Static_assert(sizeof(gdu_CUDA_MEMCPY2D) == sizeof(CUDA_MEMCPY2D), "CUDA_MEMCPY2D size");
_Static_assert(offsetof(gdu_CUDA_MEMCPY2D, srcHost) == offsetof(CUDA_MEMCPY2D, srcHost), "");
_Static_assert(offsetof(gdu_CUDA_MEMCPY2D, srcPitch) == offsetof(CUDA_MEMCPY2D, srcPitch), "");
_Static_assert(offsetof(gdu_CUDA_MEMCPY2D, dstMemoryType) == offsetof(CUDA_MEMCPY2D, dstMemoryType),
               "");
_Static_assert(offsetof(gdu_CUDA_MEMCPY2D, dstDevice) == offsetof(CUDA_MEMCPY2D, dstDevice), "");
_Static_assert(offsetof(gdu_CUDA_MEMCPY2D, dstPitch) == offsetof(CUDA_MEMCPY2D, dstPitch), "");
_Static_assert(offsetof(gdu_CUDA_MEMCPY2D, WidthInBytes) == offsetof(CUDA_MEMCPY2D, WidthInBytes),
               "");
_Static_assert(offsetof(gdu_CUDA_MEMCPY2D, Height) == offsetof(CUDA_MEMCPY2D, Height), "");
_Static_assert((int)GDU_CU_JIT_ERROR_LOG_BUFFER == (int)CU_JIT_ERROR_LOG_BUFFER, "");
_Static_assert((int)GDU_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES ==
                   (int)CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
               "");
_Static_assert(sizeof(CUjit_option) == sizeof(int), "cuModuleLoadDataEx options are passed as int");
_Static_assert((int)GDU_CUDA_ERROR_INVALID_PTX == (int)CUDA_ERROR_INVALID_PTX, "");
_Static_assert((int)GDU_CUDA_ERROR_UNSUPPORTED_PTX_VERSION ==
                   (int)CUDA_ERROR_UNSUPPORTED_PTX_VERSION,
               "");
_Static_assert((int)GDU_CUDA_ERROR_NOT_FOUND == (int)CUDA_ERROR_NOT_FOUND, "");
_Static_assert((int)GDU_CUDA_ERROR_ILLEGAL_ADDRESS == (int)CUDA_ERROR_ILLEGAL_ADDRESS, "");
_Static_assert((int)GDU_CUDA_ERROR_LAUNCH_FAILED == (int)CUDA_ERROR_LAUNCH_FAILED, "");
_Static_assert((int)GDU_CUDA_ERROR_NOT_PERMITTED == (int)CUDA_ERROR_NOT_PERMITTED, "");
_Static_assert((int)GDU_CUDA_ERROR_NOT_SUPPORTED == (int)CUDA_ERROR_NOT_SUPPORTED, "");
/* Our handle types name the same structs as cuda.h's. */
_Static_assert(__builtin_types_compatible_p(gdu_CUmodule, CUmodule), "CUmodule");
_Static_assert(__builtin_types_compatible_p(gdu_CUfunction, CUfunction), "CUfunction");
_Static_assert(__builtin_types_compatible_p(gdu_CUstream, CUstream), "CUstream");

static void loader_reports_missing_driver_or_loads(void **state)
{
    char why[256] = "";
    const gdu_cuda *cu = gdu_cuda_load(why, sizeof why);
    /* No GPU in CI: the loader must say why instead of crashing. */
    if (cu == NULL)
        assert_true(why[0] != '\0');
    else
        assert_non_null(cu->cuInit); /* cuda.h renames cuMemAlloc by macro */
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(loader_reports_missing_driver_or_loads)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
