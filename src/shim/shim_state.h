/* The shim core's internal state, shared by its source files (shim_core.c:
 * ioctl hooks and object tracking; shim_tpp.c: the NV503C lifecycle;
 * shim_report.c: the report). All of it is guarded by gdu_shim.lock. */
#ifndef GDUNLOCK_SHIM_STATE_H
#define GDUNLOCK_SHIM_STATE_H

#include "driverabi/uvm_abi.h"
#include "shim/shim_decode.h"
#include "shim/shim_core.h"
#include "shim/shim_map.h"

#include <pthread.h>
#include <stdarg.h>

#define GDU_SHIM_MAX_VASPACES 8 /* FERMI_VASPACE_A per device we follow */
#define GDU_SHIM_GPU_SLOTS 33   /* RM device instances 0..31, and "unknown" */
#define GDU_SHIM_FAIL_KINDS 8   /* distinct failure statuses counted per GPU */
#define GDU_SHIM_FREED_RING 64  /* recently freed mappings kept for probes */
#define GDU_SHIM_CUFILE_BUFS 64 /* cuFile buffer registrations kept for the report */
#define GDU_SHIM_MAX_DEPS 16    /* VA spaces whose free invalidates an NV503C, per NV503C */

typedef enum { GDU_TPP_NONE = 0, GDU_TPP_NATIVE, GDU_TPP_UNLOCKED, GDU_TPP_FAILED } gdu_tpp_mode;

/* One tracked RM object; key = client << 32 | handle. */
typedef struct gdu_obj {
    gdu_map_node node;
    uint32_t client, handle, parent, cls;
    uint32_t children; /* tracked direct children */
    int fd;            /* client: the fd it was allocated on (where our calls go) */
    uint32_t instance; /* device: deviceId; subdevice: subDeviceId */
    /* device: its first subdevice and its VA spaces */
    uint32_t subdevice;
    /* VA space: the process registered it with UVM for its GPU
     * (UVM_REGISTER_GPU_VASPACE): UVM maps the process's allocations there */
    bool uvm_registered;
    uint32_t vaspaces[GDU_SHIM_MAX_VASPACES];
    unsigned n_vaspaces;
    /* subdevice: the NV503C in use there, and whose it is */
    gdu_tpp_mode mode;
    uint32_t tpp;
    bool tpp_owned;
    /* NV503C: made by the shim under libcuda's handle (test mode), and the VA
     * spaces registered with it */
    bool tpp_adopted;
    /* NV503C: libcuda's, freed in RM by the shim (strict test mode); the shim
     * answers libcuda's calls on this handle itself */
    bool tpp_answered;
    uint32_t tpp_vaspaces[GDU_SHIM_MAX_VASPACES];
    unsigned n_tpp_vaspaces;
    uint64_t tpp_vaspace_tokens[GDU_SHIM_MAX_VASPACES]; /* RM's vaSpaceToken for each */
    uint32_t tpp_vaspaces_by_shim; /* bit i: tpp_vaspaces[i] was registered by the shim */
    uint32_t tpp_vaspaces_failed[GDU_SHIM_MAX_VASPACES]; /* tried, RM refused: not retried */
    unsigned n_tpp_vaspaces_failed;
    /* NV503C: every handle ever registered as its VA space. Freeing any of
     * them, unregistered since or not, makes RM invalidate the object: it is
     * destroyed but its handle stays until freed (third_party_p2p.c:394
     * against 403-421; rs_server.c:974-982 and 1336-1372; rs_client.c:811-871;
     * 580.142) */
    uint32_t tpp_deps[GDU_SHIM_MAX_DEPS];
    unsigned n_tpp_deps;
    uint32_t tpp_invalidated_with; /* NV503C invalidated as this VA space is freed (0: not so) */
    /* memory: where it is registered (reg_tpp == 0: nowhere we know of), by
     * whom, and whether it counts in the report (made on an NV503C of the
     * shim's own: by the shim, or in test mode by libcuda on the object that
     * replaced its own) */
    uint32_t reg_tpp;
    bool reg_by_shim;
    bool reg_counted;
    unsigned n_mappings; /* memory: its live UVM mappings */
    uint64_t reg_address, reg_size, reg_offset;
} gdu_obj;

/* One GPU mapping made by UVM_MAP_EXTERNAL_ALLOCATION; key = base. */
typedef struct {
    gdu_map_node node;
    uint64_t base, length, offset;
    uint32_t client, memory;
} gdu_mapping;

typedef struct {
    uint64_t base;
    uint32_t client, memory, tpp;
} gdu_freed_mapping;

/* One buffer the program registered with cuFile, and what the kernel's
 * lookup (src/pinmodel) says nvidia-fs finds for it. */
typedef struct {
    uint64_t seq; /* 1, 2, ... in registration order; 0: entry unused */
    uint64_t ptr, size;
    int flags;
    int status;    /* cuFileBufRegister's CUfileOpError */
    bool live;     /* not deregistered since */
    unsigned slot; /* GPU stats slot of the verdict's GPU */
    int rule;      /* gdu_pin_rule */
    int err;
    uint64_t pinned;      /* bytes of BAR1 the pin takes (found) */
    char memory_kind[16]; /* what cuPointerGetAttribute says it is, when asked */
    char why[400];
} gdu_cufile_buf;

typedef struct {
    bool seen;
    gdu_tpp_mode mode; /* the most telling one over the GPU's subdevices */
    char pci[32];      /* "0000:41:00.0", or "" when RM did not say */
    char reason[200];
    uint64_t objects_created, va_spaces_registered;
    uint64_t registered, registered_by_libcuda, already_registered, unregistered;
    uint64_t skipped, skipped_bytes, failures;
    uint64_t answered_for_libcuda; /* strict test mode: libcuda's NV503C calls the shim answered */
    /* the VA space registered with the NV503C in use, and why that one */
    uint32_t vaspace;
    const char *vaspace_source; /* "uvm", "first" (no UVM registration seen), "libcuda" */
    uint64_t second_mappings; /* mappings of memory registered elsewhere already: not registered */
    uint64_t stale_unregistered; /* registrations taken back because their VA was unmapped */
    uint64_t bar1_bytes;         /* BAR1 size (0: unknown) */
    bool bar1_asked;
    /* RM's BAR1 figures (ops.rm_bar1), asked again for each report, since
     * every process's pins and mappings move them; 0 unknown, with why. */
    uint64_t rm_bar1_total, rm_bar1_available;
    char rm_bar1_why[128];
    uint64_t cufile_pinned; /* bytes the model pins for live cuFile buffers */
    /* dma-bufs the shim made here (gdunlock run --rdma), refusals, the last
     * refusal's cause, and whether RM said the kernel's dma-buf support is
     * off for this GPU (then the DMA-BUF attribute reads libcuda's 0) */
    uint64_t dmabuf_exports, dmabuf_failures;
    bool dmabuf_unsupported;
    char dmabuf_why[200];
    /* native: why libcuda's NV503C holds nothing of the program's ("": it does) */
    char native_empty[320];
    struct {
        uint32_t status;
        uint64_t count;
    } fail[GDU_SHIM_FAIL_KINDS];
} gdu_gpu_stats;

typedef struct gdu_testmode gdu_testmode;

/* One GPUDirect RDMA attribute: queries where libcuda's answer was 0,
 * those answered 1 (of them, to an RDMA networking library), those whose 0
 * was kept, and the first RDMA networking library it was kept for. */
typedef struct {
    uint64_t asked, answered, answered_for_network, kept;
    char kept_for[64];
} gdu_attr_answers;

struct gdu_shim {
    pthread_mutex_t lock;
    gdu_shim_config cfg;
    const gdu_testmode *testmode; /* NULL outside the test modes */
    gdu_shim_ops ops;
    bool passive;          /* forked child: pass everything through */
    bool saw_client;       /* the process made an RM client */
    bool layout_known;     /* the UVM layout for this driver is known... */
    bool layout_validated; /* ...and a real mapping block matched it */
    bool refused;          /* acting refused for the process (reason in refusal) */
    gdu_uvm_layout layout;
    char driver[64];
    unsigned driver_version[3]; /* parsed from cfg.driver_version; 0.0.0 when unknown */
    char refusal[256];
    gdu_map objects;
    gdu_map mappings;
    gdu_freed_mapping freed[GDU_SHIM_FREED_RING];
    unsigned freed_next;
    uint64_t clients;
    unsigned owned_tpp;    /* NV503C objects of the shim's own now (read without the lock) */
    unsigned answered_tpp; /* libcuda NV503C handles the shim answers for (read without the lock) */
    uint64_t rm_calls;     /* the shim's own, fault injection counts these */
    gdu_gpu_stats gpus[GDU_SHIM_GPU_SLOTS];
    unsigned char
        map_block[sizeof(gdu_uvm_map_external_params_256)]; /* copy of the block being read */
    uint32_t pid; /* the process (RM's pid of its clients), for the kernel-lookup model */
    gdu_cufile_buf cufile[GDU_SHIM_CUFILE_BUFS];
    uint64_t cufile_registered, cufile_found; /* every cuFileBufRegister seen, and found */
    uint64_t cufile_dropped;                  /* of those, not (or no longer) listed */
    gdu_attr_answers rdma_device_attr;        /* CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED */
    gdu_attr_answers rdma_pointer_attr;       /* CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE */
    gdu_attr_answers dma_buf_attr;            /* CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED */
};

/* shim_objects.c: the record of RM objects, the per-GPU statistics, the log. */
gdu_obj *gdu_shim_device_of(gdu_shim *s, const gdu_obj *o);
gdu_obj *gdu_shim_obj(gdu_shim *s, uint32_t client, uint32_t handle);
gdu_obj *gdu_shim_obj_add(gdu_shim *s, uint32_t client, uint32_t handle, uint32_t parent,
                          uint32_t cls);
void gdu_shim_obj_remove(gdu_shim *s, gdu_obj *o);
gdu_obj *gdu_shim_subdevice_of(gdu_shim *s, const gdu_obj *memory);
void gdu_shim_log(gdu_shim *s, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void gdu_shim_vlog(gdu_shim *s, int level, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
gdu_gpu_stats *gdu_shim_gpu(gdu_shim *s, const gdu_obj *subdevice);
/* The tracked mapping that holds GPU VA va, or NULL. */
gdu_mapping *gdu_shim_mapping_at(gdu_shim *s, uint64_t va);

/* shim_tpp.c: counts one RM call of the shim's own (the NV503C calls, the
 * dma-buf export); true, logged, when fault injection (cfg.fault_at) makes
 * this one fail. Under the lock. */
bool gdu_shim_own_call_faulted(gdu_shim *s);

/* shim_tpp.c: the NV503C lifecycle on one subdevice. */
/* Registers the mapping's memory with the subdevice's NV503C, creating that
 * object (and registering the device's VA spaces) first where needed. */
void gdu_tpp_on_mapping(gdu_shim *s, gdu_obj *subdevice, gdu_obj *memory, const gdu_mapping *m);
/* The process registered this VA space with UVM (UVM_REGISTER_GPU_VASPACE). */
void gdu_tpp_on_uvm_vaspace(gdu_shim *s, gdu_obj *vaspace);
/* [base, base + length) of the process's GPU VA is about to be unmapped or
 * freed: the shim's registrations there end first. */
void gdu_tpp_unmapping(gdu_shim *s, uint64_t base, uint64_t length);
/* A new VA space under a device whose subdevice has our NV503C. */
void gdu_tpp_on_vaspace(gdu_shim *s, gdu_obj *subdevice, uint32_t vaspace);
/* libcuda made its own NV503C under subdevice (post-call). */
void gdu_tpp_on_native(gdu_shim *s, gdu_obj *subdevice, gdu_obj *tpp);
/* libcuda is about to make an NV503C under subdevice (pre-call). */
void gdu_tpp_before_native(gdu_shim *s, gdu_obj *subdevice);
/* Ends the shim's registration of memory (pre-free / pre-unmap). */
void gdu_tpp_unregister(gdu_shim *s, gdu_obj *memory);
/* memory's registration is gone (RM dropped it, or it was unregistered): counts it. */
void gdu_tpp_registration_ended(gdu_shim *s, gdu_obj *memory);
/* An NV503C control succeeded: follow the registrations it made or ended. */
void gdu_tpp_after_control(gdu_shim *s, gdu_obj *tpp, uint32_t cmd, const void *params,
                           size_t size);
/* The NV503C tpp is gone (freed directly or with a parent) or dead
 * (invalidated with a VA space): the shim stops following it. */
void gdu_tpp_forget(gdu_shim *s, gdu_obj *tpp);
/* RM invalidated the NV503C tpp as a VA space once registered with it
 * (tpp->tpp_invalidated_with) was freed, while its subdevice lives on: its
 * handle stays, dead, and keeps any new NV503C off the subdevice until it is
 * freed. Logged; the shim frees its own dead handle (a new object is made at
 * the next mapping); for libcuda's, the GPU's report says why it holds
 * nothing and that libcuda must free it first. */
void gdu_tpp_invalidated(gdu_shim *s, gdu_obj *tpp);
/* The primitives of shim_tpp.c that the test modes use too. */
uint32_t gdu_tpp_own_alloc(gdu_shim *s, uint32_t client, uint32_t parent, uint32_t *handle,
                           uint32_t cls, void *params, uint32_t params_size);
uint32_t gdu_tpp_own_free(gdu_shim *s, uint32_t client, uint32_t parent, uint32_t handle);
uint32_t gdu_tpp_own_control(gdu_shim *s, const gdu_obj *tpp, uint32_t cmd, void *params,
                             uint32_t size, bool counted);
void gdu_tpp_failure(gdu_shim *s, gdu_obj *sub, uint32_t status, const char *what);
/* Making the shim's own NV503C (what) failed with status: counted, logged,
 * and the GPU's mode is failed with that reason. */
void gdu_tpp_own_failed(gdu_shim *s, gdu_obj *sub, uint32_t status, const char *what);
/* The shim's own NV503C tpp now serves sub: the GPU is unlocked. */
void gdu_tpp_own_made(gdu_shim *s, gdu_obj *sub, gdu_obj *tpp);
void gdu_tpp_set_mode(gdu_shim *s, gdu_obj *sub, gdu_tpp_mode mode, const char *reason);
unsigned gdu_tpp_gpu_number(gdu_shim *s, const gdu_obj *sub);
bool gdu_tpp_create(gdu_shim *s, gdu_obj *sub);
/* Gives tpp exactly one VA space; returns the NV503C serving sub afterwards
 * (a new one where the shim's own had to be made again), or NULL. */
gdu_obj *gdu_tpp_ensure_vaspace(gdu_shim *s, gdu_obj *sub, gdu_obj *tpp);
void gdu_tpp_unregister_own_vaspaces(gdu_shim *s, gdu_obj *tpp);
void gdu_tpp_remove_vaspace(gdu_obj *tpp, uint32_t vaspace);
bool gdu_tpp_vaspace_by_shim(const gdu_obj *tpp, unsigned i);
gdu_obj *gdu_tpp_registration_overlapping(gdu_shim *s, const gdu_obj *tpp, uint64_t address,
                                          uint64_t size, bool by_shim_only);

/* shim_testmode.c: the test modes (GDUNLOCK_TEST_DROP_NATIVE), one policy each. */
struct gdu_testmode {
    const char *name;
    /* libcuda made its own NV503C under sub (post-call). */
    void (*on_native)(gdu_shim *s, gdu_obj *sub, gdu_obj *tpp);
    /* libcuda's NV503C controls go to the shim's object: gdu_testmode_before_control. */
    bool sees_controls;
};
/* The mode cfg asks for, or NULL. */
const gdu_testmode *gdu_testmode_for(const gdu_shim_config *cfg);
/* Strict mode: answers a call of libcuda's on the NV503C handle the shim freed
 * for it (it never reaches RM). True with *status set when it is one. */
bool gdu_testmode_answer(gdu_shim *s, const gdu_rm_call *c, uint32_t *status);
/* Mode "1": libcuda is about to issue NV503C control cmd on the object that
 * replaced its own; the shim steps aside so that libcuda gets its own answer. */
void gdu_testmode_before_control(gdu_shim *s, gdu_obj *tpp, uint32_t cmd, const void *params,
                                 size_t size);
/* Test probe (see gdu_shim_probe_registered). */
int gdu_testmode_probe(gdu_shim *s, uint64_t gpu_va, uint32_t *status);

/* shim_pin.c: asks ops.bar1_bytes and ops.rm_bar1 for every GPU whose PCI
 * address is known: once, or RM again when refresh_rm. */
void gdu_shim_fill_bar1(gdu_shim *s, bool refresh_rm);

#endif
