/* The shim's core: watches a process's RM and UVM ioctls, tracks its RM
 * objects and GPU mappings, and gives every GPU where libcuda made no
 * ThirdPartyP2P (NV503C) object one of its own, with the VA spaces and every
 * mapped device allocation registered. It talks to the driver only through
 * the ops it is given, so tests run it against a fake RM. It never prints:
 * log lines go to ops.log. */
#ifndef GDUNLOCK_SHIM_CORE_H
#define GDUNLOCK_SHIM_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { GDU_FD_OTHER = 0, GDU_FD_RM, GDU_FD_UVM } gdu_fd_kind;

enum { GDU_LOG_ERROR = 0, GDU_LOG_INFO = 1, GDU_LOG_DEBUG = 2 };

typedef struct {
    /* The real ioctl. */
    int (*ioctl)(void *ctx, int fd, unsigned long request, void *arg);
    /* What kind of NVIDIA node fd is (asked only for requests the shim watches). */
    gdu_fd_kind (*fd_kind)(void *ctx, int fd);
    /* Copies n bytes at addr, a block handed to an ioctl that has not run yet
     * (so possibly invalid), into dst. Returns 0, or -1 when unreadable. */
    int (*read_block)(void *ctx, const void *addr, void *dst, size_t n);
    /* One finished log line, "gdunlock: ..." without newline. */
    void (*log)(void *ctx, int level, const char *line);
    void *ctx;
    /* BAR1 size of the GPU at PCI address pci ("0000:41:00.0"), 0 when not
     * known; may be NULL. Asked once per GPU, outside the ioctl path. */
    uint64_t (*bar1_bytes)(void *ctx, const char *pci);
    /* RM's own BAR1 figures of that GPU (rm/rm_bar1_info.h): its size and
     * what no process maps now. Returns 0, else -errno with why; may be
     * NULL. Asked outside the ioctl path, with the shim's lock held, so its
     * RM calls must not come back through the shim. */
    int (*rm_bar1)(void *ctx, const char *pci, uint64_t *total, uint64_t *available, char *why,
                   size_t why_len);
    /* Opens the device file (/dev/nvidiaN) of the GPU at pci for an escape
     * the kernel takes only there; returns the fd or -errno. May be NULL
     * (then the shim makes no dma-buf). */
    int (*open_gpu_file)(void *ctx, const char *pci);
    /* Closes an fd the shim opened or got from the kernel. */
    void (*close_file)(void *ctx, int fd);
} gdu_shim_ops;

typedef struct {
    int log_level;
    /* Test mode: free libcuda's own NV503C right after it is made and re-create
     * it under the same handle as ours (the GeForce state, on a datacenter GPU). */
    bool test_drop_native;
    /* Stricter test mode (with test_drop_native): libcuda's NV503C is freed
     * right after it is made and the shim makes its own under an RM-generated
     * handle; libcuda's later calls on its freed handle (controls, free) are
     * answered NV_OK by the shim and never reach RM, as if libcuda were the
     * GeForce one that never makes them. Every registration RM holds is then
     * the shim's own. */
    bool test_strict;
    /* Fault injection: the n-th RM call the shim itself makes fails (0: none). */
    uint64_t fault_at;
    /* Driver version text (/sys/module/nvidia_uvm/version or
     * /proc/driver/nvidia/version); NULL or unknown: the shim stays passive. */
    const char *driver_version;
    /* The process (RM records its pid with each client it makes, and the
     * kernel's lookup searches by it). */
    uint32_t pid;
    /* Answer 1 for CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED on GPUs the
     * shim unlocks and for CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE of
     * buffers it registered there (libcufile and the loaders refuse GPUDirect
     * Storage where they read 0), except to the RDMA networking libraries
     * (NCCL and the like), for which the unlock changes nothing. */
    bool rdma_attr_answer;
    /* gdunlock run --rdma (GDUNLOCK_RDMA=1): the same answers go to the RDMA
     * networking libraries too (NCCL's GPU check, ibverbs programs), whose
     * NIC reaches the same ThirdPartyP2P registrations through
     * nvidia-peermem (docs/rdma-model.md). Off: they keep libcuda's answer. */
    bool rdma_network;
    /* Test mode: libcuda's own answer for both attributes reads 0, as on
     * GeForce, before the shim's answer; so does CU_DEVICE_ATTRIBUTE_DMA_BUF_
     * SUPPORTED, which GeForce libcuda does not advertise either. */
    bool test_rdma_attr_zero;
} gdu_shim_config;

typedef struct gdu_shim gdu_shim;

/* NULL only when out of memory. */
gdu_shim *gdu_shim_new(const gdu_shim_config *cfg, const gdu_shim_ops *ops);
void gdu_shim_free(gdu_shim *s);

/* Runs one ioctl through the shim: watched requests are tracked and acted on
 * around the real call; the real call's arguments, result and errno are
 * passed back untouched. */
int gdu_shim_ioctl(gdu_shim *s, int fd, unsigned long request, void *arg);

/* Fork support: lock before fork, unlock after it in the parent; in the child
 * the shim unlocks and turns passive (the RM objects belong to the parent). */
void gdu_shim_fork_prepare(gdu_shim *s);
void gdu_shim_fork_parent(gdu_shim *s);
void gdu_shim_fork_child(gdu_shim *s);

typedef struct {
    uint64_t clients;            /* RM clients tracked now */
    uint64_t objects_created;    /* NV503C objects the shim made */
    uint64_t registered;         /* registrations made on the shim's NV503C objects (by the shim;
                                   in test mode also libcuda's on the object that replaced its own) */
    uint64_t already_registered; /* mappings found registered already (0x19, or by libcuda) */
    uint64_t unregistered;       /* of those, ended since (unregistered, or dropped by RM) */
    uint64_t live;               /* registered - unregistered */
    uint64_t failures;           /* RM calls of the shim that failed */
    uint64_t rm_calls;           /* RM calls the shim made */
    uint64_t mappings;           /* GPU mappings tracked now */
    uint64_t objects;            /* RM objects tracked now (the process's, and the shim's) */
} gdu_shim_totals;

void gdu_shim_get_totals(gdu_shim *s, gdu_shim_totals *out);

/* Test support: proves through RM whether the memory mapped at gpu_va is
 * registered with its GPU's NV503C: a REGISTER_VIDMEM of that memory at an
 * address no allocation has answers NV_ERR_INSERT_DUPLICATE_NAME exactly when
 * it is (RM keys registrations by memory first); an answer of NV_OK means no,
 * and is undone at once. For an address whose mapping was freed recently,
 * asks UNREGISTER_VIDMEM of its old memory handle: NV_ERR_OBJECT_NOT_FOUND
 * means no longer registered (NV_OK without asking: that handle is registered
 * again for a mapping elsewhere). Where the registration lies is the kernel
 * lookup's question (gdu_shim_pin_lookup). Returns 1 (registered), 0 (not),
 * or -1 (nothing known at gpu_va, or no NV503C to ask); *status gets RM's
 * answer. */
int gdu_shim_probe_registered(gdu_shim *s, uint64_t gpu_va, uint32_t *status);

/* The report as a JSON document (docs/shim-report.md): process, driver,
 * layout, per GPU the mode (native / unlocked / failed + reason / idle),
 * the VA space registered and why, objects created, allocations registered
 * / unregistered, failures by status name; the buffers registered with
 * cuFile with the kernel lookup's verdict for each; and, with
 * with_registrations, every registration RM holds for the process. Caller
 * frees; NULL when out of memory. */
char *gdu_shim_report_json(gdu_shim *s, bool with_registrations);

/* The program registered [ptr, ptr + size) with cuFile (cuFileBufRegister
 * answered status, a CUfileOpError); memory_kind is what CUDA says the
 * memory is ("device", "host", "managed", or NULL: not asked), mps whether
 * the process is a client of an MPS server. Runs the kernel lookup's model
 * over the registrations RM holds now and records its verdict. */
void gdu_shim_cufile_registered(gdu_shim *s, uint64_t ptr, uint64_t size, int flags, int status,
                                const char *memory_kind, bool mps);
/* The value a caller sees for CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED
 * of the GPU at PCI address pci ("0000:41:00.0", or NULL when unknown), given
 * libcuda's own value; caller is the file name of the library or program
 * that asked (NULL: unknown). Counted for the report. */
int gdu_shim_rdma_attribute(gdu_shim *s, int libcuda_value, const char *pci, const char *caller);

/* The value a caller sees for CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE
 * of the buffer at GPU VA ptr, given libcuda's own value: 1 where the memory
 * there is registered with an NV503C of the shim's own (the GPU is
 * unlocked), libcuda's answer elsewhere and (without rdma_network) for the
 * RDMA networking libraries; the test mode (test_rdma_attr_zero) and rdma_attr_answer apply
 * as for the device attribute. Counted for the report. */
int gdu_shim_rdma_pointer_attribute(gdu_shim *s, int libcuda_value, uint64_t ptr,
                                    const char *caller);

/* Debug log level: the trace of what libcufile resolves from libcuda and
 * asks of it (the interposer writes it; docs/shim-report.md). */
bool gdu_shim_tracing(const gdu_shim *s);
void gdu_shim_trace(gdu_shim *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED of the GPU at pci as a caller sees
 * it, given libcuda's value: 0 under the GeForce stand-in
 * (test_rdma_attr_zero), as GeForce libcuda reads; then, under
 * rdma_network, 1 on a GPU the shim unlocks, where it makes the dma-bufs
 * itself (gdu_shim_export_dmabuf), unless RM refused one there as
 * unsupported. Counted for the report. */
int gdu_shim_dma_buf_attribute(gdu_shim *s, int libcuda_value, const char *pci, const char *caller);

/* gdunlock run --rdma: a dma-buf of [va, va + size) of the process's GPU
 * memory, made by the shim where libcuda refused one
 * (cuMemGetHandleForAddressRange, flags as given there; docs/rdma-model.md
 * section 3). Returns its fd, or -1 with why: not under --rdma, a GPU the
 * shim does not unlock, a range that is not whole pages of tracked video
 * memory of one client and GPU, a PCIe-mapping flag, or the kernel's
 * refusal named. Counted per GPU for the report. */
int gdu_shim_export_dmabuf(gdu_shim *s, uint64_t va, uint64_t size, unsigned long long flags,
                           char *why, size_t why_len);

/* Under the GeForce stand-in (test_rdma_attr_zero) libcuda's own dma-buf
 * of a range is refused as GeForce libcuda refuses it (CUDA_ERROR_NOT_
 * SUPPORTED), so that the shim's export is what a caller gets. */
bool gdu_shim_stands_in_dma_buf(const gdu_shim *s);

/* True for the libraries that read the attribute for GPUDirect RDMA with a
 * network adapter (NCCL, NVSHMEM, UCX, libfabric, MPI, gdrcopy, verbs): they
 * keep libcuda's answer unless rdma_network is on.
 * caller: a path or file name. */
bool gdu_shim_caller_is_rdma_network(const char *caller);

/* The program deregistered the cuFile buffer at ptr. */
void gdu_shim_cufile_deregistered(gdu_shim *s, uint64_t ptr);

/* What the kernel's lookup (src/pinmodel) finds for [ptr, ptr + size) over
 * the registrations RM holds now: a gdu_pin_rule (0: found), *err the errno,
 * why one line (may be NULL). */
int gdu_shim_pin_lookup(gdu_shim *s, uint64_t ptr, uint64_t size, int *err, char *why,
                        size_t why_len);

/* Test support: the RM client, memory handle and the client's RM fd of the
 * mapping that holds GPU VA va. Returns 0, or -1 when nothing known is
 * mapped there. */
int gdu_shim_mapping_handles(gdu_shim *s, uint64_t va, uint32_t *client, uint32_t *memory,
                             int *rm_fd);

/* True once the process made an RM client (worth a report). */
bool gdu_shim_saw_gpu(gdu_shim *s);

#endif
