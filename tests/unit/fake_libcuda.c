/* A fake libcuda.so.1 for CPU tests of the engine's CUDA path and of
 * gdunlock bench. "Device" memory is host memory. Asynchronous copies are
 * deferred until an event or stream after them is waited on, and cuEventQuery
 * reports "not ready" every other time: a pipeline that reuses a staging
 * buffer before its copy completed copies the wrong bytes, which the tests
 * then see. Asynchronous copies need page-locked host memory (cuMemHostAlloc
 * or cuMemHostRegister): libcuda would run them synchronously from pageable
 * memory, here they fail (CUDA_ERROR_INVALID_VALUE), so staging that is not
 * pinned is seen too. Every other symbol of GDU_CUDA_FUNCTIONS is a generated weak stub
 * returning CUDA_ERROR_NOT_SUPPORTED. Built into its own folder, never into
 * build/lib, so that it cannot shadow the real driver. */
#include "cuda/cuda_api.h"
#include "fake_fifo_swap.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define NOT_READY 600
#define QUERIES_BEFORE_READY 5

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static __thread gdu_CUcontext current;
static struct CUctx_st {
    int dummy;
} primary;

typedef struct {
    void *dst;
    const void *src; /* NULL: memset dst to value */
    size_t n;
    unsigned char value;
} copy_op;

struct CUstream_st {
    copy_op *ops;
    size_t n, cap, done;
    unsigned flags; /* 1: CU_STREAM_NON_BLOCKING */
};

struct CUevent_st {
    struct CUstream_st *stream;
    size_t upto;
    unsigned queries;
};

static struct CUstream_st legacy; /* the default stream of the synchronous calls */

static void flush(struct CUstream_st *s, size_t upto)
{
    for (; s->done < upto; s->done++) {
        copy_op *o = &s->ops[s->done];
        if (o->src != NULL)
            memcpy(o->dst, o->src, o->n);
        else
            memset(o->dst, o->value, o->n);
    }
}

/* Synchronous calls run after the legacy stream's earlier work. */
static void flush_legacy(void)
{
    pthread_mutex_lock(&lock);
    flush(&legacy, legacy.n);
    pthread_mutex_unlock(&lock);
}

gdu_CUresult cuInit(unsigned flags)
{
    fake_fifo_swap();
    return 0;
}
gdu_CUresult cuDriverGetVersion(int *v)
{
    *v = 13000;
    return 0;
}
gdu_CUresult cuGetErrorName(gdu_CUresult r, const char **name)
{
    *name = "FAKE_CUDA_ERROR";
    return 0;
}
gdu_CUresult cuGetErrorString(gdu_CUresult r, const char **s)
{
    *s = "fake CUDA error";
    return 0;
}
gdu_CUresult cuDeviceGetCount(int *n)
{
    *n = 1;
    return 0;
}
gdu_CUresult cuDeviceGet(gdu_CUdevice *d, int ordinal)
{
    *d = ordinal;
    return ordinal == 0 ? 0 : 101;
}
gdu_CUresult cuDeviceGetName(char *name, int len, gdu_CUdevice d)
{
    strncpy(name, "Fake GPU (host memory)", (size_t)len - 1);
    name[len - 1] = '\0';
    return 0;
}
gdu_CUresult cuDeviceGetAttribute(int *v, int attr, gdu_CUdevice d)
{
    *v = 1;
    return 0;
}
static atomic_int retains; /* primary-context retains not yet released */
gdu_CUresult cuDevicePrimaryCtxRetain(gdu_CUcontext *c, gdu_CUdevice d)
{
    atomic_fetch_add(&retains, 1);
    *c = &primary;
    return 0;
}
gdu_CUresult cuDevicePrimaryCtxRelease_v2(gdu_CUdevice d)
{
    atomic_fetch_sub(&retains, 1);
    return 0;
}
/* Not CUDA's: for tests of who retains what (found with dlsym). */
int fake_cuda_primary_retains(void) { return atomic_load(&retains); }
gdu_CUresult cuCtxSetCurrent(gdu_CUcontext c)
{
    current = c;
    return 0;
}
gdu_CUresult cuCtxGetCurrent(gdu_CUcontext *c)
{
    *c = current;
    return 0;
}

/* Device memory as libcuda knows it, for cuPointerGetAttribute: cuMemAlloc
 * buffers (GPUDirect RDMA capable) and VMM reservations (not: cuMemCreate
 * here takes no gpuDirectRDMACapable flag). */
#define MAX_DEVICE 4096
static struct {
    char *p;
    size_t n;
    bool rdma_capable;
} device_memory[MAX_DEVICE];

static gdu_CUresult device_alloc(gdu_CUdeviceptr *p, size_t n, bool rdma_capable)
{
    char *m = malloc(n ? n : 1);
    *p = (gdu_CUdeviceptr)(uintptr_t)m;
    if (m == NULL)
        return GDU_CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < MAX_DEVICE; i++)
        if (device_memory[i].p == NULL) {
            device_memory[i].p = m;
            device_memory[i].n = n ? n : 1;
            device_memory[i].rdma_capable = rdma_capable;
            break;
        }
    pthread_mutex_unlock(&lock);
    return 0;
}

gdu_CUresult cuMemAlloc_v2(gdu_CUdeviceptr *p, size_t n) { return device_alloc(p, n, true); }
gdu_CUresult cuMemFree_v2(gdu_CUdeviceptr p)
{
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < MAX_DEVICE; i++)
        if (device_memory[i].p == (char *)(uintptr_t)p)
            device_memory[i].p = NULL;
    pthread_mutex_unlock(&lock);
    free((void *)(uintptr_t)p);
    return 0;
}
/* Page-locked host ranges, as libcuda tracks them. */
#define MAX_PINNED 4096
static struct {
    char *p;
    size_t n;
    bool allocated;
} pinned[MAX_PINNED];

static gdu_CUresult pin(void *p, size_t n, bool allocated)
{
    pthread_mutex_lock(&lock);
    gdu_CUresult r = GDU_CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < MAX_PINNED; i++)
        if (pinned[i].p == NULL) {
            pinned[i].p = p;
            pinned[i].n = n;
            pinned[i].allocated = allocated;
            r = 0;
            break;
        }
    pthread_mutex_unlock(&lock);
    return r;
}

/* Forgets the range starting at p, made the way `allocated` says. */
static gdu_CUresult unpin(void *p, bool allocated)
{
    pthread_mutex_lock(&lock);
    gdu_CUresult r = GDU_CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    for (size_t i = 0; i < MAX_PINNED; i++)
        if (pinned[i].p == p && pinned[i].allocated == allocated) {
            pinned[i].p = NULL;
            r = 0;
            break;
        }
    pthread_mutex_unlock(&lock);
    return r;
}

/* Under lock. */
static bool is_pinned(const void *p, size_t n)
{
    const char *c = p;
    for (size_t i = 0; i < MAX_PINNED; i++)
        if (pinned[i].p != NULL && c >= pinned[i].p && n <= pinned[i].n &&
            (size_t)(c - pinned[i].p) <= pinned[i].n - n)
            return true;
    return false;
}

gdu_CUresult cuMemHostAlloc(void **p, size_t n, unsigned flags)
{
    *p = aligned_alloc(4096, (n + 4095) / 4096 * 4096);
    if (*p == NULL)
        return GDU_CUDA_ERROR_OUT_OF_MEMORY;
    gdu_CUresult r = pin(*p, n, true);
    if (r != 0)
        free(*p);
    return r;
}
gdu_CUresult cuMemFreeHost(void *p)
{
    gdu_CUresult r = unpin(p, true);
    if (r == 0)
        free(p);
    return r;
}
gdu_CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned flags) { return pin(p, n, false); }
gdu_CUresult cuMemHostUnregister(void *p) { return unpin(p, false); }
gdu_CUresult cuMemcpyHtoD_v2(gdu_CUdeviceptr d, const void *s, size_t n)
{
    flush_legacy();
    memcpy((void *)(uintptr_t)d, s, n);
    return 0;
}
gdu_CUresult cuMemcpyDtoH_v2(void *d, gdu_CUdeviceptr s, size_t n)
{
    flush_legacy();
    memcpy(d, (const void *)(uintptr_t)s, n);
    return 0;
}

static gdu_CUresult enqueue(struct CUstream_st *s, void *dst, const void *src, size_t n,
                            unsigned char value, const void *host)
{
    pthread_mutex_lock(&lock);
    if (host != NULL && !is_pinned(host, n)) {
        pthread_mutex_unlock(&lock);
        return GDU_CUDA_ERROR_INVALID_VALUE;
    }
    if (s != &legacy && !(s->flags & GDU_CU_STREAM_NON_BLOCKING))
        flush(&legacy, legacy.n); /* a blocking stream waits for the legacy stream */
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        copy_op *ops = realloc(s->ops, cap * sizeof *ops);
        if (ops == NULL) {
            pthread_mutex_unlock(&lock);
            return GDU_CUDA_ERROR_OUT_OF_MEMORY;
        }
        s->ops = ops;
        s->cap = cap;
    }
    s->ops[s->n++] = (copy_op){dst, src, n, value};
    pthread_mutex_unlock(&lock);
    return 0;
}
gdu_CUresult cuMemcpyHtoDAsync_v2(gdu_CUdeviceptr d, const void *s, size_t n, gdu_CUstream st)
{
    return enqueue(st, (void *)(uintptr_t)d, s, n, 0, s);
}
gdu_CUresult cuMemcpyDtoHAsync_v2(void *d, gdu_CUdeviceptr s, size_t n, gdu_CUstream st)
{
    return enqueue(st, d, (const void *)(uintptr_t)s, n, 0, d);
}
gdu_CUresult cuMemcpyDtoDAsync_v2(gdu_CUdeviceptr d, gdu_CUdeviceptr s, size_t n, gdu_CUstream st)
{
    return enqueue(st, (void *)(uintptr_t)d, (const void *)(uintptr_t)s, n, 0, NULL);
}
gdu_CUresult cuMemsetD8_v2(gdu_CUdeviceptr d, unsigned char v, size_t n)
{
    return enqueue(&legacy, (void *)(uintptr_t)d, NULL, n, v, NULL);
}
gdu_CUresult cuCtxSynchronize(void)
{
    flush_legacy();
    return 0;
}

gdu_CUresult cuStreamCreate(gdu_CUstream *s, unsigned flags)
{
    *s = calloc(1, sizeof **s);
    if (*s == NULL)
        return GDU_CUDA_ERROR_OUT_OF_MEMORY;
    (*s)->flags = flags;
    return 0;
}
gdu_CUresult cuStreamSynchronize(gdu_CUstream s)
{
    pthread_mutex_lock(&lock);
    flush(s, s->n);
    pthread_mutex_unlock(&lock);
    return 0;
}
gdu_CUresult cuStreamDestroy_v2(gdu_CUstream s)
{
    cuStreamSynchronize(s);
    free(s->ops);
    free(s);
    return 0;
}
gdu_CUresult cuEventCreate(gdu_CUevent *e, unsigned flags)
{
    *e = calloc(1, sizeof **e);
    return *e ? 0 : GDU_CUDA_ERROR_OUT_OF_MEMORY;
}
gdu_CUresult cuEventDestroy_v2(gdu_CUevent e)
{
    free(e);
    return 0;
}
gdu_CUresult cuEventRecord(gdu_CUevent e, gdu_CUstream s)
{
    pthread_mutex_lock(&lock);
    e->stream = s;
    e->upto = s->n;
    e->queries = 0;
    pthread_mutex_unlock(&lock);
    return 0;
}
gdu_CUresult cuEventSynchronize(gdu_CUevent e)
{
    pthread_mutex_lock(&lock);
    if (e->stream != NULL)
        flush(e->stream, e->upto);
    pthread_mutex_unlock(&lock);
    return 0;
}
gdu_CUresult cuEventQuery(gdu_CUevent e)
{
    pthread_mutex_lock(&lock);
    gdu_CUresult r = 0;
    if (e->stream != NULL && e->stream->done < e->upto) {
        if (++e->queries < QUERIES_BEFORE_READY)
            r = NOT_READY;
        else
            flush(e->stream, e->upto);
    }
    pthread_mutex_unlock(&lock);
    return r;
}

/* VMM: a reservation is plain memory; map/unmap/access are no-ops. */
gdu_CUresult cuMemGetAllocationGranularity(size_t *g, const gdu_CUmemAllocationProp *p, int o)
{
    *g = 2u << 20;
    return 0;
}
gdu_CUresult cuMemCreate(gdu_CUmemGenericAllocationHandle *h, size_t n,
                         const gdu_CUmemAllocationProp *p, unsigned long long f)
{
    *h = 1;
    return 0;
}
gdu_CUresult cuMemRelease(gdu_CUmemGenericAllocationHandle h) { return 0; }
gdu_CUresult cuMemAddressReserve(gdu_CUdeviceptr *p, size_t n, size_t a, gdu_CUdeviceptr addr,
                                 unsigned long long f)
{
    return device_alloc(p, n, false);
}
gdu_CUresult cuMemAddressFree(gdu_CUdeviceptr p, size_t n) { return cuMemFree_v2(p); }
gdu_CUresult cuMemMap(gdu_CUdeviceptr p, size_t n, size_t o, gdu_CUmemGenericAllocationHandle h,
                      unsigned long long f)
{
    return 0;
}
gdu_CUresult cuMemUnmap(gdu_CUdeviceptr p, size_t n) { return 0; }
gdu_CUresult cuMemSetAccess(gdu_CUdeviceptr p, size_t n, const gdu_CUmemAccessDesc *d, size_t c)
{
    return 0;
}

/* CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE (15), the only pointer
 * attribute here, as libcuda answers it:
 *  - an unsigned int (4 bytes), as NVIDIA's cuda-python reads it
 *    (cuda_bindings/cuda/bindings/_lib/utils.pyx.in, HelperCUpointer_attribute);
 *    cuda.h: "1 if the memory this pointer is referencing can be used with the
 *    GPUDirect RDMA API";
 *  - 1 for a cuMemAlloc buffer, 0 for VMM memory made without
 *    gpuDirectRDMACapable (measured on the H200, driver-findings.md);
 *  - memory CUDA does not know: cuPointerGetAttribute fails with
 *    CUDA_ERROR_INVALID_VALUE (1; measured on the H200, 2026-12-01), while
 *    cuPointerGetAttributes succeeds with "default NULL values" (CUDA driver
 *    API reference, cuPointerGetAttributes).
 * Another attribute: CUDA_ERROR_INVALID_VALUE. No current context is asked
 * for: the reference names one for DEVICE_POINTER, none for this attribute. */
enum { POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE = 15 };

/* Whether ptr lies in known device memory; *rdma_capable its answer. */
static bool device_memory_at(gdu_CUdeviceptr ptr, bool *rdma_capable)
{
    const char *c = (const char *)(uintptr_t)ptr;
    bool found = false;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < MAX_DEVICE && !found; i++)
        if (device_memory[i].p != NULL && c >= device_memory[i].p &&
            (size_t)(c - device_memory[i].p) < device_memory[i].n) {
            found = true;
            *rdma_capable = device_memory[i].rdma_capable;
        }
    pthread_mutex_unlock(&lock);
    return found;
}

gdu_CUresult cuPointerGetAttribute(void *data, int attribute, gdu_CUdeviceptr ptr)
{
    bool capable = false;
    if (attribute != POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE ||
        !device_memory_at(ptr, &capable))
        return GDU_CUDA_ERROR_INVALID_VALUE;
    *(unsigned *)data = capable;
    return 0;
}
gdu_CUresult cuPointerGetAttributes(unsigned count, int *attributes, void **data,
                                    gdu_CUdeviceptr ptr)
{
    for (unsigned i = 0; i < count; i++)
        if (attributes[i] != POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE)
            return GDU_CUDA_ERROR_INVALID_VALUE;
    bool capable = false;
    bool known = device_memory_at(ptr, &capable);
    for (unsigned i = 0; i < count; i++)
        *(unsigned *)data[i] = known && capable;
    return 0;
}

/* A dma-buf as a data-center libcuda gives one (a descriptor: here a memfd,
 * so that a test sees whether it is closed); the one mapped through the
 * PCIe BAR (flags 1) refused as a driver without PCI P2PDMA refuses it
 * (CUDA_ERROR_NOT_SUPPORTED, 801, on the H200 for libcufile's probe). */
gdu_CUresult cuMemGetHandleForAddressRange(void *handle, gdu_CUdeviceptr ptr, size_t size, int type,
                                           unsigned long long flags)
{
    if (type != GDU_CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD || flags != 0)
        return 801;
    int fd = memfd_create("fake-libcuda-dmabuf", MFD_CLOEXEC);
    if (fd < 0)
        return GDU_CUDA_ERROR_OUT_OF_MEMORY;
    *(int *)handle = fd;
    return GDU_CUDA_SUCCESS;
}

/* cuGetProcAddress as libcuda answers it: the four-argument export, the
 * five-argument _v2, and asked for "cuGetProcAddress" from CUDA 12.0 on, the
 * five-argument one under the old name (what NCCL and cudart then call with
 * five arguments), handed out as libcuda's internal address, not its export.
 * test_shim_interpose checks the shim keeps them apart. */
gdu_CUresult cuGetProcAddress(const char *symbol, void **pfn, int version,
                              unsigned long long flags);
gdu_CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                 unsigned long long flags, int *status);

/* How often each was called (tests read them with dlsym). */
unsigned fake_cuda_get_proc_calls[2];

static gdu_CUresult get_proc_v1(const char *symbol, void **pfn, int version,
                                unsigned long long flags);
static gdu_CUresult get_proc_v2(const char *symbol, void **pfn, int version,
                                unsigned long long flags, int *status);

static void *lookup_proc(const char *symbol, int version)
{
    if (strcmp(symbol, "cuDeviceGetAttribute") == 0)
        return (void *)cuDeviceGetAttribute;
    if (strcmp(symbol, "cuPointerGetAttribute") == 0)
        return (void *)cuPointerGetAttribute;
    if (strcmp(symbol, "cuPointerGetAttributes") == 0)
        return (void *)cuPointerGetAttributes;
    if (strcmp(symbol, "cuMemGetHandleForAddressRange") == 0)
        return (void *)cuMemGetHandleForAddressRange;
    if (strcmp(symbol, "cuGetProcAddress") == 0)
        return version >= 12000 ? (void *)get_proc_v2 : (void *)get_proc_v1;
    return NULL;
}

static gdu_CUresult get_proc_v1(const char *symbol, void **pfn, int version,
                                unsigned long long flags)
{
    fake_cuda_get_proc_calls[0]++;
    *pfn = lookup_proc(symbol, version);
    return *pfn != NULL ? 0 : 500;
}

static gdu_CUresult get_proc_v2(const char *symbol, void **pfn, int version,
                                unsigned long long flags, int *status)
{
    fake_cuda_get_proc_calls[1]++;
    *pfn = lookup_proc(symbol, version);
    if (status != NULL) /* optional (cudart passes none) */
        *status = *pfn != NULL ? 0 : 1;
    return 0;
}

gdu_CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags)
{
    return get_proc_v1(symbol, pfn, version, flags);
}

gdu_CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                 unsigned long long flags, int *status)
{
    return get_proc_v2(symbol, pfn, version, flags, status);
}
