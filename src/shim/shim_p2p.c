/* The NV503C (ThirdPartyP2P) lifecycle on one subdevice, and the shim's own
 * RM calls. Every status RM gives the shim is checked, counted and logged by
 * name; a failure leaves libcuda's objects and results as they were. */
#include "driverabi/ctrl0000_gpu.h"
#include "driverabi/ctrl2080_gpu.h"
#include "driverabi/nv503c.h"
#include "driverabi/nv_classes.h"
#include "driverabi/nv_escape.h"
#include "driverabi/nv_status.h"
#include "driverabi/nvos.h"
#include "shim/shim_decode.h"
#include "shim/shim_state.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* ---- the shim's own RM calls ---- */

/* Issues escape nr with block on the client's fd; returns RM's status (or
 * NV_ERR_GENERIC when the ioctl itself failed or a fault was injected).
 * Probes made for tests are not counted and never faulted. */
static uint32_t own_call(gdu_shim *s, uint32_t client, unsigned nr, void *block, size_t size, const uint32_t *status,
                         bool counted)
{
    if (counted && ++s->rm_calls == s->cfg.fault_at) {
        gdu_shim_log(s, GDU_LOG_INFO, "fault injected into the shim's RM call #%llu",
                     (unsigned long long)s->rm_calls);
        return GDU_NV_ERR_GENERIC;
    }
    gdu_obj *c = gdu_shim_obj(s, client, client);
    if (c == NULL || c->fd < 0)
        return GDU_NV_ERR_GENERIC;
    int saved = errno;
    int r = s->ops.ioctl(s->ops.ctx, c->fd, gdu_nv_ioctl_request(nr, size), block);
    if (r != 0)
        gdu_shim_log(s, GDU_LOG_ERROR, "RM escape 0x%x on fd %d failed: %s", nr, c->fd, strerror(errno));
    errno = saved;
    return r == 0 ? *status : GDU_NV_ERR_GENERIC;
}

static uint32_t own_alloc(gdu_shim *s, uint32_t client, uint32_t parent, uint32_t *handle, uint32_t cls,
                          void *params, uint32_t params_size)
{
    gdu_nvos64 p = {.hRoot = client, .hObjectParent = parent, .hObjectNew = *handle, .hClass = cls,
                    .pAllocParms = (uint64_t)(uintptr_t)params, .paramsSize = params_size};
    uint32_t st = own_call(s, client, GDU_NV_ESC_RM_ALLOC, &p, sizeof p, &p.status, true);
    *handle = p.hObjectNew;
    return st;
}

static uint32_t own_free(gdu_shim *s, uint32_t client, uint32_t parent, uint32_t handle)
{
    gdu_nvos00 p = {.hRoot = client, .hObjectParent = parent, .hObjectOld = handle};
    return own_call(s, client, GDU_NV_ESC_RM_FREE, &p, sizeof p, &p.status, true);
}

static uint32_t own_control_on(gdu_shim *s, uint32_t client, uint32_t object, uint32_t cmd, void *params,
                               uint32_t size, bool counted)
{
    gdu_nvos54 p = {.hClient = client, .hObject = object, .cmd = cmd, .params = (uint64_t)(uintptr_t)params,
                    .paramsSize = size};
    return own_call(s, client, GDU_NV_ESC_RM_CONTROL, &p, sizeof p, &p.status, counted);
}

static uint32_t own_control(gdu_shim *s, const gdu_obj *p2p, uint32_t cmd, void *params, uint32_t size, bool counted)
{
    return own_control_on(s, p2p->client, p2p->handle, cmd, params, size, counted);
}

/* The GPU's PCI address, for the report (read-only queries: not counted
 * among the shim's RM calls, never faulted). */
static void lookup_pci(gdu_shim *s, const gdu_obj *sub, gdu_gpu_stats *g)
{
    gdu_nv2080_gpu_get_id_params id = {0};
    if (own_control_on(s, sub->client, sub->handle, GDU_NV2080_CTRL_CMD_GPU_GET_ID, &id, sizeof id, false) !=
        GDU_NV_OK)
        return;
    gdu_nv0000_pci_info_params pci = {.gpuId = id.gpuId};
    if (own_control_on(s, sub->client, sub->client, GDU_NV0000_CTRL_CMD_GPU_GET_PCI_INFO, &pci, sizeof pci, false) ==
            GDU_NV_OK &&
        (pci.domain | pci.bus | pci.slot) != 0)
        snprintf(g->pci, sizeof g->pci, "%04x:%02x:%02x.0", pci.domain, pci.bus, pci.slot);
}

/* ---- bookkeeping ---- */

static int mode_rank(gdu_p2p_mode m)
{
    return m == GDU_P2P_FAILED ? 3 : m == GDU_P2P_UNLOCKED ? 2 : m == GDU_P2P_NATIVE ? 1 : 0;
}

static unsigned gpu_number(gdu_shim *s, const gdu_obj *sub)
{
    const gdu_obj *dev = gdu_shim_obj(s, sub->client, sub->parent);
    return dev != NULL ? dev->instance : 0;
}

static void set_mode(gdu_shim *s, gdu_obj *sub, gdu_p2p_mode mode, const char *reason)
{
    sub->mode = mode;
    gdu_gpu_stats *g = gdu_shim_gpu(s, sub);
    if (g->pci[0] == '\0')
        lookup_pci(s, sub, g);
    if (mode_rank(mode) >= mode_rank(g->mode)) {
        g->mode = mode;
        snprintf(g->reason, sizeof g->reason, "%s", reason != NULL ? reason : "");
    }
}

/* Counts a failed RM call of the shim; logs the first of each status per GPU
 * as an error, the rest at debug level. */
static void failure(gdu_shim *s, gdu_obj *sub, uint32_t status, const char *what)
{
    gdu_gpu_stats *g = gdu_shim_gpu(s, sub);
    g->failures++;
    bool first = true;
    unsigned i;
    for (i = 0; i < GDU_SHIM_FAIL_KINDS && g->fail[i].count != 0; i++)
        if (g->fail[i].status == status) {
            first = false;
            break;
        }
    if (i < GDU_SHIM_FAIL_KINDS) {
        g->fail[i].status = status;
        g->fail[i].count++;
    }
    gdu_shim_log(s, first ? GDU_LOG_ERROR : GDU_LOG_DEBUG, "GPU %u: %s: %s", gpu_number(s, sub), what,
                 gdu_nv_status_name(status));
}

static bool in_list(const uint32_t *arr, unsigned n, uint32_t h)
{
    for (unsigned i = 0; i < n; i++)
        if (arr[i] == h)
            return true;
    return false;
}

static void add_vaspace(gdu_obj *p2p, uint32_t vaspace, bool by_shim, uint64_t token)
{
    if (in_list(p2p->p2p_vaspaces, p2p->n_p2p_vaspaces, vaspace) || p2p->n_p2p_vaspaces >= GDU_SHIM_MAX_VASPACES)
        return;
    if (by_shim)
        p2p->p2p_vaspaces_by_shim |= 1u << p2p->n_p2p_vaspaces;
    p2p->p2p_vaspace_tokens[p2p->n_p2p_vaspaces] = token;
    p2p->p2p_vaspaces[p2p->n_p2p_vaspaces++] = vaspace;
}

static void remove_vaspace(gdu_obj *p2p, uint32_t vaspace)
{
    for (unsigned i = 0; i < p2p->n_p2p_vaspaces; i++) {
        if (p2p->p2p_vaspaces[i] != vaspace)
            continue;
        /* The last entry moves into slot i, its by-shim bit with it. */
        unsigned last = --p2p->n_p2p_vaspaces;
        uint32_t last_bit = (p2p->p2p_vaspaces_by_shim >> last) & 1u;
        p2p->p2p_vaspaces_by_shim &= ~(1u << last);
        if (i != last) {
            p2p->p2p_vaspaces[i] = p2p->p2p_vaspaces[last];
            p2p->p2p_vaspace_tokens[i] = p2p->p2p_vaspace_tokens[last];
            p2p->p2p_vaspaces_by_shim = (p2p->p2p_vaspaces_by_shim & ~(1u << i)) | (last_bit << i);
        }
        return;
    }
}

/* The VA space the shim registers with its NV503C: the one the process
 * registered with UVM for this GPU (UVM maps the process's allocations
 * there; libcuda registers that same one with its own NV503C, as the
 * recorded traces show), else the device's first FERMI_VASPACE_A. */
static gdu_obj *chosen_vaspace(gdu_shim *s, const gdu_obj *dev, const char **source)
{
    gdu_obj *first = NULL;
    for (unsigned i = 0; i < dev->n_vaspaces; i++) {
        gdu_obj *v = gdu_shim_obj(s, dev->client, dev->vaspaces[i]);
        if (v == NULL)
            continue;
        if (v->uvm_registered) {
            *source = "uvm";
            return v;
        }
        if (first == NULL)
            first = v;
    }
    *source = "first";
    return first;
}

static bool vaspace_by_shim(const gdu_obj *p2p, unsigned i)
{
    return (p2p->p2p_vaspaces_by_shim >> i) & 1u;
}

static void unregister_own_vaspaces(gdu_shim *s, gdu_obj *p2p)
{
    for (unsigned i = p2p->n_p2p_vaspaces; i-- > 0;) {
        if (!vaspace_by_shim(p2p, i))
            continue;
        uint32_t v = p2p->p2p_vaspaces[i];
        gdu_nv503c_unregister_va_space u = {.hVASpace = v};
        if (own_control(s, p2p, GDU_NV503C_CTRL_CMD_UNREGISTER_VA_SPACE, &u, sizeof u, true) == GDU_NV_OK)
            remove_vaspace(p2p, v);
    }
}

/* Gives the NV503C exactly one VA space. RM's lookup validates a buffer once
 * per registered VA space and rejects the object when a second one
 * validates too (p2p.c:886-887, src/pinmodel): so one, never all. */
static void ensure_vaspace(gdu_shim *s, gdu_obj *sub, gdu_obj *p2p)
{
    gdu_obj *dev = gdu_shim_obj(s, sub->client, sub->parent);
    const char *source = NULL;
    gdu_obj *v = dev != NULL ? chosen_vaspace(s, dev, &source) : NULL;
    if (v == NULL)
        return;
    gdu_gpu_stats *g = gdu_shim_gpu(s, sub);
    if (in_list(p2p->p2p_vaspaces, p2p->n_p2p_vaspaces, v->handle)) {
        g->vaspace = v->handle;
        if (g->vaspace_source == NULL || strcmp(source, "uvm") == 0)
            g->vaspace_source = source;
        return;
    }
    if (p2p->n_p2p_vaspaces > 0) {
        /* A registration of libcuda's stays as it is; the shim's own moves
         * to the VA space UVM maps into once that one is known. */
        if (strcmp(source, "uvm") != 0)
            return;
        unregister_own_vaspaces(s, p2p);
        if (p2p->n_p2p_vaspaces > 0)
            return;
    }
    if (in_list(p2p->p2p_vaspaces_failed, p2p->n_p2p_vaspaces_failed, v->handle))
        return;
    gdu_nv503c_register_va_space p = {.hVASpace = v->handle};
    uint32_t st = own_control(s, p2p, GDU_NV503C_CTRL_CMD_REGISTER_VA_SPACE, &p, sizeof p, true);
    if (st == GDU_NV_OK) {
        add_vaspace(p2p, v->handle, true, p.vaSpaceToken);
        g->va_spaces_registered++;
        g->vaspace = v->handle;
        g->vaspace_source = source;
        gdu_shim_log(s, GDU_LOG_DEBUG, "GPU %u: VA space 0x%x (%s) registered with ThirdPartyP2P 0x%x",
                     gpu_number(s, sub), v->handle,
                     strcmp(source, "uvm") == 0 ? "the one registered with UVM" : "the device's first",
                     p2p->handle);
    } else {
        if (p2p->n_p2p_vaspaces_failed < GDU_SHIM_MAX_VASPACES)
            p2p->p2p_vaspaces_failed[p2p->n_p2p_vaspaces_failed++] = v->handle;
        char what[96];
        snprintf(what, sizeof what, "REGISTER_VA_SPACE of VA space 0x%x", v->handle);
        failure(s, sub, st, what);
    }
}

struct overlap_scan {
    gdu_shim *s;
    const gdu_obj *p2p; /* NULL: registrations on any of the shim's objects */
    uint64_t address, size;
    bool by_shim_only;
    gdu_obj *found;
};

static bool overlaps(const gdu_obj *o, uint64_t address, uint64_t size)
{
    return o->reg_p2p != 0 && o->reg_address < address + size && address < o->reg_address + o->reg_size;
}

static void overlap_visit(gdu_map_node *n, void *arg)
{
    struct overlap_scan *sc = arg;
    gdu_obj *o = (gdu_obj *)n;
    if (sc->found == NULL && o->client == sc->p2p->client && o->reg_p2p == sc->p2p->handle &&
        (!sc->by_shim_only || o->reg_by_shim) && overlaps(o, sc->address, sc->size))
        sc->found = o;
}

static gdu_obj *registration_overlapping(gdu_shim *s, const gdu_obj *p2p, uint64_t address, uint64_t size,
                                         bool by_shim_only)
{
    struct overlap_scan sc = {s, p2p, address, size, by_shim_only, NULL};
    gdu_map_each(&s->objects, overlap_visit, &sc);
    return sc.found;
}

static bool same_registration(const gdu_obj *mem, const gdu_obj *p2p, uint64_t address, uint64_t size,
                              uint64_t offset)
{
    return mem->reg_p2p == p2p->handle && mem->reg_address == address && mem->reg_size == size &&
           mem->reg_offset == offset;
}

static void record_registration(gdu_obj *mem, const gdu_obj *p2p, bool by_shim, bool counted, uint64_t address,
                                uint64_t size, uint64_t offset)
{
    mem->reg_p2p = p2p->handle;
    mem->reg_by_shim = by_shim;
    mem->reg_counted = counted;
    mem->reg_address = address;
    mem->reg_size = size;
    mem->reg_offset = offset;
}

static void register_memory(gdu_shim *s, gdu_obj *sub, gdu_obj *p2p, gdu_obj *mem, const gdu_mapping *m)
{
    gdu_gpu_stats *g = gdu_shim_gpu(s, sub);
    uint64_t address, size, offset;
    if (!gdu_vidmem_aligned_part(m->base, m->length, m->offset, &address, &size, &offset)) {
        g->skipped++;
        g->skipped_bytes += m->length;
        gdu_shim_log(s, GDU_LOG_DEBUG, "GPU %u: mapping 0x%llx+0x%llx has no 64 KiB aligned part; not registered",
                     gpu_number(s, sub), (unsigned long long)m->base, (unsigned long long)m->length);
        return;
    }
    if (mem->reg_p2p != 0) {
        if (same_registration(mem, p2p, address, size, offset)) {
            g->already_registered++; /* by libcuda (test mode), before its mapping */
            return;
        }
        /* RM keys registrations by hMemory (third_party_p2p.c:499-503): a
         * memory object mapped at a second address cannot be registered there. */
        g->second_mappings++;
        g->skipped_bytes += m->length;
        gdu_shim_log(s, GDU_LOG_INFO,
                     "GPU %u: memory 0x%x is registered at 0x%llx already; its mapping at 0x%llx is not registered "
                     "(RM keeps one registration per memory object)",
                     gpu_number(s, sub), mem->handle, (unsigned long long)mem->reg_address, (unsigned long long)m->base);
        return;
    }
    g->skipped_bytes += m->length - size;
    for (int attempt = 0; attempt < 2; attempt++) {
        gdu_nv503c_register_vidmem p = {.hMemory = mem->handle, .address = address, .size = size, .offset = offset};
        uint32_t st = own_control(s, p2p, GDU_NV503C_CTRL_CMD_REGISTER_VIDMEM, &p, sizeof p, true);
        if (st == GDU_NV_OK) {
            record_registration(mem, p2p, true, true, address, size, offset);
            g->registered++;
            gdu_shim_log(s, GDU_LOG_DEBUG, "GPU %u: memory 0x%x at 0x%llx (%llu bytes) registered", gpu_number(s, sub),
                         mem->handle, (unsigned long long)address, (unsigned long long)size);
            return;
        }
        if (st == GDU_NV_ERR_NOT_SUPPORTED) {
            /* RM registers only video memory (ADDR_FBMEM): this one is not. */
            g->skipped++;
            g->skipped_bytes += size;
            gdu_shim_log(s, GDU_LOG_DEBUG, "GPU %u: memory 0x%x is not registrable: %s", gpu_number(s, sub),
                         mem->handle, gdu_nv_status_name(st));
            return;
        }
        if (st == GDU_NV_ERR_INSERT_DUPLICATE_NAME && attempt == 0) {
            /* The memory is not registered (the shim would know), so the range
             * overlaps a registration RM still holds (btreeInsert,
             * third_party_p2p.c:519): one of the shim's whose VA was unmapped
             * without being noticed goes; anything else is not the shim's to take. */
            gdu_obj *old = registration_overlapping(s, p2p, address, size, true);
            if (old != NULL) {
                gdu_shim_log(s, GDU_LOG_INFO, "GPU %u: memory 0x%x's stale registration at 0x%llx is in the way; taken back",
                             gpu_number(s, sub), old->handle, (unsigned long long)old->reg_address);
                gdu_p2p_unregister(s, old);
                g->stale_unregistered++;
                if (old->reg_p2p == 0)
                    continue;
            }
        }
        char what[200];
        snprintf(what, sizeof what, "REGISTER_VIDMEM of memory 0x%x at 0x%llx (%llu bytes)%s", mem->handle,
                 (unsigned long long)address, (unsigned long long)size,
                 st == GDU_NV_ERR_INSERT_DUPLICATE_NAME ? " overlaps a registration the shim did not make; left unregistered"
                                                        : "");
        failure(s, sub, st, what);
        return;
    }
}

struct device_mappings {
    gdu_shim *s;
    gdu_obj *sub, *p2p;
};

static void register_mapping_visit(gdu_map_node *n, void *arg)
{
    struct device_mappings *dm = arg;
    gdu_mapping *m = (gdu_mapping *)n;
    if (m->client != dm->sub->client)
        return;
    gdu_obj *mem = gdu_shim_obj(dm->s, m->client, m->memory);
    if (mem != NULL && mem->cls == GDU_NV01_MEMORY_LOCAL_USER && mem->reg_p2p == 0 &&
        gdu_shim_subdevice_of(dm->s, mem) == dm->sub)
        register_memory(dm->s, dm->sub, dm->p2p, mem, m);
}

/* Makes the shim's NV503C under sub; registers the device's VA spaces and the
 * device memory mapped so far. */
static bool create(gdu_shim *s, gdu_obj *sub)
{
    gdu_nv503c_alloc_params ap = {.flags = GDU_NV503C_ALLOC_FLAGS_TYPE_BAR1};
    uint32_t h = 0; /* RM picks a handle from the client's own range: no clash with libcuda's */
    uint32_t st = own_alloc(s, sub->client, sub->handle, &h, GDU_NV50_THIRD_PARTY_P2P, &ap, sizeof ap);
    gdu_obj *p2p = st == GDU_NV_OK ? gdu_shim_obj_add(s, sub->client, h, sub->handle, GDU_NV50_THIRD_PARTY_P2P) : NULL;
    if (p2p == NULL) {
        char what[160];
        snprintf(what, sizeof what, "creating ThirdPartyP2P (class 0x503c, BAR1) under subdevice 0x%x", sub->handle);
        if (st == GDU_NV_OK)
            own_free(s, sub->client, sub->handle, h);
        failure(s, sub, st, what);
        char reason[200];
        snprintf(reason, sizeof reason, "%s failed: %s", what, gdu_nv_status_name(st));
        set_mode(s, sub, GDU_P2P_FAILED, reason);
        return false;
    }
    p2p->p2p_owned = true;
    __atomic_add_fetch(&s->owned_p2p, 1, __ATOMIC_RELAXED);
    sub->p2p = h;
    sub->p2p_owned = true;
    gdu_shim_gpu(s, sub)->objects_created++;
    set_mode(s, sub, GDU_P2P_UNLOCKED, NULL);
    gdu_shim_log(s, GDU_LOG_INFO, "GPU %u: created ThirdPartyP2P 0x%x (BAR1) under subdevice 0x%x of client 0x%x",
                 gpu_number(s, sub), h, sub->handle, sub->client);
    ensure_vaspace(s, sub, p2p);
    struct device_mappings dm = {s, sub, p2p};
    gdu_map_each(&s->mappings, register_mapping_visit, &dm);
    return true;
}

/* ---- events ---- */

void gdu_p2p_on_mapping(gdu_shim *s, gdu_obj *sub, gdu_obj *mem, const gdu_mapping *m)
{
    if (s->refused)
        return;
    if (sub->mode == GDU_P2P_NONE) {
        create(s, sub); /* registers this mapping too */
        return;
    }
    if (sub->mode != GDU_P2P_UNLOCKED)
        return; /* native: libcuda registers; failed: said so once */
    gdu_obj *p2p = gdu_shim_obj(s, sub->client, sub->p2p);
    if (p2p == NULL)
        return;
    ensure_vaspace(s, sub, p2p);
    register_memory(s, sub, p2p, mem, m);
}

void gdu_p2p_on_uvm_vaspace(gdu_shim *s, gdu_obj *vaspace)
{
    gdu_obj *dev = gdu_shim_obj(s, vaspace->client, vaspace->parent);
    if (dev == NULL || dev->cls != GDU_NV01_DEVICE_0)
        return;
    for (unsigned i = 0; i < dev->n_vaspaces; i++) {
        gdu_obj *v = gdu_shim_obj(s, dev->client, dev->vaspaces[i]);
        if (v != NULL)
            v->uvm_registered = v == vaspace; /* one GPU VA space per GPU in UVM */
    }
    gdu_obj *sub = dev->subdevice ? gdu_shim_obj(s, dev->client, dev->subdevice) : NULL;
    gdu_obj *p2p = sub != NULL && sub->p2p_owned ? gdu_shim_obj(s, sub->client, sub->p2p) : NULL;
    if (p2p != NULL && !s->refused)
        ensure_vaspace(s, sub, p2p);
}

struct unmap_scan {
    gdu_shim *s;
    uint64_t base, length;
};

static void unmap_visit(gdu_map_node *n, void *arg)
{
    struct unmap_scan *sc = arg;
    gdu_obj *o = (gdu_obj *)n;
    if (o->reg_by_shim && overlaps(o, sc->base, sc->length))
        gdu_p2p_unregister(sc->s, o);
}

/* RM drops a registration only when its memory is freed
 * (CliUnregisterMemoryFromThirdPartyP2P, video_mem.c:1119), not when its VA
 * is unmapped; a registration left at an unmapped VA would be found for
 * whatever is mapped there next. */
void gdu_p2p_unmapping(gdu_shim *s, uint64_t base, uint64_t length)
{
    if (length == 0)
        return;
    struct unmap_scan sc = {s, base, length};
    gdu_map_each(&s->objects, unmap_visit, &sc);
}

void gdu_p2p_on_vaspace(gdu_shim *s, gdu_obj *sub, uint32_t vaspace)
{
    gdu_obj *p2p = gdu_shim_obj(s, sub->client, sub->p2p);
    if (p2p != NULL && sub->p2p_owned)
        ensure_vaspace(s, sub, p2p);
}

/* Test mode: frees libcuda's NV503C and makes the shim's own under the same
 * handle, so that libcuda's later controls on that handle keep working. */
static void adopt(gdu_shim *s, gdu_obj *sub, gdu_obj *p2p)
{
    uint32_t h = p2p->handle;
    char what[160];
    uint32_t st = own_free(s, sub->client, sub->handle, h);
    if (st != GDU_NV_OK) {
        snprintf(what, sizeof what, "test mode: freeing libcuda's ThirdPartyP2P 0x%x (left native)", h);
        failure(s, sub, st, what);
        sub->p2p = h;
        set_mode(s, sub, GDU_P2P_NATIVE, NULL);
        return;
    }
    gdu_nv503c_alloc_params ap = {.flags = GDU_NV503C_ALLOC_FLAGS_TYPE_BAR1};
    st = own_alloc(s, sub->client, sub->handle, &h, GDU_NV50_THIRD_PARTY_P2P, &ap, sizeof ap);
    if (st != GDU_NV_OK) {
        snprintf(what, sizeof what, "test mode: re-creating ThirdPartyP2P 0x%x (libcuda's handle is now gone)", h);
        failure(s, sub, st, what);
        char reason[200];
        snprintf(reason, sizeof reason, "%s failed: %s", what, gdu_nv_status_name(st));
        gdu_shim_obj_remove(s, p2p);
        sub->p2p = 0;
        set_mode(s, sub, GDU_P2P_FAILED, reason);
        return;
    }
    p2p->p2p_owned = true;
    p2p->p2p_adopted = true;
    __atomic_add_fetch(&s->owned_p2p, 1, __ATOMIC_RELAXED);
    sub->p2p = h;
    sub->p2p_owned = true;
    gdu_shim_gpu(s, sub)->objects_created++;
    set_mode(s, sub, GDU_P2P_UNLOCKED, NULL);
    gdu_shim_log(s, GDU_LOG_INFO, "GPU %u: test mode: libcuda's ThirdPartyP2P 0x%x replaced by the shim's own",
                 gpu_number(s, sub), h);
}

/* Strict test mode: frees libcuda's NV503C and answers libcuda's later calls
 * on its handle; the shim's own NV503C gets a handle RM generates. */
static void stand_in(gdu_shim *s, gdu_obj *sub, gdu_obj *p2p)
{
    uint32_t st = own_free(s, sub->client, sub->handle, p2p->handle);
    if (st != GDU_NV_OK) {
        char what[160];
        snprintf(what, sizeof what, "strict test mode: freeing libcuda's ThirdPartyP2P 0x%x (left native)",
                 p2p->handle);
        failure(s, sub, st, what);
        sub->p2p = p2p->handle;
        set_mode(s, sub, GDU_P2P_NATIVE, NULL);
        return;
    }
    p2p->p2p_answered = true;
    __atomic_add_fetch(&s->answered_p2p, 1, __ATOMIC_RELAXED);
    gdu_shim_log(s, GDU_LOG_INFO,
                 "GPU %u: strict test mode: libcuda's ThirdPartyP2P 0x%x freed; its calls on it are answered by the shim",
                 gpu_number(s, sub), p2p->handle);
    if (!sub->p2p_owned)
        create(s, sub);
}

/* Only VA spaces of the stand-in's device are answered with a token: the
 * shim's own registration of it. */
static uint64_t own_token(gdu_shim *s, gdu_obj *sub, uint32_t vaspace)
{
    gdu_obj *own = sub->p2p_owned ? gdu_shim_obj(s, sub->client, sub->p2p) : NULL;
    if (own == NULL)
        return 0;
    ensure_vaspace(s, sub, own);
    for (unsigned i = 0; i < own->n_p2p_vaspaces; i++)
        if (own->p2p_vaspaces[i] == vaspace)
            return own->p2p_vaspace_tokens[i];
    return 0;
}

uint32_t gdu_p2p_answer_control(gdu_shim *s, gdu_obj *stand_in_p2p, uint32_t cmd, void *params, uint32_t size)
{
    gdu_obj *sub = gdu_shim_obj(s, stand_in_p2p->client, stand_in_p2p->parent);
    if (sub == NULL)
        return GDU_NV_OK;
    gdu_shim_gpu(s, sub)->answered_for_libcuda++;
    if (cmd == GDU_NV503C_CTRL_CMD_REGISTER_VA_SPACE && params != NULL &&
        size >= sizeof(gdu_nv503c_register_va_space)) {
        gdu_nv503c_register_va_space p;
        memcpy(&p, params, sizeof p);
        p.vaSpaceToken = own_token(s, sub, p.hVASpace);
        memcpy(params, &p, sizeof p);
    }
    gdu_shim_log(s, GDU_LOG_DEBUG, "GPU %u: strict test mode: libcuda's control 0x%x on 0x%x answered NV_OK",
                 gpu_number(s, sub), cmd, stand_in_p2p->handle);
    return GDU_NV_OK;
}

void gdu_p2p_on_native(gdu_shim *s, gdu_obj *sub, gdu_obj *p2p)
{
    if (s->cfg.test_drop_native && !s->refused) {
        if (s->cfg.test_strict)
            stand_in(s, sub, p2p);
        else
            adopt(s, sub, p2p);
        return;
    }
    sub->p2p = p2p->handle;
    sub->p2p_owned = false;
    set_mode(s, sub, GDU_P2P_NATIVE, NULL);
    gdu_shim_log(s, GDU_LOG_INFO, "GPU %u: libcuda has its own ThirdPartyP2P 0x%x: native, nothing to do",
                 gpu_number(s, sub), p2p->handle);
}

void gdu_p2p_before_native(gdu_shim *s, gdu_obj *sub)
{
    gdu_obj *p2p = gdu_shim_obj(s, sub->client, sub->p2p);
    uint32_t st = own_free(s, sub->client, sub->handle, sub->p2p);
    if (st != GDU_NV_OK) {
        failure(s, sub, st, "freeing the shim's ThirdPartyP2P so that libcuda can make its own");
        return;
    }
    gdu_shim_log(s, GDU_LOG_INFO, "GPU %u: libcuda makes its own ThirdPartyP2P; the shim's 0x%x is freed for it",
                 gpu_number(s, sub), sub->p2p);
    if (p2p != NULL) {
        gdu_p2p_forget(s, p2p);
        gdu_shim_obj_remove(s, p2p);
    }
}

void gdu_p2p_registration_ended(gdu_shim *s, gdu_obj *mem)
{
    gdu_obj *p2p = gdu_shim_obj(s, mem->client, mem->reg_p2p);
    gdu_obj *sub = p2p != NULL ? gdu_shim_obj(s, p2p->client, p2p->parent) : NULL;
    if (mem->reg_counted && sub != NULL)
        gdu_shim_gpu(s, sub)->unregistered++;
    mem->reg_p2p = 0;
    mem->reg_by_shim = false;
    mem->reg_counted = false;
}

void gdu_p2p_unregister(gdu_shim *s, gdu_obj *mem)
{
    gdu_obj *p2p = gdu_shim_obj(s, mem->client, mem->reg_p2p);
    gdu_obj *sub = p2p != NULL ? gdu_shim_obj(s, p2p->client, p2p->parent) : NULL;
    if (!mem->reg_by_shim || sub == NULL)
        return;
    gdu_nv503c_unregister_vidmem p = {.hMemory = mem->handle};
    uint32_t st = own_control(s, p2p, GDU_NV503C_CTRL_CMD_UNREGISTER_VIDMEM, &p, sizeof p, true);
    if (st == GDU_NV_OK || st == GDU_NV_ERR_OBJECT_NOT_FOUND) {
        gdu_p2p_registration_ended(s, mem);
        gdu_shim_log(s, GDU_LOG_DEBUG, "GPU %u: memory 0x%x unregistered: %s", gpu_number(s, sub), mem->handle,
                     gdu_nv_status_name(st));
    } else {
        char what[96];
        snprintf(what, sizeof what, "UNREGISTER_VIDMEM of memory 0x%x", mem->handle);
        failure(s, sub, st, what); /* RM still drops it when the memory is freed */
    }
}

/* Test mode only: libcuda controls the NV503C that replaced its own. Whatever
 * the shim registered there is taken back first, so that libcuda's call gets
 * the answer it would get from its own object. */
void gdu_p2p_before_control(gdu_shim *s, gdu_obj *p2p, uint32_t cmd, const void *params, size_t size)
{
    if (cmd == GDU_NV503C_CTRL_CMD_REGISTER_VIDMEM && size >= sizeof(gdu_nv503c_register_vidmem)) {
        /* Step aside so that libcuda's registration gets the answer it would get natively. */
        gdu_nv503c_register_vidmem p;
        memcpy(&p, params, sizeof p);
        gdu_obj *mem = gdu_shim_obj(s, p2p->client, p.hMemory);
        if (mem != NULL && mem->reg_p2p == p2p->handle && mem->reg_by_shim)
            gdu_p2p_unregister(s, mem);
        gdu_obj *o;
        while ((o = registration_overlapping(s, p2p, p.address, p.size, true)) != NULL) {
            gdu_p2p_unregister(s, o);
            if (o->reg_p2p != 0)
                break; /* RM kept it: libcuda gets the answer it gets */
        }
    } else if (cmd == GDU_NV503C_CTRL_CMD_UNREGISTER_VIDMEM && size >= sizeof(uint32_t)) {
        /* What libcuda did not register is not there for it to unregister. */
        uint32_t h;
        memcpy(&h, params, sizeof h);
        gdu_obj *mem = gdu_shim_obj(s, p2p->client, h);
        if (mem != NULL && mem->reg_p2p == p2p->handle && mem->reg_by_shim)
            gdu_p2p_unregister(s, mem);
    } else if (cmd == GDU_NV503C_CTRL_CMD_REGISTER_VA_SPACE) {
        /* One VA space per object: libcuda's choice replaces the shim's. */
        unregister_own_vaspaces(s, p2p);
    } else if (cmd == GDU_NV503C_CTRL_CMD_UNREGISTER_VA_SPACE && size >= sizeof(uint32_t)) {
        uint32_t v;
        memcpy(&v, params, sizeof v);
        for (unsigned i = 0; i < p2p->n_p2p_vaspaces; i++) {
            if (p2p->p2p_vaspaces[i] != v || !vaspace_by_shim(p2p, i))
                continue;
            gdu_nv503c_unregister_va_space u = {.hVASpace = v};
            if (own_control(s, p2p, GDU_NV503C_CTRL_CMD_UNREGISTER_VA_SPACE, &u, sizeof u, true) == GDU_NV_OK)
                remove_vaspace(p2p, v);
            break;
        }
    }
}

void gdu_p2p_after_control(gdu_shim *s, gdu_obj *p2p, uint32_t cmd, const void *params, size_t size)
{
    uint32_t h;
    if (size < sizeof h)
        return;
    memcpy(&h, params, sizeof h);
    switch (cmd) {
    case GDU_NV503C_CTRL_CMD_REGISTER_VA_SPACE: {
        gdu_nv503c_register_va_space p = {0};
        memcpy(&p, params, size < sizeof p ? size : sizeof p);
        add_vaspace(p2p, h, false, p.vaSpaceToken);
        gdu_obj *sub = gdu_shim_obj(s, p2p->client, p2p->parent);
        if (sub != NULL) {
            gdu_gpu_stats *g = gdu_shim_gpu(s, sub);
            g->vaspace = h;
            g->vaspace_source = "libcuda";
        }
        break;
    }
    case GDU_NV503C_CTRL_CMD_UNREGISTER_VA_SPACE:
        remove_vaspace(p2p, h);
        break;
    case GDU_NV503C_CTRL_CMD_REGISTER_VIDMEM: {
        gdu_obj *mem = gdu_shim_obj(s, p2p->client, h);
        if (mem != NULL && size >= sizeof(gdu_nv503c_register_vidmem)) {
            gdu_nv503c_register_vidmem p;
            memcpy(&p, params, sizeof p);
            gdu_obj *sub = gdu_shim_obj(s, p2p->client, p2p->parent);
            mem->reg_p2p = p2p->handle;
            mem->reg_by_shim = false;
            /* On the shim's own object (test mode) libcuda's registration counts too. */
            mem->reg_counted = p2p->p2p_owned && sub != NULL;
            if (mem->reg_counted) {
                gdu_shim_gpu(s, sub)->registered++;
                gdu_shim_gpu(s, sub)->registered_by_libcuda++;
            }
            mem->reg_address = p.address;
            mem->reg_size = p.size;
            mem->reg_offset = p.offset;
        }
        break;
    }
    case GDU_NV503C_CTRL_CMD_UNREGISTER_VIDMEM: {
        gdu_obj *mem = gdu_shim_obj(s, p2p->client, h);
        if (mem != NULL && mem->reg_p2p == p2p->handle)
            gdu_p2p_registration_ended(s, mem);
        break;
    }
    default:
        break;
    }
}

struct forget_scan {
    gdu_shim *s;
    gdu_obj *p2p;
};

static void forget_visit(gdu_map_node *n, void *arg)
{
    struct forget_scan *sc = arg;
    gdu_obj *o = (gdu_obj *)n;
    if (o->client == sc->p2p->client && o->reg_p2p == sc->p2p->handle)
        gdu_p2p_registration_ended(sc->s, o); /* RM dropped it with the object */
}

void gdu_p2p_forget(gdu_shim *s, gdu_obj *p2p)
{
    gdu_obj *sub = gdu_shim_obj(s, p2p->client, p2p->parent);
    struct forget_scan sc = {s, p2p};
    gdu_map_each(&s->objects, forget_visit, &sc);
    if (p2p->p2p_owned) {
        p2p->p2p_owned = false;
        __atomic_sub_fetch(&s->owned_p2p, 1, __ATOMIC_RELAXED);
    }
    if (p2p->p2p_answered) {
        p2p->p2p_answered = false;
        __atomic_sub_fetch(&s->answered_p2p, 1, __ATOMIC_RELAXED);
    }
    if (sub != NULL && sub->p2p == p2p->handle) {
        sub->p2p = 0;
        sub->p2p_owned = false;
        if (sub->mode == GDU_P2P_UNLOCKED)
            sub->mode = GDU_P2P_NONE; /* made again at the next mapping */
    }
}

/* ---- test probe ---- */

/* A GPU VA in the kernel half, which no allocation of a process has. */
#define GDU_PROBE_VA 0xfff0000000000000ull

struct containing_scan {
    uint64_t va;
    gdu_mapping *found;
};

static void containing_visit(gdu_map_node *n, void *arg)
{
    struct containing_scan *sc = arg;
    gdu_mapping *m = (gdu_mapping *)n;
    if (sc->va >= m->base && sc->va - m->base < m->length)
        sc->found = m;
}

int gdu_p2p_probe(gdu_shim *s, uint64_t gpu_va, uint32_t *status)
{
    *status = GDU_NV_ERR_GENERIC;
    struct containing_scan sc = {gpu_va, (gdu_mapping *)gdu_map_find(&s->mappings, gpu_va)};
    if (sc.found == NULL)
        gdu_map_each(&s->mappings, containing_visit, &sc);
    if (sc.found != NULL) {
        gdu_mapping *m = sc.found;
        gdu_obj *mem = gdu_shim_obj(s, m->client, m->memory);
        gdu_obj *sub = mem != NULL ? gdu_shim_subdevice_of(s, mem) : NULL;
        gdu_obj *p2p = sub != NULL ? gdu_shim_obj(s, sub->client, sub->p2p) : NULL;
        if (p2p == NULL)
            return -1;
        /* RM keys registrations by hMemory before it looks at the range
         * (third_party_p2p.c:499-503): a registration of the memory at an
         * address no allocation has answers 0x19 exactly when the memory is
         * registered already, whatever else overlaps what. */
        gdu_nv503c_register_vidmem p = {.hMemory = mem->handle, .address = GDU_PROBE_VA, .size = GDU_NV503C_VIDMEM_ALIGN};
        *status = own_control(s, p2p, GDU_NV503C_CTRL_CMD_REGISTER_VIDMEM, &p, sizeof p, false);
        if (*status == GDU_NV_ERR_INSERT_DUPLICATE_NAME)
            return 1;
        if (*status != GDU_NV_OK)
            return -1;
        gdu_nv503c_unregister_vidmem u = {.hMemory = mem->handle};
        own_control(s, p2p, GDU_NV503C_CTRL_CMD_UNREGISTER_VIDMEM, &u, sizeof u, false);
        return 0;
    }
    for (unsigned i = 1; i <= GDU_SHIM_FREED_RING; i++) {
        const gdu_freed_mapping *f = &s->freed[(s->freed_next - i) % GDU_SHIM_FREED_RING];
        if (f->base != gpu_va || f->p2p == 0)
            continue;
        gdu_obj *p2p = gdu_shim_obj(s, f->client, f->p2p);
        if (p2p == NULL)
            return -1;
        gdu_obj *mem = gdu_shim_obj(s, f->client, f->memory);
        if (mem != NULL && mem->reg_p2p != 0) {
            /* The handle is registered again, for a live mapping elsewhere:
             * asking RM would take that registration away. */
            *status = GDU_NV_OK;
            return 0;
        }
        gdu_nv503c_unregister_vidmem u = {.hMemory = f->memory};
        *status = own_control(s, p2p, GDU_NV503C_CTRL_CMD_UNREGISTER_VIDMEM, &u, sizeof u, false);
        return *status == GDU_NV_ERR_OBJECT_NOT_FOUND ? 0 : *status == GDU_NV_OK ? 1 : -1;
    }
    return -1;
}
