#include "fake_rm.h"

#include "driverabi/ctrl0000_gpu.h"
#include "driverabi/nv503c.h"
#include "driverabi/nv_classes.h"
#include "driverabi/nv_dmabuf.h"
#include "driverabi/nv_escape.h"
#include "driverabi/nv_status.h"
#include "driverabi/nvos.h"
#include "driverabi/uvm_abi.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FAKE_MAX_FDS 256
#define FAKE_MAX_VAS 8
#define FAKE_MAX_DEPS 16

typedef struct {
    uint32_t client, handle, parent, cls;
    bool live;
    /* RM destroyed the object but keeps its handle (see do_free): controls
     * answer NV_ERR_RESOURCE_LOST, a free only removes the handle */
    bool invalidated;
    /* NV503C: its VA spaces, and every handle ever registered as one, which
     * RM keeps as a dependency even after UNREGISTER_VA_SPACE: freeing that
     * object invalidates the NV503C (third_party_p2p.c:394 vs 403-421,
     * rs_server.c:974-982 and 1336-1372, 580.142) */
    uint32_t vaspaces[FAKE_MAX_VAS];
    unsigned n_vaspaces;
    uint32_t deps[FAKE_MAX_DEPS];
    unsigned n_deps;
    uint32_t instance; /* device: its deviceId */
    uint64_t size;     /* memory: the furthest end a UVM mapping of it reached */
} fake_obj;

typedef struct {
    uint32_t client, tpp, memory;
    uint64_t address, size, offset;
    bool live;
} fake_reg;

#define FAKE_MAX_DMABUFS 16

struct fake_rm {
    pthread_mutex_t lock;
    gdu_fd_kind fds[FAKE_MAX_FDS];
    int gpu_fd_instance[FAKE_MAX_FDS]; /* 1 + device instance of a GPU file; 0: not one */
    uint32_t gpu_file_instance;        /* the GPU the next opened GPU file is */
    bool dmabuf_off;                   /* the kernel's dma-buf support is off */
    bool dmabuf_515;                   /* the block before 570.86.15 */
    unsigned dmabuf_escapes;
    fake_dmabuf dmabufs[FAKE_MAX_DMABUFS];
    uint32_t next_client, next_generated, generated_client;
    fake_obj *objs;
    size_t n_objs, cap_objs;
    fake_reg *regs;
    size_t n_regs, cap_regs;
    struct {
        uint32_t client, handle;
    } * targets; /* of every RM_FREE and every NV503C control that reached the fake */
    size_t n_targets, cap_targets;
    uint64_t bar1;
    uint64_t rm_bar1_total, rm_bar1_available; /* 0: RM does not answer */
    unsigned rm_bar1_asked;
    uint16_t pci_bus; /* GPU_GET_PCI_INFO answers bus:00.0; 0: all zero */
    char *gpu_file;   /* fake_rm_set_gpu_file; NULL: any process may open the device */
    char *log;
    size_t log_len;
    unsigned log_count[3];
};

fake_rm *fake_rm_new(void)
{
    fake_rm *f = calloc(1, sizeof *f);
    pthread_mutex_init(&f->lock, NULL);
    f->next_generated = 0xcaf40000;
    f->generated_client = 0xc1d00000;
    return f;
}

void fake_rm_free(fake_rm *f)
{
    for (unsigned i = 0; i < FAKE_MAX_DMABUFS; i++)
        if (f->dmabufs[i].used)
            close(f->dmabufs[i].fd);
    free(f->objs);
    free(f->regs);
    free(f->targets);
    free(f->gpu_file);
    free(f->log);
    pthread_mutex_destroy(&f->lock);
    free(f);
}

void fake_rm_set_fd(fake_rm *f, int fd, gdu_fd_kind kind)
{
    if (fd >= 0 && fd < FAKE_MAX_FDS)
        f->fds[fd] = kind;
}

void fake_rm_next_client(fake_rm *f, uint32_t handle) { f->next_client = handle; }

void fake_rm_set_gpu_file(fake_rm *f, const char *path)
{
    char real[PATH_MAX];
    free(f->gpu_file);
    f->gpu_file = path != NULL && realpath(path, real) != NULL ? strdup(real) : NULL;
}

/* Whether this process holds path open, as nv_is_gpu_accessible asks of the
 * caller's files (kernel-open/nvidia/nv.c:5785-5790, 580.142). */
static bool process_holds(const char *path)
{
    DIR *d = opendir("/proc/self/fd");
    bool held = false;
    for (struct dirent *e; d != NULL && !held && (e = readdir(d)) != NULL;) {
        char link[300], target[PATH_MAX];
        snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n > 0) {
            target[n] = '\0';
            held = strcmp(target, path) == 0;
        }
    }
    if (d != NULL)
        closedir(d);
    return held;
}

/* ---- objects ---- */

static fake_obj *find(fake_rm *f, uint32_t client, uint32_t handle)
{
    for (size_t i = f->n_objs; i-- > 0;)
        if (f->objs[i].live && f->objs[i].client == client && f->objs[i].handle == handle)
            return &f->objs[i];
    return NULL;
}

static fake_obj *add(fake_rm *f, uint32_t client, uint32_t handle, uint32_t parent, uint32_t cls)
{
    if (f->n_objs == f->cap_objs) {
        f->cap_objs = f->cap_objs ? f->cap_objs * 2 : 256;
        f->objs = realloc(f->objs, f->cap_objs * sizeof *f->objs);
    }
    fake_obj *o = &f->objs[f->n_objs++];
    *o = (fake_obj){.client = client, .handle = handle, .parent = parent, .cls = cls, .live = true};
    return o;
}

static bool is_below(fake_rm *f, const fake_obj *o, uint32_t root)
{
    for (int depth = 0; o != NULL && depth < 32; depth++) {
        if (o->handle == root)
            return true;
        if (o->parent == o->handle)
            return false;
        o = find(f, o->client, o->parent);
    }
    return false;
}

static const fake_obj *device_of(fake_rm *f, const fake_obj *o)
{
    for (int depth = 0; o != NULL && depth < 32; depth++) {
        if (o->cls == GDU_NV01_DEVICE_0)
            return o;
        if (o->parent == o->handle)
            return NULL;
        o = find(f, o->client, o->parent);
    }
    return NULL;
}

static void drop_regs(fake_rm *f, uint32_t client, uint32_t tpp, uint32_t memory)
{
    for (size_t i = 0; i < f->n_regs; i++) {
        fake_reg *r = &f->regs[i];
        if (r->live && r->client == client && (tpp == 0 || r->tpp == tpp) &&
            (memory == 0 || r->memory == memory))
            r->live = false;
    }
}

static void compact_regs(fake_rm *f)
{
    size_t kept = 0;
    for (size_t i = 0; i < f->n_regs; i++)
        if (f->regs[i].live)
            f->regs[kept++] = f->regs[i];
    f->n_regs = kept;
}

/* RM invalidates a dependant outside the freed subtree: its destructor runs
 * (the ThirdPartyP2P one drops its VA spaces and registrations,
 * third_party_p2p.c:186-231) and its dependencies go (rs_client.c:839-851),
 * but its handle stays in the client and under its parent (rs_client.c:855-871
 * skipped with bInvalidateOnly), so it still fills the subdevice's one NV503C
 * place. */
static void invalidate(fake_rm *f, fake_obj *o)
{
    drop_regs(f, o->client, o->handle, 0);
    o->n_vaspaces = 0;
    o->n_deps = 0;
    o->invalidated = true;
}

static uint32_t do_free(fake_rm *f, uint32_t client, uint32_t handle)
{
    /* Measured (tests/fixtures/rm-traces, seq 22): freeing a handle that does
     * not exist answers NV_OK; libcuda does it before reusing a handle. */
    if (find(f, client, handle) == NULL)
        return GDU_NV_OK;
    /* Mark the subtree; an NV503C outside it that depends on a dying object
     * (a VA space once registered with it) is invalidated, not freed: RM
     * frees a pending dependant with bInvalidateOnly unless an object being
     * freed is its ancestor (rs_server.c:1336-1372, 580.142; measured on the
     * H200, tests/fixtures/rm-lifetime-h200-2026-12-02.txt). An invalidated
     * one freed later only loses its handle (rs_client.c:811-812), NV_OK. */
    size_t n = f->n_objs;
    bool *dying = calloc(n, sizeof *dying);
    for (size_t i = 0; i < n; i++)
        dying[i] = f->objs[i].live && f->objs[i].client == client &&
                   (handle == client || is_below(f, &f->objs[i], handle));
    for (size_t i = 0; i < n; i++) {
        if (!dying[i])
            continue;
        for (size_t j = 0; j < n; j++) {
            fake_obj *p = &f->objs[j];
            if (dying[j] || !p->live || p->client != client || p->cls != GDU_NV50_THIRD_PARTY_P2P)
                continue;
            for (unsigned k = 0; k < p->n_deps; k++)
                if (p->deps[k] == f->objs[i].handle) {
                    invalidate(f, p);
                    break;
                }
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (!dying[i])
            continue;
        fake_obj *o = &f->objs[i];
        if (o->cls == GDU_NV50_THIRD_PARTY_P2P)
            drop_regs(f, client, o->handle, 0);
        else
            drop_regs(f, client, 0, o->handle) /* memory: RM drops its registrations */;
    }
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        if (!dying[i] && f->objs[i].live)
            f->objs[kept++] = f->objs[i];
    f->n_objs = kept;
    free(dying);
    compact_regs(f);
    return GDU_NV_OK;
}

static uint32_t do_alloc(fake_rm *f, uint32_t client, uint32_t parent, uint32_t *handle,
                         uint32_t cls, uint64_t params)
{
    if (gdu_nv_class_is_client(cls)) {
        uint32_t h = f->next_client ? f->next_client : ++f->generated_client;
        f->next_client = 0;
        if (find(f, h, h) != NULL)
            return GDU_NV_ERR_INSERT_DUPLICATE_NAME;
        add(f, h, h, h, GDU_NV01_ROOT_CLIENT);
        *handle = h;
        return GDU_NV_OK;
    }
    if (find(f, client, client) == NULL)
        return GDU_NV_ERR_INVALID_CLIENT;
    fake_obj *p = find(f, client, parent);
    if (p == NULL)
        return GDU_NV_ERR_INVALID_OBJECT_PARENT;
    /* resserv takes the handle before the class constructor runs. */
    if (*handle != 0 && find(f, client, *handle) != NULL)
        return GDU_NV_ERR_INSERT_DUPLICATE_NAME;
    /* A device only for a process that holds the GPU's file open
     * (device.c:140-147, 580.142). */
    if (cls == GDU_NV01_DEVICE_0 && f->gpu_file != NULL && !process_holds(f->gpu_file))
        return GDU_NV_ERR_INSUFFICIENT_PERMISSIONS;
    if (cls == GDU_NV50_THIRD_PARTY_P2P) {
        if (p->cls != GDU_NV20_SUBDEVICE_0)
            return GDU_NV_ERR_INVALID_OBJECT_PARENT;
        for (size_t i = 0; i < f->n_objs; i++)
            if (f->objs[i].live && f->objs[i].client == client && f->objs[i].parent == parent &&
                f->objs[i].cls == GDU_NV50_THIRD_PARTY_P2P)
                return GDU_NV_ERR_STATE_IN_USE;
        if (params != 0) {
            gdu_nv503c_alloc_params ap;
            memcpy(&ap, (const void *)(uintptr_t)params, sizeof ap);
            if ((ap.flags & GDU_NV503C_ALLOC_FLAGS_TYPE_MASK) != GDU_NV503C_ALLOC_FLAGS_TYPE_BAR1)
                return GDU_NV_ERR_INVALID_ARGUMENT;
        }
    }
    if (*handle == 0)
        *handle = f->next_generated++;
    fake_obj *o = add(f, client, *handle, parent, cls);
    if (cls == GDU_NV01_DEVICE_0 && params != 0)
        o->instance = ((const gdu_nv0080_alloc_params *)(uintptr_t)params)->deviceId;
    return GDU_NV_OK;
}

static uint32_t do_control(fake_rm *f, uint32_t client, uint32_t object, uint32_t cmd, void *params,
                           uint32_t size)
{
    if (cmd == GDU_NV0000_CTRL_CMD_GPU_GET_PCI_INFO && size >= sizeof(gdu_nv0000_pci_info_params)) {
        gdu_nv0000_pci_info_params *p = params;
        p->domain = 0;
        p->bus = f->pci_bus;
        p->slot = 0;
        return GDU_NV_OK;
    }
    /* Any control on an invalidated object (rs_server.c:1556-1560, 580.142). */
    fake_obj *target = find(f, client, object);
    if (target != NULL && target->invalidated)
        return GDU_NV_ERR_RESOURCE_LOST;
    if ((cmd >> 16) != GDU_NV50_THIRD_PARTY_P2P)
        return GDU_NV_OK; /* every other control: not modelled, answered OK */
    fake_obj *tpp = target;
    if (tpp == NULL)
        return GDU_NV_ERR_OBJECT_NOT_FOUND;
    if (tpp->cls != GDU_NV50_THIRD_PARTY_P2P)
        return GDU_NV_ERR_OBJECT_TYPE_MISMATCH; /* not this class's control */
    switch (cmd) {
    case GDU_NV503C_CTRL_CMD_REGISTER_VA_SPACE: {
        gdu_nv503c_register_va_space *p = params;
        if (size < sizeof *p)
            return GDU_NV_ERR_INVALID_ARGUMENT;
        for (unsigned i = 0; i < tpp->n_vaspaces; i++)
            if (tpp->vaspaces[i] == p->hVASpace)
                return GDU_NV_ERR_INSERT_DUPLICATE_NAME;
        if (tpp->n_vaspaces == FAKE_MAX_VAS)
            return GDU_NV_ERR_INSUFFICIENT_RESOURCES;
        p->vaSpaceToken = 0xfe00 + tpp->n_vaspaces;
        tpp->vaspaces[tpp->n_vaspaces++] = p->hVASpace;
        /* RM adds the dependency for any handle of the client (refAddDependant). */
        bool known = false;
        for (unsigned i = 0; i < tpp->n_deps; i++)
            known |= tpp->deps[i] == p->hVASpace;
        if (!known && find(f, client, p->hVASpace) != NULL && tpp->n_deps < FAKE_MAX_DEPS)
            tpp->deps[tpp->n_deps++] = p->hVASpace;
        return GDU_NV_OK;
    }
    case GDU_NV503C_CTRL_CMD_UNREGISTER_VA_SPACE: {
        gdu_nv503c_unregister_va_space *p = params;
        for (unsigned i = 0; i < tpp->n_vaspaces; i++)
            if (tpp->vaspaces[i] == p->hVASpace) {
                tpp->vaspaces[i] = tpp->vaspaces[--tpp->n_vaspaces];
                return GDU_NV_OK;
            }
        return GDU_NV_ERR_OBJECT_NOT_FOUND;
    }
    case GDU_NV503C_CTRL_CMD_REGISTER_VIDMEM: {
        gdu_nv503c_register_vidmem *p = params;
        if (size < sizeof *p)
            return GDU_NV_ERR_INVALID_ARGUMENT;
        fake_obj *mem = find(f, client, p->hMemory);
        fake_obj *sub = find(f, client, tpp->parent);
        if (mem == NULL || sub == NULL || device_of(f, mem) != device_of(f, sub))
            return GDU_NV_ERR_OBJECT_NOT_FOUND;
        if (mem->cls != GDU_NV01_MEMORY_LOCAL_USER)
            return GDU_NV_ERR_NOT_SUPPORTED;
        const uint64_t a = GDU_NV503C_VIDMEM_ALIGN - 1;
        if (p->size == 0 || (p->size & a) || (p->address & a) || (p->offset & a) ||
            p->address + p->size < p->address)
            return GDU_NV_ERR_INVALID_ARGUMENT;
        for (size_t i = 0; i < f->n_regs; i++) {
            fake_reg *r = &f->regs[i];
            if (!r->live || r->client != client || r->tpp != object)
                continue;
            if (r->memory == p->hMemory ||
                (r->address < p->address + p->size && p->address < r->address + r->size))
                return GDU_NV_ERR_INSERT_DUPLICATE_NAME;
        }
        if (f->n_regs == f->cap_regs) {
            f->cap_regs = f->cap_regs ? f->cap_regs * 2 : 256;
            f->regs = realloc(f->regs, f->cap_regs * sizeof *f->regs);
        }
        f->regs[f->n_regs++] =
            (fake_reg){client, object, p->hMemory, p->address, p->size, p->offset, true};
        return GDU_NV_OK;
    }
    case GDU_NV503C_CTRL_CMD_UNREGISTER_VIDMEM: {
        gdu_nv503c_unregister_vidmem *p = params;
        for (size_t i = 0; i < f->n_regs; i++) {
            fake_reg *r = &f->regs[i];
            if (r->live && r->client == client && r->tpp == object && r->memory == p->hMemory) {
                r->live = false;
                compact_regs(f);
                return GDU_NV_OK;
            }
        }
        return GDU_NV_ERR_OBJECT_NOT_FOUND;
    }
    default:
        return GDU_NV_OK;
    }
}

static void note_target(fake_rm *f, uint32_t client, uint32_t handle)
{
    if (f->n_targets == f->cap_targets) {
        size_t cap = f->cap_targets ? f->cap_targets * 2 : 256;
        void *t = realloc(f->targets, cap * sizeof *f->targets);
        if (t == NULL)
            abort();
        f->targets = t;
        f->cap_targets = cap;
    }
    f->targets[f->n_targets].client = client;
    f->targets[f->n_targets++].handle = handle;
}

static int rm_escape(fake_rm *f, unsigned nr, size_t size, void *arg)
{
    switch (nr) {
    case GDU_NV_ESC_RM_ALLOC:
        if (size == sizeof(gdu_nvos64)) {
            gdu_nvos64 *p = arg;
            p->status =
                do_alloc(f, p->hRoot, p->hObjectParent, &p->hObjectNew, p->hClass, p->pAllocParms);
        } else if (size == sizeof(gdu_nvos21)) {
            gdu_nvos21 *p = arg;
            p->status =
                do_alloc(f, p->hRoot, p->hObjectParent, &p->hObjectNew, p->hClass, p->pAllocParms);
        } else {
            errno = EINVAL;
            return -1;
        }
        return 0;
    case GDU_NV_ESC_RM_FREE: {
        gdu_nvos00 *p = arg;
        note_target(f, p->hRoot, p->hObjectOld);
        p->status = do_free(f, p->hRoot, p->hObjectOld);
        return 0;
    }
    case GDU_NV_ESC_RM_CONTROL: {
        gdu_nvos54 *p = arg;
        if ((p->cmd >> 16) == GDU_NV50_THIRD_PARTY_P2P)
            note_target(f, p->hClient, p->hObject);
        p->status = do_control(f, p->hClient, p->hObject, p->cmd, (void *)(uintptr_t)p->params,
                               p->paramsSize);
        return 0;
    }
    case GDU_NV_ESC_RM_ALLOC_MEMORY: {
        gdu_nvos02_with_fd *p = arg;
        p->params.status = do_alloc(f, p->params.hRoot, p->params.hObjectParent,
                                    &p->params.hObjectNew, p->params.hClass, 0);
        return 0;
    }
    case GDU_NV_ESC_RM_DUP_OBJECT: {
        gdu_nvos55 *p = arg;
        fake_obj *src = find(f, p->hClientSrc, p->hObjectSrc);
        p->status = src == NULL ? GDU_NV_ERR_OBJECT_NOT_FOUND
                                : do_alloc(f, p->hClient, p->hParent, &p->hObject, src->cls, 0);
        return 0;
    }
    default:
        return 0; /* not modelled: the block is left as it is */
    }
}

/* ---- NV_ESC_EXPORT_TO_DMABUF_FD (fake_rm.h) ---- */

static fake_dmabuf *dmabuf_of(fake_rm *f, int fd)
{
    for (unsigned i = 0; fd >= 0 && i < FAKE_MAX_DMABUFS; i++)
        if (f->dmabufs[i].used && f->dmabufs[i].fd == fd)
            return &f->dmabufs[i];
    return NULL;
}

static uint32_t device_instance_of(fake_rm *f, const fake_obj *o)
{
    for (int depth = 0; o != NULL && depth < 32; depth++) {
        if (o->cls == GDU_NV01_DEVICE_0)
            return o->instance;
        if (o->parent == o->handle)
            break;
        o = find(f, o->client, o->parent);
    }
    return UINT32_MAX;
}

/* RmDmabufVerifyMemHandle (osapi.c:1286-1360, 580.142). */
static uint32_t verify_mem_handle(fake_rm *f, uint32_t client, uint32_t instance, uint32_t handle,
                                  uint64_t offset, uint64_t size)
{
    if (find(f, client, client) == NULL)
        return GDU_NV_ERR_INVALID_CLIENT;
    fake_obj *mem = find(f, client, handle);
    if (mem == NULL)
        return GDU_NV_ERR_OBJECT_NOT_FOUND;
    bool memory = mem->cls == GDU_NV01_MEMORY_LOCAL_USER || mem->cls == GDU_NV01_MEMORY_SYSTEM;
    if (!memory)
        return GDU_NV_ERR_INVALID_OBJECT;
    if (device_instance_of(f, mem) != instance)
        return GDU_NV_ERR_INVALID_OBJECT_PARENT;
    if ((offset | size) & 4095u)
        return GDU_NV_ERR_INVALID_ARGUMENT;
    if (mem->cls != GDU_NV01_MEMORY_LOCAL_USER) /* video memory only (no 0-FB GPU here) */
        return GDU_NV_ERR_INVALID_ARGUMENT;
    if (size == 0 || size > mem->size || offset > mem->size - size)
        return GDU_NV_ERR_INVALID_ARGUMENT;
    return GDU_NV_OK;
}

/* nv_dma_buf_dup_mem_handles (nv-dmabuf.c:373-475): all of the call's
 * handles, or none. */
static uint32_t dup_handles(fake_rm *f, fake_dmabuf *d, const gdu_nv_dmabuf_export *p)
{
    uint32_t st = GDU_NV_OK;
    unsigned i = 0;
    for (; i < p->num_objects && st == GDU_NV_OK; i++) {
        unsigned at = p->index + i;
        if (d->memory[at] != 0)
            st = GDU_NV_ERR_IN_USE;
        else if (p->sizes[i] > d->total_size - d->attached_size)
            st = GDU_NV_ERR_INVALID_ARGUMENT;
        else
            st = verify_mem_handle(f, p->h_client, d->instance, p->handles[i], p->offsets[i],
                                   p->sizes[i]);
        if (st == GDU_NV_OK) {
            d->memory[at] = p->handles[i];
            d->offset[at] = p->offsets[i];
            d->size[at] = p->sizes[i];
            d->attached++;
            d->attached_size += p->sizes[i];
        }
    }
    if (st == GDU_NV_OK && d->attached == d->total_objects && d->attached_size != d->total_size)
        st = GDU_NV_ERR_INVALID_ARGUMENT;
    if (st != GDU_NV_OK)
        for (unsigned j = 0; j < i; j++) {
            unsigned at = p->index + j;
            if (d->memory[at] == p->handles[j] && d->offset[at] == p->offsets[j]) {
                d->memory[at] = 0;
                d->attached--;
                d->attached_size -= p->sizes[j];
            }
        }
    return st;
}

static uint32_t dmabuf_create(fake_rm *f, uint32_t instance, gdu_nv_dmabuf_export *p)
{
    if (f->dmabuf_off)
        return GDU_NV_ERR_NOT_SUPPORTED;
    if (p->index > p->total_objects - p->num_objects)
        return GDU_NV_ERR_INVALID_ARGUMENT;
    if (p->mapping_type == GDU_NV_DMABUF_MAPPING_FORCE_PCIE)
        return GDU_NV_ERR_NOT_SUPPORTED;
    fake_dmabuf *d = NULL;
    for (unsigned i = 0; d == NULL && i < FAKE_MAX_DMABUFS; i++)
        if (!f->dmabufs[i].used)
            d = &f->dmabufs[i];
    if (d == NULL || p->total_objects > FAKE_DMABUF_MAX_OBJECTS)
        return GDU_NV_ERR_NO_MEMORY;
    memset(d, 0, sizeof *d);
    d->client = p->h_client;
    d->instance = instance;
    d->total_objects = p->total_objects;
    d->total_size = p->total_size;
    uint32_t st = dup_handles(f, d, p);
    if (st != GDU_NV_OK)
        return st;
    d->fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (d->fd < 0)
        return GDU_NV_ERR_OPERATING_SYSTEM;
    d->used = true;
    p->fd = d->fd;
    return GDU_NV_OK;
}

static uint32_t dmabuf_export(fake_rm *f, uint32_t instance, gdu_nv_dmabuf_export *p)
{
    if (p->total_size == 0 || p->num_objects == 0 || p->total_objects == 0 ||
        p->num_objects > GDU_NV_DMABUF_MAX_HANDLES || p->num_objects > p->total_objects)
        return GDU_NV_ERR_INVALID_ARGUMENT;
    if (p->mapping_type != GDU_NV_DMABUF_MAPPING_DEFAULT &&
        p->mapping_type != GDU_NV_DMABUF_MAPPING_FORCE_PCIE)
        return GDU_NV_ERR_INVALID_ARGUMENT;
    if (p->fd == -1)
        return dmabuf_create(f, instance, p);
    if (p->fd < 0)
        return GDU_NV_ERR_INVALID_ARGUMENT;
    fake_dmabuf *d = dmabuf_of(f, p->fd);
    if (d == NULL)
        return GDU_NV_ERR_OPERATING_SYSTEM; /* dma_buf_get of what is none */
    if (d->total_objects < p->num_objects || p->index > d->total_objects - p->num_objects ||
        p->mapping_type != GDU_NV_DMABUF_MAPPING_DEFAULT)
        return GDU_NV_ERR_INVALID_ARGUMENT;
    return dup_handles(f, d, p);
}

static int dmabuf_escape(fake_rm *f, int fd, size_t size, void *arg)
{
    f->dmabuf_escapes++;
    size_t want = f->dmabuf_515 ? sizeof(gdu_nv_dmabuf_export_515) : sizeof(gdu_nv_dmabuf_export);
    if (size != want || fd < 0 || fd >= FAKE_MAX_FDS || f->gpu_fd_instance[fd] == 0) {
        errno = EINVAL;
        return -1;
    }
    uint32_t instance = (uint32_t)f->gpu_fd_instance[fd] - 1;
    if (!f->dmabuf_515) {
        gdu_nv_dmabuf_export *p = arg;
        p->status = dmabuf_export(f, instance, p);
        return 0;
    }
    gdu_nv_dmabuf_export_515 *old = arg;
    static gdu_nv_dmabuf_export p; /* under the fake's lock */
    memset(&p, 0, sizeof p);
    GDU_NV_DMABUF_COPY_SHARED(&p, old);
    old->status = dmabuf_export(f, instance, &p);
    old->fd = p.fd;
    return 0;
}

bool fake_rm_dmabuf(fake_rm *f, int fd, fake_dmabuf *out)
{
    pthread_mutex_lock(&f->lock);
    fake_dmabuf *d = dmabuf_of(f, fd);
    if (d != NULL)
        *out = *d;
    pthread_mutex_unlock(&f->lock);
    return d != NULL;
}

unsigned fake_rm_dmabuf_escapes(fake_rm *f) { return f->dmabuf_escapes; }

unsigned fake_rm_dmabufs(fake_rm *f)
{
    unsigned n = 0;
    for (unsigned i = 0; i < FAKE_MAX_DMABUFS; i++)
        n += f->dmabufs[i].used;
    return n;
}

void fake_rm_set_gpu_file_instance(fake_rm *f, uint32_t instance)
{
    f->gpu_file_instance = instance;
}

void fake_rm_set_dmabuf_supported(fake_rm *f, bool on) { f->dmabuf_off = !on; }

void fake_rm_set_dmabuf_layout_515(fake_rm *f, bool on) { f->dmabuf_515 = on; }

int fake_rm_ioctl(fake_rm *f, int fd, unsigned long request, void *arg)
{
    if (arg == NULL) {
        errno = EFAULT;
        return -1;
    }
    pthread_mutex_lock(&f->lock);
    int r = 0;
    unsigned nr;
    size_t size;
    gdu_fd_kind kind = fd >= 0 && fd < FAKE_MAX_FDS ? f->fds[fd] : GDU_FD_OTHER;
    if (kind == GDU_FD_RM && gdu_nv_ioctl_decode(request, &nr, &size)) {
        r = nr == GDU_NV_ESC_EXPORT_TO_DMABUF_FD ? dmabuf_escape(f, fd, size, arg)
                                                 : rm_escape(f, nr, size, arg);
    } else if (kind == GDU_FD_UVM) {
        if (request == GDU_UVM_MAP_EXTERNAL_ALLOCATION) {
            gdu_uvm_map_external_params_256 *p = arg;
            fake_obj *mem = find(f, p->hClient, p->hMemory);
            p->rmStatus = mem != NULL ? GDU_NV_OK : GDU_NV_ERR_OBJECT_NOT_FOUND;
            if (mem != NULL && p->offset + p->length > mem->size)
                mem->size = p->offset + p->length;
        } else if (request == GDU_UVM_FREE) {
            ((gdu_uvm_free_params *)arg)->rmStatus = GDU_NV_OK;
        } else if (request == GDU_UVM_REGISTER_GPU_VASPACE) {
            gdu_uvm_register_gpu_vaspace_params *p = arg;
            fake_obj *v = find(f, p->hClient, p->hVaSpace);
            p->rmStatus = v != NULL && v->cls == GDU_FERMI_VASPACE_A ? GDU_NV_OK
                                                                     : GDU_NV_ERR_OBJECT_NOT_FOUND;
        }
    } else {
        errno = ENOTTY;
        r = -1;
    }
    pthread_mutex_unlock(&f->lock);
    return r;
}

/* ---- ops ---- */

static int op_ioctl(void *ctx, int fd, unsigned long request, void *arg)
{
    return fake_rm_ioctl(ctx, fd, request, arg);
}

static gdu_fd_kind op_fd_kind(void *ctx, int fd)
{
    fake_rm *f = ctx;
    return fd >= 0 && fd < FAKE_MAX_FDS ? f->fds[fd] : GDU_FD_OTHER;
}

static int op_read_block(void *ctx, const void *addr, void *dst, size_t n)
{
    if (addr == NULL)
        return -1;
    memcpy(dst, addr, n);
    return 0;
}

static void op_log(void *ctx, int level, const char *line)
{
    fake_rm *f = ctx;
    pthread_mutex_lock(&f->lock);
    size_t n = strlen(line);
    f->log = realloc(f->log, f->log_len + n + 2);
    memcpy(f->log + f->log_len, line, n);
    f->log_len += n;
    f->log[f->log_len++] = '\n';
    f->log[f->log_len] = '\0';
    if (level >= 0 && level < 3)
        f->log_count[level]++;
    pthread_mutex_unlock(&f->lock);
}

static uint64_t op_bar1_bytes(void *ctx, const char *pci) { return ((fake_rm *)ctx)->bar1; }

void fake_rm_set_bar1(fake_rm *f, uint64_t bytes) { f->bar1 = bytes; }

static int op_rm_bar1(void *ctx, const char *pci, uint64_t *total, uint64_t *available, char *why,
                      size_t why_len)
{
    fake_rm *f = ctx;
    f->rm_bar1_asked++;
    if (f->rm_bar1_total == 0) {
        snprintf(why, why_len, "the fake RM has no BAR1 figures");
        return -ENODATA;
    }
    *total = f->rm_bar1_total;
    *available = f->rm_bar1_available;
    return 0;
}

void fake_rm_set_pci_bus(fake_rm *f, uint16_t bus) { f->pci_bus = bus; }

void fake_rm_set_rm_bar1(fake_rm *f, uint64_t total, uint64_t available)
{
    f->rm_bar1_total = total;
    f->rm_bar1_available = available;
}

unsigned fake_rm_rm_bar1_asked(fake_rm *f) { return f->rm_bar1_asked; }

/* A GPU's file: a real fd (so that close works), known to the fake as the
 * file of GPU gpu_file_instance. */
static int op_open_gpu_file(void *ctx, const char *pci)
{
    fake_rm *f = ctx;
    int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (fd >= FAKE_MAX_FDS) {
        close(fd);
        return -EMFILE;
    }
    pthread_mutex_lock(&f->lock);
    f->fds[fd] = GDU_FD_RM;
    f->gpu_fd_instance[fd] = (int)f->gpu_file_instance + 1;
    pthread_mutex_unlock(&f->lock);
    return fd;
}

/* Closing a dma-buf's last fd releases it (its handles undup'd). */
static void op_close_file(void *ctx, int fd)
{
    fake_rm *f = ctx;
    pthread_mutex_lock(&f->lock);
    fake_dmabuf *d = dmabuf_of(f, fd);
    if (d != NULL)
        d->used = false;
    if (fd >= 0 && fd < FAKE_MAX_FDS) {
        f->fds[fd] = GDU_FD_OTHER;
        f->gpu_fd_instance[fd] = 0;
    }
    pthread_mutex_unlock(&f->lock);
    close(fd);
}

gdu_shim_ops fake_rm_ops(fake_rm *f)
{
    return (gdu_shim_ops){.ioctl = op_ioctl,
                          .fd_kind = op_fd_kind,
                          .read_block = op_read_block,
                          .log = op_log,
                          .ctx = f,
                          .bar1_bytes = op_bar1_bytes,
                          .rm_bar1 = op_rm_bar1,
                          .open_gpu_file = op_open_gpu_file,
                          .close_file = op_close_file};
}

json_t *fake_rm_shim_report(gdu_shim *s, bool with_registrations)
{
    char *text = gdu_shim_report_json(s, with_registrations);
    json_error_t err;
    json_t *j = text != NULL ? json_loads(text, 0, &err) : NULL;
    if (j == NULL)
        fprintf(stderr, "the shim's report is not JSON: %s\n%s\n", text != NULL ? err.text : "NULL",
                text ? text : "");
    free(text);
    return j;
}

/* ---- queries ---- */

unsigned fake_rm_count_class(fake_rm *f, uint32_t cls)
{
    unsigned n = 0;
    pthread_mutex_lock(&f->lock);
    for (size_t i = 0; i < f->n_objs; i++)
        n += f->objs[i].live && f->objs[i].cls == cls;
    pthread_mutex_unlock(&f->lock);
    return n;
}

unsigned fake_rm_registrations(fake_rm *f)
{
    unsigned n = 0;
    pthread_mutex_lock(&f->lock);
    for (size_t i = 0; i < f->n_regs; i++)
        n += f->regs[i].live;
    pthread_mutex_unlock(&f->lock);
    return n;
}

bool fake_rm_is_registered(fake_rm *f, uint32_t client, uint32_t memory)
{
    bool found = false;
    pthread_mutex_lock(&f->lock);
    for (size_t i = 0; i < f->n_regs && !found; i++)
        found = f->regs[i].live && f->regs[i].client == client && f->regs[i].memory == memory;
    pthread_mutex_unlock(&f->lock);
    return found;
}

bool fake_rm_vaspace_registered(fake_rm *f, uint32_t client, uint32_t tpp, uint32_t vaspace)
{
    bool found = false;
    pthread_mutex_lock(&f->lock);
    fake_obj *o = find(f, client, tpp);
    for (unsigned i = 0; o != NULL && i < o->n_vaspaces && !found; i++)
        found = o->vaspaces[i] == vaspace;
    pthread_mutex_unlock(&f->lock);
    return found;
}

uint32_t fake_rm_tpp_of(fake_rm *f, uint32_t client, uint32_t sub)
{
    uint32_t h = 0;
    pthread_mutex_lock(&f->lock);
    for (size_t i = 0; i < f->n_objs && h == 0; i++)
        if (f->objs[i].live && !f->objs[i].invalidated && f->objs[i].client == client &&
            f->objs[i].parent == sub && f->objs[i].cls == GDU_NV50_THIRD_PARTY_P2P)
            h = f->objs[i].handle;
    pthread_mutex_unlock(&f->lock);
    return h;
}

bool fake_rm_invalidated(fake_rm *f, uint32_t client, uint32_t handle)
{
    pthread_mutex_lock(&f->lock);
    const fake_obj *o = find(f, client, handle);
    bool invalidated = o != NULL && o->invalidated;
    pthread_mutex_unlock(&f->lock);
    return invalidated;
}

const char *fake_rm_log(fake_rm *f) { return f->log != NULL ? f->log : ""; }

unsigned fake_rm_log_lines(fake_rm *f, int level)
{
    return level >= 0 && level < 3 ? f->log_count[level] : 0;
}

unsigned fake_rm_calls_on(fake_rm *f, uint32_t client, uint32_t handle)
{
    pthread_mutex_lock(&f->lock);
    unsigned n = 0;
    for (size_t i = 0; i < f->n_targets; i++)
        n += f->targets[i].client == client && f->targets[i].handle == handle;
    pthread_mutex_unlock(&f->lock);
    return n;
}

/* ---- what the kernel's lookup finds in this fake's state ---- */

void fake_rm_pin_lookup(fake_rm *f, uint64_t va, uint64_t size, gdu_pin_verdict *v)
{
    pthread_mutex_lock(&f->lock);
    gdu_pin_object *objs = calloc(f->n_objs + 1, sizeof *objs);
    gdu_pin_vidmem *vm = calloc(f->n_regs + 1, sizeof *vm);
    size_t n_objs = 0, n_vm = 0;
    for (size_t i = 0; i < f->n_objs; i++) {
        const fake_obj *o = &f->objs[i];
        if (!o->live || o->invalidated || o->cls != GDU_NV50_THIRD_PARTY_P2P)
            continue; /* an invalidated one is no object to the lookup: RM destroyed it */
        size_t first = n_vm;
        for (size_t k = 0; k < f->n_regs; k++) {
            const fake_reg *r = &f->regs[k];
            if (r->live && r->client == o->client && r->tpp == o->handle)
                vm[n_vm++] = (gdu_pin_vidmem){r->memory, r->address, r->size, r->offset};
        }
        objs[n_objs++] = (gdu_pin_object){.gpu = 0,
                                          .pid = FAKE_RM_PID,
                                          .n_vaspaces = o->n_vaspaces,
                                          .vidmem = vm + first,
                                          .n_vidmem = n_vm - first};
    }
    gdu_pin_gpu gpu = {.gpu = 0, .bar1_bytes = f->bar1};
    gdu_pin_state st = {
        .pid = FAKE_RM_PID, .objects = objs, .n_objects = n_objs, .gpus = &gpu, .n_gpus = 1};
    gdu_pin_lookup(&st, va, size, v);
    free(objs);
    free(vm);
    pthread_mutex_unlock(&f->lock);
}

size_t fake_rm_regs(fake_rm *f, fake_rm_reg *out, size_t max)
{
    size_t n = 0;
    pthread_mutex_lock(&f->lock);
    for (size_t i = 0; i < f->n_regs; i++) {
        const fake_reg *r = &f->regs[i];
        if (!r->live)
            continue;
        if (n < max)
            out[n] = (fake_rm_reg){r->client, r->tpp, r->memory, r->address, r->size, r->offset};
        n++;
    }
    pthread_mutex_unlock(&f->lock);
    return n;
}

unsigned fake_rm_vaspaces_under(fake_rm *f, uint32_t client, uint32_t sub, uint32_t *out,
                                unsigned max)
{
    unsigned n = 0;
    pthread_mutex_lock(&f->lock);
    for (size_t i = 0; i < f->n_objs; i++) {
        const fake_obj *o = &f->objs[i];
        if (!o->live || o->invalidated || o->client != client || o->parent != sub ||
            o->cls != GDU_NV50_THIRD_PARTY_P2P)
            continue;
        for (unsigned k = 0; k < o->n_vaspaces; k++, n++)
            if (n < max)
                out[n] = o->vaspaces[k];
    }
    pthread_mutex_unlock(&f->lock);
    return n;
}
