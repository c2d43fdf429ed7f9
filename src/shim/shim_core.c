/* The shim core: the ioctl hook and the tracking of RM objects and UVM
 * mappings. What it does with them (the NV503C lifecycle) is in shim_tpp.c. */
#include "shim/shim_core.h"

#include "driverabi/nv503c.h"
#include "driverabi/nv_classes.h"
#include "driverabi/nv_escape.h"
#include "driverabi/nv_status.h"
#include "driverabi/nvos.h"
#include "shim/shim_decode.h"
#include "shim/shim_pool.h"
#include "shim/shim_state.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The largest RM block the shim decodes (RM_ALLOC_MEMORY's NVOS02 + fd). */
#define GDU_MAX_RM_BLOCK sizeof(gdu_nvos02_with_fd)
_Static_assert(sizeof(gdu_nvos64) <= GDU_MAX_RM_BLOCK && sizeof(gdu_nvos54) <= GDU_MAX_RM_BLOCK &&
                   sizeof(gdu_nvos55) <= GDU_MAX_RM_BLOCK,
               "watched RM blocks fit the pre-call copy");
/* How far up the object tree we look (RM nests a handful of levels). */
#define GDU_MAX_DEPTH 16

/* ---- freeing ---- */

typedef struct {
    gdu_obj **items;
    size_t n, cap;
} obj_list;

static void list_add(obj_list *l, gdu_obj *o)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->items[i] == o)
            return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        gdu_obj **items = gdu_pool_alloc(cap * sizeof *items);
        if (items == NULL)
            return; /* the object stays tracked; a stale entry is replaced when its handle returns */
        if (l->n != 0)
            memcpy(items, l->items, l->n * sizeof *items);
        gdu_pool_free(l->items, l->cap * sizeof *items);
        l->items = items;
        l->cap = cap;
    }
    l->items[l->n++] = o;
}

static bool list_has(const obj_list *l, uint32_t client, uint32_t handle)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->items[i]->client == client && l->items[i]->handle == handle)
            return true;
    return false;
}

struct subtree_scan {
    gdu_shim *s;
    uint32_t client, root;
    bool whole_client;
    obj_list *out;
};

static bool below(gdu_shim *s, const gdu_obj *o, uint32_t root)
{
    for (int depth = 0; o != NULL && depth < GDU_MAX_DEPTH; depth++) {
        if (o->handle == root)
            return true;
        if (o->parent == o->handle)
            return false;
        o = gdu_shim_obj(s, o->client, o->parent);
    }
    return false;
}

static void subtree_visit(gdu_map_node *n, void *arg)
{
    struct subtree_scan *sc = arg;
    gdu_obj *o = (gdu_obj *)n;
    if (o->client == sc->client && (sc->whole_client || below(sc->s, o, sc->root)))
        list_add(sc->out, o);
}

struct dependant_scan {
    gdu_obj *vaspace;
    obj_list *out;
};

/* Freeing a VA space makes RM invalidate any ThirdPartyP2P object it was
 * ever registered with (an unregistration leaves the dependency,
 * third_party_p2p.c:394 against 403-421): a dependant outside the freed
 * subtree is freed with bInvalidateOnly (rs_server.c:974-982, 1336-1372,
 * 580.142), which destroys it and keeps its handle (rs_client.c:811-871). */
static void dependant_visit(gdu_map_node *n, void *arg)
{
    struct dependant_scan *sc = arg;
    gdu_obj *o = (gdu_obj *)n;
    if (o->cls != GDU_NV50_THIRD_PARTY_P2P || o->client != sc->vaspace->client)
        return;
    for (unsigned i = 0; i < o->n_tpp_deps; i++)
        if (o->tpp_deps[i] == sc->vaspace->handle) {
            if (o->tpp_invalidated_with == 0)
                o->tpp_invalidated_with = sc->vaspace->handle;
            list_add(sc->out, o);
        }
}

static void remove_handle(uint32_t *arr, unsigned *n, uint32_t h)
{
    for (unsigned i = 0; i < *n; i++)
        if (arr[i] == h) {
            arr[i] = arr[--*n];
            return;
        }
}

struct client_mappings {
    gdu_shim *s;
    uint32_t client;
};

static void mappings_of_client_visit(gdu_map_node *n, void *arg)
{
    struct client_mappings *cm = arg;
    if (((gdu_mapping *)n)->client == cm->client) {
        gdu_map_remove(&cm->s->mappings, n->key);
        gdu_pool_free(n, sizeof(gdu_mapping));
    }
}

/* Bookkeeping for a mapping taken out of s->mappings. */
static void mapping_gone(gdu_shim *s, const gdu_mapping *map)
{
    gdu_obj *mem = gdu_shim_obj(s, map->client, map->memory);
    if (mem != NULL && mem->n_mappings > 0)
        mem->n_mappings--;
}

struct memory_mappings {
    gdu_shim *s;
    const gdu_obj *memory;
};

static void mappings_of_memory_visit(gdu_map_node *n, void *arg)
{
    struct memory_mappings *mm = arg;
    gdu_mapping *m = (gdu_mapping *)n;
    if (m->client == mm->memory->client && m->memory == mm->memory->handle) {
        gdu_map_remove(&mm->s->mappings, n->key);
        gdu_pool_free(m, sizeof *m);
    }
}

/* After RM freed handle (and everything below it) and invalidated its
 * dependants outside that subtree. */
static void on_freed(gdu_shim *s, uint32_t client, uint32_t handle)
{
    obj_list dying = {0};
    gdu_obj *root = gdu_shim_obj(s, client, handle);
    if (root == NULL)
        return;
    if (root->children == 0 && handle != client) {
        list_add(&dying, root);
    } else {
        struct subtree_scan sc = {s, client, handle, handle == client, &dying};
        gdu_map_each(&s->objects, subtree_visit, &sc);
    }
    for (size_t i = 0; i < dying.n; i++) {
        if (dying.items[i]->cls == GDU_FERMI_VASPACE_A) {
            struct dependant_scan sc = {dying.items[i], &dying};
            gdu_map_each(&s->objects, dependant_visit, &sc);
        }
    }
    for (size_t i = 0; i < dying.n; i++) {
        gdu_obj *o = dying.items[i];
        if (o->cls == GDU_NV50_THIRD_PARTY_P2P) {
            if (o->tpp_invalidated_with != 0 && !list_has(&dying, o->client, o->parent))
                gdu_tpp_invalidated(s, o); /* its GPU lives on, its handle too, dead */
            gdu_tpp_forget(s, o);
        } else if (o->reg_tpp != 0 || o->n_mappings != 0) {
            if (o->reg_tpp != 0)
                gdu_tpp_registration_ended(s, o); /* RM drops it as it frees the memory */
            if (o->n_mappings != 0) {
                /* Freed while still mapped: forget its mappings, lest the handle,
                 * reused, be taken for what is mapped there. */
                struct memory_mappings mm = {s, o};
                gdu_map_each(&s->mappings, mappings_of_memory_visit, &mm);
            }
        } else if (o->cls == GDU_FERMI_VASPACE_A) {
            gdu_obj *dev = gdu_shim_obj(s, o->client, o->parent);
            if (dev != NULL)
                remove_handle(dev->vaspaces, &dev->n_vaspaces, o->handle);
        }
    }
    for (size_t i = 0; i < dying.n; i++)
        gdu_shim_obj_remove(s, dying.items[i]);
    gdu_pool_free(dying.items, dying.cap * sizeof *dying.items);
    if (handle == client) {
        struct client_mappings cm = {s, client};
        gdu_map_each(&s->mappings, mappings_of_client_visit, &cm);
        s->clients--;
    }
}

/* ---- RM hooks ---- */

/* Copies want bytes of parameters at ptr (size: the call's paramsSize, 0 when
 * RM takes the class's own size). After a successful call RM has copied them
 * in itself, so a plain copy is safe; before the call they are read safely. */
static int read_params(gdu_shim *s, uint64_t ptr, uint32_t size, void *dst, size_t want,
                       bool after_call)
{
    if (ptr == 0 || (size != 0 && size < want))
        return -1;
    if (!after_call)
        return s->ops.read_block(s->ops.ctx, (const void *)(uintptr_t)ptr, dst, want);
    memcpy(dst, (const void *)(uintptr_t)ptr, want);
    return 0;
}

static gdu_obj *client_for(gdu_shim *s, uint32_t client, int fd)
{
    gdu_obj *c = gdu_shim_obj(s, client, client);
    if (c == NULL) {
        /* A client we did not see being made (made before the shim, or by a
         * path it does not watch): follow it from here. */
        c = gdu_shim_obj_add(s, client, client, client, GDU_NV01_ROOT_CLIENT);
        if (c != NULL) {
            c->fd = fd;
            s->clients++;
            s->saw_client = true;
        }
    }
    return c;
}

static void on_alloc(gdu_shim *s, int fd, const gdu_rm_call *c)
{
    if (c->op == GDU_RM_OP_ALLOC && gdu_nv_class_is_client(c->cls)) {
        if (gdu_shim_obj(s, c->handle, c->handle) != NULL)
            on_freed(s, c->handle, c->handle);
        gdu_obj *o = gdu_shim_obj_add(s, c->handle, c->handle, c->handle, GDU_NV01_ROOT_CLIENT);
        if (o != NULL) {
            o->fd = fd;
            s->clients++;
            s->saw_client = true;
        }
        return;
    }
    if (client_for(s, c->client, fd) == NULL)
        return;
    if (gdu_shim_obj(s, c->client, c->handle) != NULL)
        on_freed(s, c->client, c->handle); /* a stale entry: RM let the handle be reused */
    uint32_t cls = c->cls;
    if (c->op == GDU_RM_OP_DUP) {
        gdu_obj *src = gdu_shim_obj(s, c->src_client, c->src_handle);
        cls = src != NULL ? src->cls : UINT32_MAX;
    }
    gdu_obj *o = gdu_shim_obj_add(s, c->client, c->handle, c->parent, cls);
    if (o == NULL || c->op != GDU_RM_OP_ALLOC)
        return;
    gdu_obj *parent = gdu_shim_obj(s, c->client, c->parent);
    switch (cls) {
    case GDU_NV01_DEVICE_0: {
        gdu_nv0080_alloc_params p;
        if (read_params(s, c->params, c->params_size, &p, sizeof p, true) == 0)
            o->instance = p.deviceId;
        break;
    }
    case GDU_NV20_SUBDEVICE_0: {
        gdu_nv2080_alloc_params p;
        if (read_params(s, c->params, c->params_size, &p, sizeof p, true) == 0)
            o->instance = p.subDeviceId;
        if (parent != NULL && parent->cls == GDU_NV01_DEVICE_0 && parent->subdevice == 0)
            parent->subdevice = o->handle;
        gdu_shim_gpu(s, o);
        break;
    }
    case GDU_FERMI_VASPACE_A:
        if (parent != NULL && parent->cls == GDU_NV01_DEVICE_0) {
            if (parent->n_vaspaces < GDU_SHIM_MAX_VASPACES)
                parent->vaspaces[parent->n_vaspaces++] = o->handle;
            gdu_obj *sub = parent->subdevice ? gdu_shim_obj(s, c->client, parent->subdevice) : NULL;
            if (sub != NULL && sub->mode == GDU_TPP_UNLOCKED && !s->refused)
                gdu_tpp_on_vaspace(s, sub, o->handle);
        }
        break;
    case GDU_NV50_THIRD_PARTY_P2P:
        if (parent != NULL && parent->cls == GDU_NV20_SUBDEVICE_0)
            gdu_tpp_on_native(s, parent, o);
        break;
    default:
        break;
    }
}

static void rm_before(gdu_shim *s, const gdu_rm_call *c)
{
    gdu_obj *o;
    switch (c->op) {
    case GDU_RM_OP_ALLOC:
        /* libcuda making an NV503C where the shim has its own: make room. Not
         * where the shim's is libcuda's own re-made (test mode): then libcuda
         * gets the answer it would get anyway. */
        if (c->cls == GDU_NV50_THIRD_PARTY_P2P &&
            (o = gdu_shim_obj(s, c->client, c->parent)) != NULL && o->cls == GDU_NV20_SUBDEVICE_0 &&
            o->tpp_owned) {
            gdu_obj *tpp = gdu_shim_obj(s, o->client, o->tpp);
            if (tpp == NULL || !tpp->tpp_adopted)
                gdu_tpp_before_native(s, o);
        }
        break;
    case GDU_RM_OP_FREE:
        o = gdu_shim_obj(s, c->client, c->handle);
        if (o != NULL && o->reg_by_shim)
            gdu_tpp_unregister(s, o);
        break;
    case GDU_RM_OP_CONTROL:
        if ((c->cmd >> 16) == GDU_NV50_THIRD_PARTY_P2P &&
            (o = gdu_shim_obj(s, c->client, c->handle)) != NULL &&
            o->cls == GDU_NV50_THIRD_PARTY_P2P && o->tpp_owned) {
            unsigned char params[sizeof(gdu_nv503c_register_vidmem)];
            size_t want = c->params_size < sizeof params ? c->params_size : sizeof params;
            if (read_params(s, c->params, 0, params, want, false) == 0)
                gdu_testmode_before_control(s, o, c->cmd, params, want);
        }
        break;
    default:
        break;
    }
}

static void rm_after(gdu_shim *s, int fd, const gdu_rm_call *c)
{
    switch (c->op) {
    case GDU_RM_OP_ALLOC:
    case GDU_RM_OP_DUP:
    case GDU_RM_OP_ALLOC_MEMORY:
        on_alloc(s, fd, c);
        break;
    case GDU_RM_OP_FREE:
        on_freed(s, c->client, c->handle);
        break;
    case GDU_RM_OP_CONTROL:
        if ((c->cmd >> 16) == GDU_NV50_THIRD_PARTY_P2P) {
            gdu_obj *o = gdu_shim_obj(s, c->client, c->handle);
            unsigned char params[sizeof(gdu_nv503c_register_vidmem)];
            size_t want = c->params_size < sizeof params ? c->params_size : sizeof params;
            if (o != NULL && o->cls == GDU_NV50_THIRD_PARTY_P2P &&
                read_params(s, c->params, 0, params, want, true) == 0)
                gdu_tpp_after_control(s, o, c->cmd, params, want);
        }
        break;
    }
}

static int rm_ioctl(gdu_shim *s, int fd, unsigned long request, unsigned nr, size_t size, void *arg)
{
    gdu_rm_call c;
    /* The pre-call hooks only matter once the shim owns an NV503C (never in
     * native mode, which then costs no extra system call). */
    bool before =
        __atomic_load_n(&s->owned_tpp, __ATOMIC_RELAXED) != 0 &&
        (nr == GDU_NV_ESC_RM_FREE || nr == GDU_NV_ESC_RM_ALLOC ||
         (nr == GDU_NV_ESC_RM_CONTROL && s->testmode != NULL && s->testmode->sees_controls));
    bool answerable = __atomic_load_n(&s->answered_tpp, __ATOMIC_RELAXED) != 0 &&
                      (nr == GDU_NV_ESC_RM_FREE || nr == GDU_NV_ESC_RM_CONTROL);
    if (before || answerable) {
        unsigned char block[GDU_MAX_RM_BLOCK];
        if (s->ops.read_block(s->ops.ctx, arg, block, size) == 0 &&
            gdu_rm_call_decode(nr, block, size, &c)) {
            uint32_t status;
            pthread_mutex_lock(&s->lock);
            bool answered = answerable && gdu_testmode_answer(s, &c, &status);
            if (!answered && before)
                rm_before(s, &c);
            pthread_mutex_unlock(&s->lock);
            if (answered && gdu_rm_call_set_status(nr, arg, size, status))
                return 0; /* errno untouched, as after a successful ioctl */
        }
    }
    int r = s->ops.ioctl(s->ops.ctx, fd, request, arg);
    int saved = errno;
    /* The kernel wrote the block back: it is readable and holds RM's status.
     * Of the controls, only NV503C ones matter (libcuda issues many others). */
    if (r == 0 && gdu_rm_call_decode(nr, arg, size, &c) && c.status == GDU_NV_OK &&
        (c.op != GDU_RM_OP_CONTROL || (c.cmd >> 16) == GDU_NV50_THIRD_PARTY_P2P)) {
        pthread_mutex_lock(&s->lock);
        rm_after(s, fd, &c);
        pthread_mutex_unlock(&s->lock);
    }
    errno = saved;
    return r;
}

/* ---- UVM hooks ---- */

static void refuse(gdu_shim *s, const char *why)
{
    if (s->refused)
        return;
    s->refused = true;
    snprintf(s->refusal, sizeof s->refusal, "%s", why);
    gdu_shim_log(s, GDU_LOG_ERROR, "%s; not acting in this process (it runs as without gdunlock)",
                 why);
}

static void on_map(gdu_shim *s, const gdu_uvm_map_external *m)
{
    gdu_obj *client = gdu_shim_obj(s, m->h_client, m->h_client);
    bool fd_ok = client != NULL && (client->fd == m->rm_ctrl_fd ||
                                    s->ops.fd_kind(s->ops.ctx, m->rm_ctrl_fd) == GDU_FD_RM);
    if (!fd_ok) {
        if (!s->layout_validated) {
            char why[256];
            snprintf(
                why, sizeof why,
                "UVM_MAP_EXTERNAL_ALLOCATION does not match the %u-GPU layout chosen for driver %s "
                "(rmCtrlFd %d, hClient 0x%x at offset %zu are no RM fd and client of this process)",
                s->layout.max_gpus, s->driver, m->rm_ctrl_fd, m->h_client, s->layout.off_client);
            refuse(s, why);
        } else {
            gdu_shim_log(s, GDU_LOG_DEBUG, "mapping at 0x%llx: unknown RM client 0x%x, skipped",
                         (unsigned long long)m->base, m->h_client);
        }
        return;
    }
    s->layout_validated = true;
    gdu_obj *mem = gdu_shim_obj(s, m->h_client, m->h_memory);
    if (mem == NULL) {
        gdu_shim_log(s, GDU_LOG_DEBUG,
                     "mapping at 0x%llx: memory 0x%x was not seen being made, skipped",
                     (unsigned long long)m->base, m->h_memory);
        return;
    }
    gdu_mapping *map = (gdu_mapping *)gdu_map_remove(&s->mappings, m->base);
    if (map != NULL)
        mapping_gone(s, map); /* a stale one at the same address */
    else if ((map = gdu_pool_alloc(sizeof *map)) == NULL)
        return;
    *map = (gdu_mapping){.node.key = m->base,
                         .base = m->base,
                         .length = m->length,
                         .offset = m->offset,
                         .client = m->h_client,
                         .memory = m->h_memory};
    if (gdu_map_insert(&s->mappings, &map->node) != 0) {
        gdu_pool_free(map, sizeof *map);
        return;
    }
    mem->n_mappings++;
    if (mem->cls != GDU_NV01_MEMORY_LOCAL_USER)
        return; /* only video memory can be registered */
    gdu_obj *sub = gdu_shim_subdevice_of(s, mem);
    if (sub != NULL)
        gdu_tpp_on_mapping(s, sub, mem, map);
}

struct range_mappings {
    gdu_shim *s;
    uint64_t base, length;
};

static void forget_mapping(gdu_shim *s, gdu_mapping *map)
{
    gdu_map_remove(&s->mappings, map->node.key);
    gdu_obj *mem = gdu_shim_obj(s, map->client, map->memory);
    gdu_obj *sub = mem != NULL ? gdu_shim_subdevice_of(s, mem) : NULL;
    s->freed[s->freed_next++ % GDU_SHIM_FREED_RING] =
        (gdu_freed_mapping){map->base, map->client, map->memory, sub != NULL ? sub->tpp : 0};
    mapping_gone(s, map);
    gdu_pool_free(map, sizeof *map);
}

static void range_mappings_visit(gdu_map_node *n, void *arg)
{
    struct range_mappings *rm = arg;
    gdu_mapping *m = (gdu_mapping *)n;
    if (m->base < rm->base + rm->length && rm->base < m->base + m->length)
        forget_mapping(rm->s, m);
}

/* After UVM freed or unmapped [base, base + length): the mappings there are gone. */
static void after_unmap(gdu_shim *s, const gdu_uvm_range *r)
{
    gdu_mapping *map = (gdu_mapping *)gdu_map_find(&s->mappings, r->base);
    if (map != NULL && map->length >= r->length) {
        forget_mapping(s, map); /* the common case: one allocation's range */
        return;
    }
    struct range_mappings rm = {s, r->base, r->length != 0 ? r->length : 1};
    gdu_map_each(&s->mappings, range_mappings_visit, &rm);
}

static void on_uvm_vaspace(gdu_shim *s, const gdu_uvm_register_gpu_vaspace_params *p)
{
    gdu_obj *v = gdu_shim_obj(s, p->hClient, p->hVaSpace);
    if (v != NULL && v->cls == GDU_FERMI_VASPACE_A)
        gdu_tpp_on_uvm_vaspace(s, v);
}

static int uvm_ioctl(gdu_shim *s, int fd, unsigned long request, void *arg)
{
    gdu_uvm_range range;
    bool unmap = request == GDU_UVM_FREE || request == GDU_UVM_UNMAP_EXTERNAL;
    if (unmap && __atomic_load_n(&s->owned_tpp, __ATOMIC_RELAXED) != 0) {
        unsigned char block[sizeof(gdu_uvm_unmap_external_params)];
        size_t size = gdu_uvm_watched_size(request, NULL);
        if (s->ops.read_block(s->ops.ctx, arg, block, size) == 0) {
            gdu_uvm_range_decode(request, block, &range);
            pthread_mutex_lock(&s->lock);
            gdu_tpp_unmapping(s, range.base, range.length);
            pthread_mutex_unlock(&s->lock);
        }
    }
    int r = s->ops.ioctl(s->ops.ctx, fd, request, arg);
    int saved = errno;
    if (r == 0) {
        pthread_mutex_lock(&s->lock);
        if (request == GDU_UVM_MAP_EXTERNAL_ALLOCATION) {
            if (!s->layout_known) {
                char why[sizeof s->refusal];
                snprintf(why, sizeof why, "%s", s->refusal);
                refuse(s, why);
            } else if (!s->refused) {
                gdu_uvm_map_external m;
                /* Until a block has matched the layout, its size is not known to be right. */
                const void *block = arg;
                if (!s->layout_validated)
                    block = s->ops.read_block(s->ops.ctx, arg, s->map_block, s->layout.size) == 0
                                ? s->map_block
                                : NULL;
                if (block != NULL) {
                    gdu_uvm_map_external_read(&s->layout, block, &m);
                    if (m.rm_status == GDU_NV_OK)
                        on_map(s, &m);
                }
            }
        } else if (request == GDU_UVM_REGISTER_GPU_VASPACE) {
            gdu_uvm_register_gpu_vaspace_params p;
            memcpy(&p, arg, sizeof p);
            if (p.rmStatus == GDU_NV_OK)
                on_uvm_vaspace(s, &p);
        } else {
            gdu_uvm_range_decode(request, arg, &range);
            if (range.status == GDU_NV_OK)
                after_unmap(s, &range);
        }
        pthread_mutex_unlock(&s->lock);
    }
    errno = saved;
    return r;
}

int gdu_shim_ioctl(gdu_shim *s, int fd, unsigned long request, void *arg)
{
    if (s->passive || arg == NULL)
        return s->ops.ioctl(s->ops.ctx, fd, request, arg);
    unsigned nr;
    size_t size;
    if (gdu_nv_ioctl_decode(request, &nr, &size)) {
        if (!gdu_rm_call_watched(nr, size) || s->ops.fd_kind(s->ops.ctx, fd) != GDU_FD_RM)
            return s->ops.ioctl(s->ops.ctx, fd, request, arg);
        return rm_ioctl(s, fd, request, nr, size, arg);
    }
    if ((request == GDU_UVM_MAP_EXTERNAL_ALLOCATION || request == GDU_UVM_FREE ||
         request == GDU_UVM_UNMAP_EXTERNAL || request == GDU_UVM_REGISTER_GPU_VASPACE) &&
        s->ops.fd_kind(s->ops.ctx, fd) == GDU_FD_UVM)
        return uvm_ioctl(s, fd, request, arg);
    return s->ops.ioctl(s->ops.ctx, fd, request, arg);
}

/* ---- life cycle ---- */

gdu_shim *gdu_shim_new(const gdu_shim_config *cfg, const gdu_shim_ops *ops)
{
    gdu_shim *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    pthread_mutex_init(&s->lock, NULL);
    s->cfg = *cfg;
    s->cfg.driver_version = NULL; /* not kept: the caller's text */
    s->ops = *ops;
    s->pid = cfg->pid;
    s->testmode = gdu_testmode_for(cfg);
    unsigned *v = s->driver_version;
    if (cfg->driver_version != NULL && gdu_nv_driver_version_parse(cfg->driver_version, v) == 0)
        snprintf(s->driver, sizeof s->driver, "%u.%u.%02u", v[0], v[1], v[2]);
    else
        snprintf(s->driver, sizeof s->driver, "unknown");
    char why[200];
    s->layout_known =
        gdu_uvm_layout_for_driver(cfg->driver_version, &s->layout, why, sizeof why) == 0;
    if (!s->layout_known)
        snprintf(s->refusal, sizeof s->refusal, "%s", why); /* logged at the first GPU mapping */
    return s;
}

static void free_node(gdu_map_node *n, void *arg) { gdu_pool_free(n, *(const size_t *)arg); }

void gdu_shim_free(gdu_shim *s)
{
    if (s == NULL)
        return;
    size_t obj_size = sizeof(gdu_obj), mapping_size = sizeof(gdu_mapping);
    gdu_map_each(&s->objects, free_node, &obj_size);
    gdu_map_each(&s->mappings, free_node, &mapping_size);
    gdu_map_destroy(&s->objects);
    gdu_map_destroy(&s->mappings);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

void gdu_shim_fork_prepare(gdu_shim *s) { pthread_mutex_lock(&s->lock); }

void gdu_shim_fork_parent(gdu_shim *s) { pthread_mutex_unlock(&s->lock); }

void gdu_shim_fork_child(gdu_shim *s)
{
    s->passive = true;
    pthread_mutex_unlock(&s->lock);
}

void gdu_shim_get_totals(gdu_shim *s, gdu_shim_totals *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&s->lock);
    for (unsigned i = 0; i < GDU_SHIM_GPU_SLOTS; i++) {
        const gdu_gpu_stats *g = &s->gpus[i];
        out->objects_created += g->objects_created;
        out->registered += g->registered;
        out->already_registered += g->already_registered;
        out->unregistered += g->unregistered;
        out->failures += g->failures;
    }
    out->live = out->registered - out->unregistered;
    out->clients = s->clients;
    out->rm_calls = s->rm_calls;
    out->mappings = s->mappings.count;
    out->objects = s->objects.count;
    pthread_mutex_unlock(&s->lock);
}

int gdu_shim_probe_registered(gdu_shim *s, uint64_t gpu_va, uint32_t *status)
{
    pthread_mutex_lock(&s->lock);
    int r = gdu_testmode_probe(s, gpu_va, status);
    pthread_mutex_unlock(&s->lock);
    return r;
}

bool gdu_shim_saw_gpu(gdu_shim *s)
{
    pthread_mutex_lock(&s->lock);
    bool saw = s->saw_client;
    pthread_mutex_unlock(&s->lock);
    return saw;
}

int gdu_shim_mapping_handles(gdu_shim *s, uint64_t va, uint32_t *client, uint32_t *memory,
                             int *rm_fd)
{
    pthread_mutex_lock(&s->lock);
    const gdu_mapping *m = gdu_shim_mapping_at(s, va);
    const gdu_obj *c = m != NULL ? gdu_shim_obj(s, m->client, m->client) : NULL;
    if (m != NULL) {
        *client = m->client;
        *memory = m->memory;
        *rm_fd = c != NULL ? c->fd : -1;
    }
    pthread_mutex_unlock(&s->lock);
    return m != NULL ? 0 : -1;
}
