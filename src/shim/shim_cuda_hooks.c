/* libgdunlock.so's CUDA and cuFile entry points.
 *
 * - cuFileBufRegister / cuFileBufDeregister: the buffers a program hands to
 *   cuFile, each checked against the model of the kernel's lookup when it is
 *   registered (nvidia-fs pins it then) and listed in the report.
 * - cuDeviceGetAttribute, cuPointerGetAttribute, cuPointerGetAttributes,
 *   cuGetProcAddress, cuGetProcAddress_v2: the GPUDirect RDMA attributes of a
 *   GPU the shim unlocks and of the buffers it registered there, and under
 *   the GeForce stand-in the DMA-BUF attribute (shim_attr.c).
 * - cuMemGetHandleForAddressRange: passed through untouched, traced. The
 *   public call a PCI P2PDMA probe would make (a dma-buf mapped through the
 *   PCIe BAR); libcufile 1.15.1 resolves it but, on the H200, did not call
 *   it for its probe ("Allocated 65536 bytes on the GPU ... to check for
 *   P2PDMA Support", then "gpu attribute pci_p2pdma not supported errornum:
 *   801"): that answer comes through a route the shim does not see
 *   (bench/results/2026-12-02-h200-libcufile-p2pdma-probe.md).
 * - through dlsym on a handle (shim_dlsym.c): libcufile reaches libcuda, and
 *   kvikio, fastsafetensors and gdunlock itself reach libcufile, through
 *   dlopen + dlsym, which LD_PRELOAD alone does not interpose; for those few
 *   names dlsym hands out the shim's function, which calls the one dlsym found.
 *
 * Each entry point calls the real function with the caller's arguments and
 * returns its result unchanged, but for the attribute's value. At debug log
 * level the names libcufile resolves and the attributes it asks are traced
 * (the list of what libcufile takes from the driver, issue 24). */
#include "cuda/cufile_api.h"
#include "shim/shim_preload.h"
#include "util/pci_addr.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GDU_EXPORT __attribute__((visibility("default")))
#define GDU_HIDDEN __attribute__((visibility("hidden")))

typedef gdu_CUresult (*get_attribute_fn)(int *, int, gdu_CUdevice);
/* The four-argument cuGetProcAddress; its hook takes and passes on a fifth
 * anyway, as some callers give one (a stray argument is ignored by the
 * x86-64 and AArch64 calling conventions). */
typedef gdu_CUresult (*get_proc_v1_fn)(const char *, void **, int, unsigned long long, int *);
typedef gdu_CUresult (*get_proc_v2_fn)(const char *, void **, int, unsigned long long, int *);
typedef gdu_CUresult (*pointer_attribute_fn)(void *, int, gdu_CUdeviceptr);
typedef gdu_CUresult (*pointer_attributes_fn)(unsigned, int *, void **, gdu_CUdeviceptr);
typedef gdu_CUresult (*range_handle_fn)(void *, gdu_CUdeviceptr, size_t, int, unsigned long long);
typedef gdu_CUfileError (*buf_register_fn)(const void *, size_t, int);
typedef gdu_CUfileError (*buf_deregister_fn)(const void *);

/* The real functions, from the route that reached them last, and dropped
 * when any library has been unloaded since (sync_unloads): libcuda unloaded
 * and loaded again lies elsewhere, and the old address is unmapped or, worse,
 * inside something else. */
static get_attribute_fn g_get_attribute;
static get_proc_v1_fn g_get_proc_v1;
static get_proc_v2_fn g_get_proc_v2;
static pointer_attribute_fn g_pointer_attribute;
static pointer_attributes_fn g_pointer_attributes;
static range_handle_fn g_range_handle;
static buf_register_fn g_buf_register;
static buf_deregister_fn g_buf_deregister;

/* CUDA values (cuda.h; tests/unit/test_cuda_abi.c checks the ones in cuda_api.h). */
enum {
    POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
    POINTER_ATTRIBUTE_IS_MANAGED = 8,
    POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE = 15,
    MEMORYTYPE_HOST = 1,
    MEMORYTYPE_DEVICE = 2,
};

/* ---- dlsym ---- */

/* The file name of the object that holds address p ("" when unknown). */
static const char *object_of(const void *p)
{
    Dl_info info;
    if (p == NULL || dladdr(p, &info) == 0 || info.dli_fname == NULL)
        return "";
    const char *base = strrchr(info.dli_fname, '/');
    return base != NULL ? base + 1 : info.dli_fname;
}

static bool from(const void *p, const char *library)
{
    return strncmp(object_of(p), library, strlen(library)) == 0;
}

static void remember(void **slot, void *real)
{
    void *none = NULL;
    __atomic_compare_exchange_n(slot, &none, real, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

gdu_CUresult cuDeviceGetAttribute(int *value, int attr, gdu_CUdevice dev);
gdu_CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags,
                              int *status);
gdu_CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                 unsigned long long flags, int *status);
gdu_CUresult cuPointerGetAttribute(void *data, int attribute, gdu_CUdeviceptr ptr);
gdu_CUresult cuPointerGetAttributes(unsigned count, int *attributes, void **data,
                                    gdu_CUdeviceptr ptr);
gdu_CUresult cuMemGetHandleForAddressRange(void *handle, gdu_CUdeviceptr ptr, size_t size, int type,
                                           unsigned long long flags);
gdu_CUfileError cuFileBufRegister(const void *ptr, size_t size, int flags);
gdu_CUfileError cuFileBufDeregister(const void *ptr);

/* The names the shim hands out its own function for, where the real one
 * lies in the library named. */
static const struct {
    const char *name, *library;
    void **real;
    void *hook;
} hooks[] = {
    {"cuDeviceGetAttribute", "libcuda.so", (void **)&g_get_attribute, (void *)cuDeviceGetAttribute},
    {"cuGetProcAddress", "libcuda.so", (void **)&g_get_proc_v1, (void *)cuGetProcAddress},
    {"cuGetProcAddress_v2", "libcuda.so", (void **)&g_get_proc_v2, (void *)cuGetProcAddress_v2},
    {"cuPointerGetAttribute", "libcuda.so", (void **)&g_pointer_attribute,
     (void *)cuPointerGetAttribute},
    {"cuPointerGetAttributes", "libcuda.so", (void **)&g_pointer_attributes,
     (void *)cuPointerGetAttributes},
    {"cuMemGetHandleForAddressRange", "libcuda.so", (void **)&g_range_handle,
     (void *)cuMemGetHandleForAddressRange},
    {"cuFileBufRegister", "libcufile.so", (void **)&g_buf_register, (void *)cuFileBufRegister},
    {"cuFileBufDeregister", "libcufile.so", (void **)&g_buf_deregister,
     (void *)cuFileBufDeregister},
};

/* How many objects the dynamic loader has unloaded so far. */
static int count_unloads(struct dl_phdr_info *info, size_t size, void *out)
{
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs)
        *(unsigned long long *)out = info->dlpi_subs;
    return 1; /* the first object says it */
}

static unsigned long long g_unloads;

/* Forgets every real function once an object has been unloaded since they
 * were found; they are found again (the next route, or from_loaded). Calls
 * after the unload of what a caller is still calling are its own race. */
static void sync_unloads(void)
{
    unsigned long long now = 0;
    dl_iterate_phdr(count_unloads, &now);
    if (now == __atomic_load_n(&g_unloads, __ATOMIC_ACQUIRE))
        return;
    for (size_t i = 0; i < sizeof hooks / sizeof hooks[0]; i++)
        __atomic_store_n(hooks[i].real, NULL, __ATOMIC_RELEASE);
    __atomic_store_n(&g_unloads, now, __ATOMIC_RELEASE);
}

/* The shim's function for a real one that dlsym (version < 0) or a
 * cuGetProcAddress asked for that CUDA version found, or real itself. Asked
 * for from CUDA 12.0 on, "cuGetProcAddress" is the five-argument function
 * (PFN_cuGetProcAddress_v12000), whatever its name: it stands with _v2. */
static void *substitute(const char *name, void *real, int version)
{
    if (real == NULL || name == NULL || strncmp(name, "cu", 2) != 0)
        return real;
    if (version >= 12000 && strcmp(name, "cuGetProcAddress") == 0)
        name = "cuGetProcAddress_v2";
    sync_unloads();
    for (size_t i = 0; i < sizeof hooks / sizeof hooks[0]; i++)
        if (strcmp(name, hooks[i].name) == 0 && from(real, hooks[i].library)) {
            __atomic_store_n(hooks[i].real, real, __ATOMIC_RELEASE);
            return hooks[i].hook;
        }
    return real;
}

/* The library that called the shim's function whose return address is ret,
 * when it is libcufile and the trace is on (else NULL). */
static const char *traced_caller(gdu_shim *s, const void *ret)
{
    if (s == NULL || !gdu_shim_tracing(s))
        return NULL;
    const char *o = object_of(ret);
    return strncmp(o, "libcufile", 9) == 0 ? o : NULL;
}

static void trace_resolved(gdu_shim *s, const void *ret, const char *how, const char *name,
                           const void *real, const void *given)
{
    const char *caller = traced_caller(s, ret);
    if (caller != NULL)
        gdu_shim_trace(s, "%s resolves %s through %s: %s", caller, name, how,
                       real == NULL    ? "not found"
                       : given != real ? "the shim's hook"
                                       : object_of(real));
}

/* dlsym on an explicit handle (the stub below takes RTLD_DEFAULT and
 * RTLD_NEXT straight to libc's dlsym, whose answer depends on the caller);
 * reached by a tail jump, so the return address is the caller's. */
GDU_HIDDEN void *gdu_dlsym_handle(void *handle, const char *name)
{
    void *real = gdu_preload_real_dlsym(handle, name);
    gdu_shim *s = gdu_preload_shim();
    if (s == NULL)
        return real;
    void *given = substitute(name, real, -1);
    trace_resolved(s, __builtin_return_address(0), "dlsym", name, real, given);
    return given;
}

/* What cuGetProcAddress(_v2) found, the shim's hook in place (called from ret). */
static gdu_CUresult got_proc(gdu_CUresult r, const char *symbol, void **pfn, int version,
                             const void *ret)
{
    gdu_shim *s = gdu_preload_shim();
    if (r != GDU_CUDA_SUCCESS || pfn == NULL || s == NULL)
        return r;
    void *real = *pfn;
    *pfn = substitute(symbol, real, version);
    trace_resolved(s, ret, "cuGetProcAddress", symbol != NULL ? symbol : "(null)", real, *pfn);
    return r;
}

/* ---- the real functions, where no route handed them to us ---- */

static void *from_loaded(const char *library, const char *name)
{
    void *f = gdu_preload_real_dlsym(RTLD_NEXT, name);
    if (f != NULL)
        return f;
    void *h = dlopen(library, RTLD_LAZY | RTLD_NOLOAD); /* loaded RTLD_LOCAL by someone */
    if (h == NULL)
        return NULL;
    f = gdu_preload_real_dlsym(h, name);
    dlclose(h);
    return f;
}

static void *real_of(void **slot, const char *library, const char *name)
{
    sync_unloads();
    void *f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (f == NULL) {
        remember(slot, from_loaded(library, name));
        f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    }
    return f;
}

#define REAL(slot, library, name) ((__typeof__(slot))real_of((void **)&(slot), library, name))

/* ---- CUDA ---- */

static const char *device_pci(get_attribute_fn real, gdu_CUdevice dev, char *buf, size_t len)
{
    int domain, bus, slot;
    if (real(&domain, GDU_CU_ATTR_PCI_DOMAIN_ID, dev) != GDU_CUDA_SUCCESS ||
        real(&bus, GDU_CU_ATTR_PCI_BUS_ID, dev) != GDU_CUDA_SUCCESS ||
        real(&slot, GDU_CU_ATTR_PCI_DEVICE_ID, dev) != GDU_CUDA_SUCCESS)
        return NULL;
    gdu_pci_addr_format(buf, len, (unsigned)domain, (unsigned)bus, (unsigned)slot, 0);
    return buf;
}

/* Who asks: the first object on the stack above the shim and the CUDA
 * libraries, unless an RDMA networking library (NCCL, ...) is further up
 * (NCCL may reach this through a cudart of its own): then that one. The
 * answer is asked rarely, so a backtrace is cheap enough. */
static const char *asking_library(void)
{
    void *frames[24];
    int n = backtrace(frames, (int)(sizeof frames / sizeof frames[0]));
    const char *first = NULL;
    for (int i = 1; i < n; i++) {
        const char *o = object_of(frames[i]);
        if (o[0] == '\0' || strncmp(o, "libgdunlock", 11) == 0)
            continue;
        if (gdu_shim_caller_is_rdma_network(o))
            return o;
        if (first == NULL && strncmp(o, "libcuda", 7) != 0)
            first = o;
    }
    return first;
}

GDU_EXPORT gdu_CUresult cuDeviceGetAttribute(int *value, int attr, gdu_CUdevice dev)
{
    get_attribute_fn real = REAL(g_get_attribute, "libcuda.so.1", "cuDeviceGetAttribute");
    if (real == NULL)
        return GDU_CUDA_ERROR_NOT_INITIALIZED;
    gdu_CUresult r = real(value, attr, dev);
    gdu_shim *s = gdu_preload_shim();
    int libcuda_value = r == GDU_CUDA_SUCCESS && value != NULL ? *value : -1;
    if (s != NULL && r == GDU_CUDA_SUCCESS && attr == GDU_CU_ATTR_GPU_DIRECT_RDMA_SUPPORTED &&
        value != NULL) {
        char pci[32];
        *value = gdu_shim_rdma_attribute(s, *value, device_pci(real, dev, pci, sizeof pci),
                                         asking_library());
    }
    if (s != NULL && r == GDU_CUDA_SUCCESS && attr == GDU_CU_ATTR_DMA_BUF_SUPPORTED &&
        value != NULL) {
        char pci[32];
        *value = gdu_shim_dma_buf_attribute(s, *value, device_pci(real, dev, pci, sizeof pci),
                                            asking_library());
    }
    const char *caller = traced_caller(s, __builtin_return_address(0));
    if (caller != NULL)
        gdu_shim_trace(s,
                       "%s calls cuDeviceGetAttribute(%d) of device %d: status %d, value %d "
                       "(libcuda's %d)",
                       caller, attr, (int)dev, (int)r, r == GDU_CUDA_SUCCESS ? *value : -1,
                       libcuda_value);
    return r;
}

GDU_EXPORT gdu_CUresult cuGetProcAddress(const char *symbol, void **pfn, int version,
                                         unsigned long long flags, int *status)
{
    get_proc_v1_fn real = REAL(g_get_proc_v1, "libcuda.so.1", "cuGetProcAddress");
    if (real == NULL)
        return GDU_CUDA_ERROR_NOT_INITIALIZED;
    return got_proc(real(symbol, pfn, version, flags, status), symbol, pfn, version,
                    __builtin_return_address(0));
}

GDU_EXPORT gdu_CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                            unsigned long long flags, int *status)
{
    get_proc_v2_fn real = REAL(g_get_proc_v2, "libcuda.so.1", "cuGetProcAddress_v2");
    if (real == NULL)
        return GDU_CUDA_ERROR_NOT_INITIALIZED;
    return got_proc(real(symbol, pfn, version, flags, status), symbol, pfn, version,
                    __builtin_return_address(0));
}

/* CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE holds 0 or 1 ("1 if the
 * memory this pointer is referencing can be used with the GPUDirect RDMA
 * API", cuda.h). Its C type is not documented: the driver API reference
 * lists it under neither cuPointerGetAttribute nor cuPointerGetAttributes;
 * NVIDIA's cuda-python reads an unsigned int, other callers an int or a
 * one-byte bool. 0 and 1 differ in the lowest byte alone, so the shim reads
 * that byte and writes it only where its answer differs from libcuda's (a
 * buffer the unlock registered, or the test mode): every other byte, and an
 * answer it keeps, stay as libcuda left them. Called only after libcuda
 * succeeded: its errors, and the caller's buffer with them, pass untouched. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the lowest byte comes first");
static void rdma_capable(gdu_shim *s, void *data, gdu_CUdeviceptr ptr)
{
    unsigned char *low = data;
    bool libcuda = *low != 0;
    bool answer = gdu_shim_rdma_pointer_attribute(s, libcuda, (uint64_t)ptr, asking_library()) != 0;
    if (answer != libcuda)
        *low = answer;
}

GDU_EXPORT gdu_CUresult cuPointerGetAttribute(void *data, int attribute, gdu_CUdeviceptr ptr)
{
    pointer_attribute_fn real = REAL(g_pointer_attribute, "libcuda.so.1", "cuPointerGetAttribute");
    if (real == NULL)
        return GDU_CUDA_ERROR_NOT_INITIALIZED;
    gdu_CUresult r = real(data, attribute, ptr);
    gdu_shim *s = gdu_preload_shim();
    int libcuda_value = r == GDU_CUDA_SUCCESS && data != NULL ? *(unsigned char *)data : -1;
    if (s != NULL && r == GDU_CUDA_SUCCESS && data != NULL &&
        attribute == POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE)
        rdma_capable(s, data, ptr);
    const char *caller = traced_caller(s, __builtin_return_address(0));
    if (caller != NULL)
        gdu_shim_trace(s, "%s calls cuPointerGetAttribute(%d) of 0x%llx: status %d%s", caller,
                       attribute, (unsigned long long)ptr, (int)r,
                       attribute == POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE &&
                               libcuda_value >= 0
                           ? *(unsigned char *)data ? ", value 1" : ", value 0"
                           : "");
    return r;
}

GDU_EXPORT gdu_CUresult cuPointerGetAttributes(unsigned count, int *attributes, void **data,
                                               gdu_CUdeviceptr ptr)
{
    pointer_attributes_fn real =
        REAL(g_pointer_attributes, "libcuda.so.1", "cuPointerGetAttributes");
    if (real == NULL)
        return GDU_CUDA_ERROR_NOT_INITIALIZED;
    gdu_CUresult r = real(count, attributes, data, ptr);
    gdu_shim *s = gdu_preload_shim();
    if (s == NULL || r != GDU_CUDA_SUCCESS || attributes == NULL || data == NULL)
        return r;
    char asked[160] = "";
    size_t used = 0;
    for (unsigned i = 0; i < count; i++) {
        if (attributes[i] == POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE && data[i] != NULL)
            rdma_capable(s, data[i], ptr);
        if (used < sizeof asked)
            used += (size_t)snprintf(asked + used, sizeof asked - used, "%s%d", i ? "," : "",
                                     attributes[i]);
    }
    const char *caller = traced_caller(s, __builtin_return_address(0));
    if (caller != NULL)
        gdu_shim_trace(s, "%s calls cuPointerGetAttributes(%s) of 0x%llx: status %d", caller, asked,
                       (unsigned long long)ptr, (int)r);
    return r;
}

/* The handle type (1: a dma-buf descriptor) and flags (1: the dma-buf
 * mapped through the PCIe BAR, CUDA 12.8's CU_MEM_RANGE_FLAG_DMA_BUF_
 * MAPPING_TYPE_PCIE) are traced as numbers: what libcufile asks is the
 * finding. Where libcuda refuses a dma-buf (GeForce; under the stand-in the
 * shim refuses in its place and closes libcuda's), the shim makes one under
 * `gdunlock run --rdma` (shim_dmabuf.c). */
GDU_EXPORT gdu_CUresult cuMemGetHandleForAddressRange(void *handle, gdu_CUdeviceptr ptr,
                                                      size_t size, int type,
                                                      unsigned long long flags)
{
    range_handle_fn real = REAL(g_range_handle, "libcuda.so.1", "cuMemGetHandleForAddressRange");
    if (real == NULL)
        return GDU_CUDA_ERROR_NOT_INITIALIZED;
    gdu_CUresult r = real(handle, ptr, size, type, flags);
    gdu_CUresult libcuda = r;
    gdu_shim *s = gdu_preload_shim();
    if (s != NULL && handle != NULL && type == GDU_CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD) {
        if (r == GDU_CUDA_SUCCESS && gdu_shim_stands_in_dma_buf(s)) {
            close(*(int *)handle);
            r = GDU_CUDA_ERROR_NOT_SUPPORTED;
        }
        char why[256];
        int fd = r != GDU_CUDA_SUCCESS
                     ? gdu_shim_export_dmabuf(s, (uint64_t)ptr, size, flags, why, sizeof why)
                     : -1;
        if (fd >= 0) {
            *(int *)handle = fd;
            r = GDU_CUDA_SUCCESS;
        }
    }
    const char *caller = traced_caller(s, __builtin_return_address(0));
    if (caller != NULL)
        gdu_shim_trace(s,
                       "%s calls cuMemGetHandleForAddressRange(0x%llx, %zu bytes, handle type %d, "
                       "flags 0x%llx): status %d (libcuda's %d)",
                       caller, (unsigned long long)ptr, size, type, flags, (int)r, (int)libcuda);
    return r;
}

/* ---- cuFile ---- */

/* What CUDA says the buffer is: "device", "host", "managed", or NULL. */
static const char *memory_kind(const void *ptr)
{
    pointer_attribute_fn real = REAL(g_pointer_attribute, "libcuda.so.1", "cuPointerGetAttribute");
    if (real == NULL)
        return NULL;
    int managed = 0;
    unsigned type = 0;
    if (real(&managed, POINTER_ATTRIBUTE_IS_MANAGED, (gdu_CUdeviceptr)(uintptr_t)ptr) ==
            GDU_CUDA_SUCCESS &&
        managed)
        return "managed";
    if (real(&type, POINTER_ATTRIBUTE_MEMORY_TYPE, (gdu_CUdeviceptr)(uintptr_t)ptr) !=
        GDU_CUDA_SUCCESS)
        return "host"; /* memory CUDA does not know: plain host memory */
    return type == MEMORYTYPE_DEVICE ? "device" : type == MEMORYTYPE_HOST ? "host" : NULL;
}

/* A client of an MPS server: its GPU memory is the server's. */
static bool mps_client(void)
{
    const char *dir = getenv("CUDA_MPS_PIPE_DIRECTORY");
    char path[512];
    snprintf(path, sizeof path, "%s/control", dir != NULL && dir[0] ? dir : "/tmp/nvidia-mps");
    return access(path, F_OK) == 0;
}

GDU_EXPORT gdu_CUfileError cuFileBufRegister(const void *ptr, size_t size, int flags)
{
    buf_register_fn real = REAL(g_buf_register, "libcufile.so.0", "cuFileBufRegister");
    if (real == NULL)
        return (gdu_CUfileError){GDU_CU_FILE_DRIVER_NOT_INITIALIZED, 0};
    gdu_CUfileError r = real(ptr, size, flags);
    gdu_shim *s = gdu_preload_shim();
    if (s != NULL)
        gdu_shim_cufile_registered(s, (uint64_t)(uintptr_t)ptr, size, flags, r.err,
                                   memory_kind(ptr), mps_client());
    return r;
}

GDU_EXPORT gdu_CUfileError cuFileBufDeregister(const void *ptr)
{
    buf_deregister_fn real = REAL(g_buf_deregister, "libcufile.so.0", "cuFileBufDeregister");
    if (real == NULL)
        return (gdu_CUfileError){GDU_CU_FILE_DRIVER_NOT_INITIALIZED, 0};
    gdu_CUfileError r = real(ptr);
    gdu_shim *s = gdu_preload_shim();
    if (s != NULL && r.err == GDU_CU_FILE_SUCCESS)
        gdu_shim_cufile_deregistered(s, (uint64_t)(uintptr_t)ptr);
    return r;
}
