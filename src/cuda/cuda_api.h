/* The subset of the CUDA driver API that gdunlock uses, declared here (the
 * project never includes cuda.h nor links libcuda) and loaded at run time with
 * dlopen. Values follow the CUDA 12/13 driver API; tests/unit/test_cuda_abi.c
 * checks them against the real cuda.h where one is installed. */
#ifndef GDUNLOCK_CUDA_API_H
#define GDUNLOCK_CUDA_API_H

#include <stddef.h>
#include <stdint.h>

typedef int gdu_CUresult;
typedef int gdu_CUdevice;
typedef unsigned long long gdu_CUdeviceptr;
typedef struct CUctx_st *gdu_CUcontext;
typedef struct CUstream_st *gdu_CUstream;
typedef struct CUevent_st *gdu_CUevent;
typedef struct CUmod_st *gdu_CUmodule;
typedef struct CUfunc_st *gdu_CUfunction;
typedef unsigned long long gdu_CUmemGenericAllocationHandle;
typedef void (*gdu_CUhostFn)(void *user_data);

enum {
    GDU_CUDA_SUCCESS = 0,
    GDU_CUDA_ERROR_INVALID_VALUE = 1,
    GDU_CUDA_ERROR_OUT_OF_MEMORY = 2,
    GDU_CUDA_ERROR_NOT_INITIALIZED = 3,
    GDU_CUDA_ERROR_NO_DEVICE = 100,
    GDU_CUDA_ERROR_INVALID_DEVICE = 101,
    GDU_CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704,
    GDU_CUDA_ERROR_PEER_ACCESS_UNSUPPORTED = 217,
    GDU_CUDA_ERROR_NOT_READY = 600,
    GDU_CUDA_ERROR_INVALID_PTX = 218,
    GDU_CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
    GDU_CUDA_ERROR_NOT_FOUND = 500,
    GDU_CUDA_ERROR_ILLEGAL_ADDRESS = 700,
    GDU_CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
    GDU_CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713,
    GDU_CUDA_ERROR_LAUNCH_FAILED = 719,
    GDU_CUDA_ERROR_NOT_PERMITTED = 800,
    GDU_CUDA_ERROR_NOT_SUPPORTED = 801,
};

/* Device attributes (CUdevice_attribute) we query. */
enum {
    GDU_CU_ATTR_MULTIPROCESSOR_COUNT = 16,
    GDU_CU_ATTR_PCI_BUS_ID = 33,
    GDU_CU_ATTR_PCI_DEVICE_ID = 34,
    GDU_CU_ATTR_UNIFIED_ADDRESSING = 41,
    GDU_CU_ATTR_PCI_DOMAIN_ID = 50,
    GDU_CU_ATTR_COMPUTE_CAPABILITY_MAJOR = 75,
    GDU_CU_ATTR_COMPUTE_CAPABILITY_MINOR = 76,
    GDU_CU_ATTR_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102,
    GDU_CU_ATTR_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED = 110,
    GDU_CU_ATTR_GPU_DIRECT_RDMA_SUPPORTED = 116,
    GDU_CU_ATTR_DMA_BUF_SUPPORTED = 124,
};

/* cuMemGetHandleForAddressRange's handle type for a dma-buf fd
 * (CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD). */
enum { GDU_CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD = 1 };

/* CUdevice_P2PAttribute */
enum {
    GDU_CU_P2P_ATTR_PERFORMANCE_RANK = 1,
    GDU_CU_P2P_ATTR_ACCESS_SUPPORTED = 2,
    GDU_CU_P2P_ATTR_NATIVE_ATOMIC_SUPPORTED = 3,
    GDU_CU_P2P_ATTR_CUDA_ARRAY_ACCESS_SUPPORTED = 4,
};

/* Flags */
enum {
    GDU_CU_MEMHOSTALLOC_PORTABLE = 0x01,
    GDU_CU_MEMHOSTREGISTER_PORTABLE = 0x01,
    GDU_CU_MEMHOSTREGISTER_DEVICEMAP = 0x02,
    GDU_CU_MEMHOSTREGISTER_IOMEMORY = 0x04,  /* the range is MMIO (a PCIe BAR mapped for the CPU) */
    GDU_CU_MEMHOSTREGISTER_READ_ONLY = 0x08, /* the GPU only reads it (a read-only file mapping) */
    GDU_CU_STREAM_NON_BLOCKING = 0x1,
    GDU_CU_EVENT_DEFAULT = 0x0,
    GDU_CU_EVENT_DISABLE_TIMING = 0x2,
};

/* CUjit_option values for cuModuleLoadDataEx: where the JIT writes its error log. */
enum {
    GDU_CU_JIT_ERROR_LOG_BUFFER = 5,
    GDU_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
};

/* Virtual memory management (cuMemCreate and friends). */
enum {
    GDU_CU_MEM_ALLOCATION_TYPE_PINNED = 1,
    GDU_CU_MEM_LOCATION_TYPE_DEVICE = 1,
    GDU_CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3,
    GDU_CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0,
    GDU_CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 1,
};

typedef struct {
    int type;
    int id;
} gdu_CUmemLocation;

typedef struct {
    int type;
    int requestedHandleTypes;
    gdu_CUmemLocation location;
    void *win32HandleMetaData;
    struct {
        unsigned char compressionType;
        unsigned char gpuDirectRDMACapable;
        unsigned short usage;
        unsigned char reserved[4];
    } allocFlags;
} gdu_CUmemAllocationProp;

typedef struct {
    gdu_CUmemLocation location;
    int flags;
} gdu_CUmemAccessDesc;

_Static_assert(sizeof(gdu_CUmemLocation) == 8, "CUmemLocation size");
_Static_assert(sizeof(gdu_CUmemAllocationProp) == 32, "CUmemAllocationProp size");
_Static_assert(offsetof(gdu_CUmemAllocationProp, win32HandleMetaData) == 16,
               "CUmemAllocationProp layout");
_Static_assert(offsetof(gdu_CUmemAllocationProp, allocFlags) == 24, "CUmemAllocationProp layout");
_Static_assert(sizeof(gdu_CUmemAccessDesc) == 12, "CUmemAccessDesc size");

/* CUmemorytype, and CUDA_MEMCPY2D for cuMemcpy2DAsync_v2: a strided copy
 * (Height rows of WidthInBytes, each srcPitch / dstPitch apart). */
enum {
    GDU_CU_MEMORYTYPE_HOST = 1,
    GDU_CU_MEMORYTYPE_DEVICE = 2,
};

typedef struct {
    size_t srcXInBytes;
    size_t srcY;
    int srcMemoryType;
    const void *srcHost;
    gdu_CUdeviceptr srcDevice;
    void *srcArray;
    size_t srcPitch;
    size_t dstXInBytes;
    size_t dstY;
    int dstMemoryType;
    void *dstHost;
    gdu_CUdeviceptr dstDevice;
    void *dstArray;
    size_t dstPitch;
    size_t WidthInBytes;
    size_t Height;
} gdu_CUDA_MEMCPY2D;

_Static_assert(sizeof(gdu_CUDA_MEMCPY2D) == 128, "CUDA_MEMCPY2D size");
_Static_assert(offsetof(gdu_CUDA_MEMCPY2D, srcHost) == 24, "CUDA_MEMCPY2D layout");
_Static_assert(offsetof(gdu_CUDA_MEMCPY2D, srcPitch) == 48, "CUDA_MEMCPY2D layout");
_Static_assert(offsetof(gdu_CUDA_MEMCPY2D, dstMemoryType) == 72, "CUDA_MEMCPY2D layout");
_Static_assert(offsetof(gdu_CUDA_MEMCPY2D, dstDevice) == 88, "CUDA_MEMCPY2D layout");
_Static_assert(offsetof(gdu_CUDA_MEMCPY2D, dstPitch) == 104, "CUDA_MEMCPY2D layout");
_Static_assert(offsetof(gdu_CUDA_MEMCPY2D, WidthInBytes) == 112, "CUDA_MEMCPY2D layout");

/* X(return-name-in-table, exported-symbol, parameter list) */
#define GDU_CUDA_FUNCTIONS(X)                                                                      \
    X(cuInit, "cuInit", (unsigned flags))                                                          \
    X(cuDriverGetVersion, "cuDriverGetVersion", (int *version))                                    \
    X(cuGetErrorName, "cuGetErrorName", (gdu_CUresult r, const char **name))                       \
    X(cuGetErrorString, "cuGetErrorString", (gdu_CUresult r, const char **text))                   \
    X(cuDeviceGetCount, "cuDeviceGetCount", (int *count))                                          \
    X(cuDeviceGet, "cuDeviceGet", (gdu_CUdevice * dev, int ordinal))                               \
    X(cuDeviceGetName, "cuDeviceGetName", (char *name, int len, gdu_CUdevice dev))                 \
    X(cuDeviceGetAttribute, "cuDeviceGetAttribute", (int *value, int attr, gdu_CUdevice dev))      \
    X(cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId", (char *id, int len, gdu_CUdevice dev))           \
    X(cuDeviceTotalMem, "cuDeviceTotalMem_v2", (size_t * bytes, gdu_CUdevice dev))                 \
    X(cuDeviceCanAccessPeer, "cuDeviceCanAccessPeer",                                              \
      (int *can, gdu_CUdevice dev, gdu_CUdevice peer))                                             \
    X(cuDeviceGetP2PAttribute, "cuDeviceGetP2PAttribute",                                          \
      (int *value, int attr, gdu_CUdevice src, gdu_CUdevice dst))                                  \
    X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain",                                        \
      (gdu_CUcontext * ctx, gdu_CUdevice dev))                                                     \
    X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", (gdu_CUdevice dev))               \
    X(cuCtxCreate, "cuCtxCreate_v2", (gdu_CUcontext * ctx, unsigned flags, gdu_CUdevice dev))      \
    X(cuCtxDestroy, "cuCtxDestroy_v2", (gdu_CUcontext ctx))                                        \
    X(cuCtxSetCurrent, "cuCtxSetCurrent", (gdu_CUcontext ctx))                                     \
    X(cuCtxGetCurrent, "cuCtxGetCurrent", (gdu_CUcontext * ctx))                                   \
    X(cuCtxSynchronize, "cuCtxSynchronize", (void))                                                \
    X(cuCtxEnablePeerAccess, "cuCtxEnablePeerAccess", (gdu_CUcontext peer, unsigned flags))        \
    X(cuCtxDisablePeerAccess, "cuCtxDisablePeerAccess", (gdu_CUcontext peer))                      \
    X(cuMemGetInfo, "cuMemGetInfo_v2", (size_t * free_bytes, size_t * total_bytes))                \
    X(cuMemAlloc, "cuMemAlloc_v2", (gdu_CUdeviceptr * dptr, size_t bytes))                         \
    X(cuMemFree, "cuMemFree_v2", (gdu_CUdeviceptr dptr))                                           \
    X(cuMemHostAlloc, "cuMemHostAlloc", (void **p, size_t bytes, unsigned flags))                  \
    X(cuMemFreeHost, "cuMemFreeHost", (void *p))                                                   \
    X(cuMemHostRegister, "cuMemHostRegister_v2", (void *p, size_t bytes, unsigned flags))          \
    X(cuMemHostUnregister, "cuMemHostUnregister", (void *p))                                       \
    X(cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2",                                   \
      (gdu_CUdeviceptr * dptr, void *p, unsigned flags))                                           \
    X(cuMemcpyHtoD, "cuMemcpyHtoD_v2", (gdu_CUdeviceptr dst, const void *src, size_t bytes))       \
    X(cuMemcpyDtoH, "cuMemcpyDtoH_v2", (void *dst, gdu_CUdeviceptr src, size_t bytes))             \
    X(cuMemcpyDtoD, "cuMemcpyDtoD_v2", (gdu_CUdeviceptr dst, gdu_CUdeviceptr src, size_t bytes))   \
    X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2",                                                   \
      (gdu_CUdeviceptr dst, const void *src, size_t bytes, gdu_CUstream s))                        \
    X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2",                                                   \
      (void *dst, gdu_CUdeviceptr src, size_t bytes, gdu_CUstream s))                              \
    X(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2",                                                   \
      (gdu_CUdeviceptr dst, gdu_CUdeviceptr src, size_t bytes, gdu_CUstream s))                    \
    X(cuMemcpyPeerAsync, "cuMemcpyPeerAsync",                                                      \
      (gdu_CUdeviceptr dst, gdu_CUcontext dctx, gdu_CUdeviceptr src, gdu_CUcontext sctx,           \
       size_t bytes, gdu_CUstream s))                                                              \
    X(cuMemsetD8, "cuMemsetD8_v2", (gdu_CUdeviceptr dst, unsigned char value, size_t n))           \
    X(cuMemsetD8Async, "cuMemsetD8Async",                                                          \
      (gdu_CUdeviceptr dst, unsigned char v, size_t n, gdu_CUstream s))                            \
    X(cuStreamCreate, "cuStreamCreate", (gdu_CUstream * s, unsigned flags))                        \
    X(cuStreamDestroy, "cuStreamDestroy_v2", (gdu_CUstream s))                                     \
    X(cuStreamSynchronize, "cuStreamSynchronize", (gdu_CUstream s))                                \
    X(cuStreamQuery, "cuStreamQuery", (gdu_CUstream s))                                            \
    X(cuStreamWaitEvent, "cuStreamWaitEvent", (gdu_CUstream s, gdu_CUevent e, unsigned flags))     \
    X(cuLaunchHostFunc, "cuLaunchHostFunc", (gdu_CUstream s, gdu_CUhostFn fn, void *user_data))    \
    X(cuModuleLoadDataEx, "cuModuleLoadDataEx",                                                    \
      (gdu_CUmodule * mod, const void *image, unsigned n_options, int *options, void **values))    \
    X(cuModuleUnload, "cuModuleUnload", (gdu_CUmodule mod))                                        \
    X(cuModuleGetFunction, "cuModuleGetFunction",                                                  \
      (gdu_CUfunction * fn, gdu_CUmodule mod, const char *name))                                   \
    X(cuLaunchKernel, "cuLaunchKernel",                                                            \
      (gdu_CUfunction fn, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x,     \
       unsigned block_y, unsigned block_z, unsigned shared_bytes, gdu_CUstream s, void **params,   \
       void **extra))                                                                              \
    X(cuEventCreate, "cuEventCreate", (gdu_CUevent * e, unsigned flags))                           \
    X(cuEventDestroy, "cuEventDestroy_v2", (gdu_CUevent e))                                        \
    X(cuEventRecord, "cuEventRecord", (gdu_CUevent e, gdu_CUstream s))                             \
    X(cuEventSynchronize, "cuEventSynchronize", (gdu_CUevent e))                                   \
    X(cuEventQuery, "cuEventQuery", (gdu_CUevent e))                                               \
    X(cuEventElapsedTime, "cuEventElapsedTime", (float *ms, gdu_CUevent start, gdu_CUevent end))   \
    X(cuMemGetAllocationGranularity, "cuMemGetAllocationGranularity",                              \
      (size_t * gran, const gdu_CUmemAllocationProp *prop, int option))                            \
    X(cuMemCreate, "cuMemCreate",                                                                  \
      (gdu_CUmemGenericAllocationHandle * h, size_t size, const gdu_CUmemAllocationProp *prop,     \
       unsigned long long flags))                                                                  \
    X(cuMemRelease, "cuMemRelease", (gdu_CUmemGenericAllocationHandle h))                          \
    X(cuMemAddressReserve, "cuMemAddressReserve",                                                  \
      (gdu_CUdeviceptr * ptr, size_t size, size_t align, gdu_CUdeviceptr addr,                     \
       unsigned long long f))                                                                      \
    X(cuMemAddressFree, "cuMemAddressFree", (gdu_CUdeviceptr ptr, size_t size))                    \
    X(cuMemMap, "cuMemMap",                                                                        \
      (gdu_CUdeviceptr ptr, size_t size, size_t offset, gdu_CUmemGenericAllocationHandle h,        \
       unsigned long long flags))                                                                  \
    X(cuMemUnmap, "cuMemUnmap", (gdu_CUdeviceptr ptr, size_t size))                                \
    X(cuMemGetHandleForAddressRange, "cuMemGetHandleForAddressRange",                              \
      (void *handle, gdu_CUdeviceptr ptr, size_t size, int type, unsigned long long flags))        \
    X(cuMemSetAccess, "cuMemSetAccess",                                                            \
      (gdu_CUdeviceptr ptr, size_t size, const gdu_CUmemAccessDesc *desc, size_t count))

#define GDU_CUDA_DECLARE_FN(name, sym, params) gdu_CUresult(*name) params;
typedef struct gdu_cuda {
    void *handle;
    GDU_CUDA_FUNCTIONS(GDU_CUDA_DECLARE_FN)
} gdu_cuda;
#undef GDU_CUDA_DECLARE_FN

/* Loads libcuda.so.1 once per process (thread-safe) and calls cuInit(0).
 * Returns the table, or NULL with a reason (library missing, a symbol missing,
 * or cuInit's result by name) copied into why. */
const gdu_cuda *gdu_cuda_load(char *why, size_t why_len);

/* "CUDA_ERROR_OUT_OF_MEMORY (2)" for a result, via cuGetErrorName when the
 * library is loaded, else the number. Thread-safe; returns a static string. */
const char *gdu_cuda_result_name(gdu_CUresult r);

#endif
