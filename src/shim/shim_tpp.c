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
#include "util/pci_addr.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* ---- the shim's own RM calls ---- */

bool gdu_shim_own_call_faulted(gdu_shim *s)
{
    if (++s->rm_calls != s->cfg.fault_at)
        return false;
    gdu_shim_log(s, GDU_LOG_INFO, "fault injected into the shim's RM call #%llu",
                 (unsigned long long)s->rm_calls);
    return true;
}

/* Issues escape nr with block on the client's fd; returns RM's status (or
 * NV_ERR_GENERIC when the ioctl itself failed or a fault was injected).
 * Probes made for tests are not counted and never faulted. */
static uint32_t own_call(gdu_shim *s, uint32_t client, unsigned nr, void *block, size_t size,
                         const uint32_t *status, bool counted)
{
    if (counted && gdu_shim_own_call_faulted(s))
        return GDU_NV_ERR_GENERIC;
    gdu_obj *c = gdu_shim_obj(s, client, client);
    if (c == NULL || c->fd < 0)
        return GDU_NV_ERR_GENERIC;
    int saved = errno;
    int r = s->ops.ioctl(s->ops.ctx, c->fd, gdu_nv_ioctl_request(nr, size), block);
    if (r != 0)
        gdu_shim_log(s, GDU_LOG_ERROR, "RM escape 0x%x on fd %d failed: %s", nr, c->fd,
                     strerror(errno));
    errno = saved;
    return r == 0 ? *status : GDU_NV_ERR_GENERIC;
}

uint32_t gdu_tpp_own_alloc(gdu_shim *s, uint32_t client, uint32_t parent, uint32_t *handle,
                           uint32_t cls, void *params, uint32_t params_size)
{
    gdu_nvos64 p = {.hRoot = client,
                    .hObjectParent = parent,
                    .hObjectNew = *handle,
                    .hClass = cls,
                    .pAllocParms = (uint64_t)(uintptr_t)params,
                    .paramsSize = params_size};
    uint32_t st = own_call(s, client, GDU_NV_ESC_RM_ALLOC, &p, sizeof p, &p.status, true);
    *handle = p.hObjectNew;
    return st;
}

uint32_t gdu_tpp_own_free(gdu_shim *s, uint32_t client, uint32_t parent, uint32_t handle)
{
    gdu_nvos00 p = {.hRoot = client, .hObjectParent = parent, .hObjectOld = handle};
    return own_call(s, client, GDU_NV_ESC_RM_FREE, &p, sizeof p, &p.status, true);
}

static uint32_t own_control_on(gdu_shim *s, uint32_t client, uint32_t object, uint32_t cmd,
                               void *params, uint32_t size, bool counted)
{
    gdu_nvos54 p = {.hClient = client,
                    .hObject = object,
                    .cmd = cmd,
                    .params = (uint64_t)(uintptr_t)params,
                    .paramsSize = size};
    return own_call(s, client, GDU_NV_ESC_RM_CONTROL, &p, sizeof p, &p.status, counted);
}

uint32_t gdu_tpp_own_control(gdu_shim *s, const gdu_obj *tpp, uint32_t cmd, void *params,
                             uint32_t size, bool counted)
{
    return own_control_on(s, tpp->client, tpp->handle, cmd, params, size, counted);
}

/* The GPU's PCI address, for the report (read-only queries: not counted
 * among the shim's RM calls, never faulted). */
static void lookup_pci(gdu_shim *s, const gdu_obj *sub, gdu_gpu_stats *g)
{
    gdu_nv2080_gpu_get_id_params id = {0};
    if (own_control_on(s, sub->client, sub->handle, GDU_NV2080_CTRL_CMD_GPU_GET_ID, &id, sizeof id,
                       false) != GDU_NV_OK)
        return;
    gdu_nv0000_pci_info_params pci = {.gpuId = id.gpuId};
    if (own_control_on(s, sub->client, sub->client, GDU_NV0000_CTRL_CMD_GPU_GET_PCI_INFO, &pci,
                       sizeof pci, false) == GDU_NV_OK &&
        (pci.domain | pci.bus | pci.slot) != 0)
        gdu_pci_addr_format(g->pci, sizeof g->pci, pci.domain, pci.bus, pci.slot, 0);
}

/* ---- bookkeeping ---- */

static int mode_rank(gdu_tpp_mode m)
{
    return m == GDU_TPP_FAILED ? 3 : m == GDU_TPP_UNLOCKED ? 2 : m == GDU_TPP_NATIVE ? 1 : 0;
}

unsigned gdu_tpp_gpu_number(gdu_shim *s, const gdu_obj *sub)
{
    const gdu_obj *dev = gdu_shim_obj(s, sub->client, sub->parent);
    return dev != NULL ? dev->instance : 0;
}

void gdu_tpp_set_mode(gdu_shim *s, gdu_obj *sub, gdu_tpp_mode mode, const char *reason)
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

void gdu_tpp_own_made(gdu_shim *s, gdu_obj *sub, gdu_obj *tpp)
{
    tpp->tpp_owned = true;
    __atomic_add_fetch(&s->owned_tpp, 1, __ATOMIC_RELAXED);
    sub->tpp = tpp->handle;
    sub->tpp_owned = true;
    gdu_shim_gpu(s, sub)->objects_created++;
    gdu_tpp_set_mode(s, sub, GDU_TPP_UNLOCKED, NULL);
}

/* Counts a failed RM call of the shim; logs the first of each status per GPU
 * as an error, the rest at debug level. */
void gdu_tpp_failure(gdu_shim *s, gdu_obj *sub, uint32_t status, const char *what)
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
    gdu_shim_log(s, first ? GDU_LOG_ERROR : GDU_LOG_DEBUG, "GPU %u: %s: %s",
                 gdu_tpp_gpu_number(s, sub), what, gdu_nv_status_name(status));
}

void gdu_tpp_own_failed(gdu_shim *s, gdu_obj *sub, uint32_t status, const char *what)
{
    gdu_tpp_failure(s, sub, status, what);
    char reason[200];
    snprintf(reason, sizeof reason, "%s failed: %s", what, gdu_nv_status_name(status));
    gdu_tpp_set_mode(s, sub, GDU_TPP_FAILED, reason);
}

static bool in_list(const uint32_t *arr, unsigned n, uint32_t h)
{
    for (unsigned i = 0; i < n; i++)
        if (arr[i] == h)
            return true;
    return false;
}

static void add_vaspace(gdu_obj *tpp, uint32_t vaspace, bool by_shim, uint64_t token)
{
    if (!in_list(tpp->tpp_deps, tpp->n_tpp_deps, vaspace) && tpp->n_tpp_deps < GDU_SHIM_MAX_DEPS)
        tpp->tpp_deps[tpp->n_tpp_deps++] = vaspace;
    if (in_list(tpp->tpp_vaspaces, tpp->n_tpp_vaspaces, vaspace) ||
        tpp->n_tpp_vaspaces >= GDU_SHIM_MAX_VASPACES)
        return;
    if (by_shim)
        tpp->tpp_vaspaces_by_shim |= 1u << tpp->n_tpp_vaspaces;
    tpp->tpp_vaspace_tokens[tpp->n_tpp_vaspaces] = token;
    tpp->tpp_vaspaces[tpp->n_tpp_vaspaces++] = vaspace;
}

void gdu_tpp_remove_vaspace(gdu_obj *tpp, uint32_t vaspace)
{
    for (unsigned i = 0; i < tpp->n_tpp_vaspaces; i++) {
        if (tpp->tpp_vaspaces[i] != vaspace)
            continue;
        /* The last entry moves into slot i, its by-shim bit with it. */
        unsigned last = --tpp->n_tpp_vaspaces;
        uint32_t last_bit = (tpp->tpp_vaspaces_by_shim >> last) & 1u;
        tpp->tpp_vaspaces_by_shim &= ~(1u << last);
        if (i != last) {
            tpp->tpp_vaspaces[i] = tpp->tpp_vaspaces[last];
            tpp->tpp_vaspace_tokens[i] = tpp->tpp_vaspace_tokens[last];
            tpp->tpp_vaspaces_by_shim = (tpp->tpp_vaspaces_by_shim & ~(1u << i)) | (last_bit << i);
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

bool gdu_tpp_vaspace_by_shim(const gdu_obj *tpp, unsigned i)
{
    return (tpp->tpp_vaspaces_by_shim >> i) & 1u;
}

void gdu_tpp_unregister_own_vaspaces(gdu_shim *s, gdu_obj *tpp)
{
    for (unsigned i = tpp->n_tpp_vaspaces; i-- > 0;) {
        if (!gdu_tpp_vaspace_by_shim(tpp, i))
            continue;
        uint32_t v = tpp->tpp_vaspaces[i];
        gdu_nv503c_unregister_va_space u = {.hVASpace = v};
        if (gdu_tpp_own_control(s, tpp, GDU_NV503C_CTRL_CMD_UNREGISTER_VA_SPACE, &u, sizeof u,
                                true) == GDU_NV_OK)
            gdu_tpp_remove_vaspace(tpp, v);
    }
}

/* Frees the shim's own NV503C and makes a new one, registered with the VA
 * space chosen now and the device's mappings. RM invalidates an NV503C when
 * any VA space ever registered with it is freed, unregistered or not
 * (third_party_p2p.c:394 against 403-421, rs_server.c:1336-1372): an object
 * moved to another VA space would be lost when the process frees the first.
 * Returns the new object, the old one where it could not be freed, or NULL. */
static gdu_obj *renew(gdu_shim *s, gdu_obj *sub, gdu_obj *tpp)
{
    uint32_t old = tpp->handle;
    uint32_t st = gdu_tpp_own_free(s, sub->client, sub->handle, old);
    if (st != GDU_NV_OK) {
        gdu_tpp_failure(s, sub, st,
                        "freeing the shim's ThirdPartyP2P to move it to UVM's VA space");
        return tpp;
    }
    gdu_tpp_forget(s, tpp);
    gdu_shim_obj_remove(s, tpp);
    bool made = gdu_tpp_create(s, sub);
    gdu_shim_log(s, GDU_LOG_INFO,
                 "GPU %u: ThirdPartyP2P 0x%x made anew as 0x%x for UVM's VA space (RM would "
                 "invalidate an object with any VA space once registered with it)",
                 gdu_tpp_gpu_number(s, sub), old, made ? sub->tpp : 0);
    return made ? gdu_shim_obj(s, sub->client, sub->tpp) : NULL;
}

/* Gives the NV503C exactly one VA space. RM's lookup validates a buffer once
 * per registered VA space and rejects the object when a second one
 * validates too (p2p.c:886-887, src/pinmodel): so one, never all. */
gdu_obj *gdu_tpp_ensure_vaspace(gdu_shim *s, gdu_obj *sub, gdu_obj *tpp)
{
    gdu_obj *dev = gdu_shim_obj(s, sub->client, sub->parent);
    const char *source = NULL;
    gdu_obj *v = dev != NULL ? chosen_vaspace(s, dev, &source) : NULL;
    if (v == NULL)
        return tpp;
    gdu_gpu_stats *g = gdu_shim_gpu(s, sub);
    if (in_list(tpp->tpp_vaspaces, tpp->n_tpp_vaspaces, v->handle)) {
        g->vaspace = v->handle;
        if (g->vaspace_source == NULL || strcmp(source, "uvm") == 0)
            g->vaspace_source = source;
        return tpp;
    }
    if (tpp->n_tpp_vaspaces > 0) {
        /* A registration of libcuda's stays as it is; the shim's own moves
         * to the VA space UVM maps into once that one is known: on an object
         * of its own by making it anew, on libcuda's handle (test mode) by
         * unregistering. */
        if (strcmp(source, "uvm") != 0)
            return tpp;
        if (tpp->tpp_owned && !tpp->tpp_adopted)
            return renew(s, sub, tpp);
        gdu_tpp_unregister_own_vaspaces(s, tpp);
        if (tpp->n_tpp_vaspaces > 0)
            return tpp;
    }
    if (in_list(tpp->tpp_vaspaces_failed, tpp->n_tpp_vaspaces_failed, v->handle))
        return tpp;
    gdu_nv503c_register_va_space p = {.hVASpace = v->handle};
    uint32_t st =
        gdu_tpp_own_control(s, tpp, GDU_NV503C_CTRL_CMD_REGISTER_VA_SPACE, &p, sizeof p, true);
    if (st == GDU_NV_OK) {
        add_vaspace(tpp, v->handle, true, p.vaSpaceToken);
        g->va_spaces_registered++;
        g->vaspace = v->handle;
        g->vaspace_source = source;
        gdu_shim_log(
            s, GDU_LOG_DEBUG, "GPU %u: VA space 0x%x (%s) registered with ThirdPartyP2P 0x%x",
            gdu_tpp_gpu_number(s, sub), v->handle,
            strcmp(source, "uvm") == 0 ? "the one registered with UVM" : "the device's first",
            tpp->handle);
    } else {
        if (tpp->n_tpp_vaspaces_failed < GDU_SHIM_MAX_VASPACES)
            tpp->tpp_vaspaces_failed[tpp->n_tpp_vaspaces_failed++] = v->handle;
        char what[96];
        snprintf(what, sizeof what, "REGISTER_VA_SPACE of VA space 0x%x", v->handle);
        gdu_tpp_failure(s, sub, st, what);
    }
    return tpp;
}

struct overlap_scan {
    gdu_shim *s;
    const gdu_obj *tpp; /* NULL: registrations on any of the shim's objects */
    uint64_t address, size;
    bool by_shim_only;
    gdu_obj *found;
};

static bool overlaps(const gdu_obj *o, uint64_t address, uint64_t size)
{
    return o->reg_tpp != 0 && o->reg_address < address + size &&
           address < o->reg_address + o->reg_size;
}

static void overlap_visit(gdu_map_node *n, void *arg)
{
    struct overlap_scan *sc = arg;
    gdu_obj *o = (gdu_obj *)n;
    if (sc->found == NULL && o->client == sc->tpp->client && o->reg_tpp == sc->tpp->handle &&
        (!sc->by_shim_only || o->reg_by_shim) && overlaps(o, sc->address, sc->size))
        sc->found = o;
}

gdu_obj *gdu_tpp_registration_overlapping(gdu_shim *s, const gdu_obj *tpp, uint64_t address,
                                          uint64_t size, bool by_shim_only)
{
    struct overlap_scan sc = {s, tpp, address, size, by_shim_only, NULL};
    gdu_map_each(&s->objects, overlap_visit, &sc);
    return sc.found;
}

static bool same_registration(const gdu_obj *mem, const gdu_obj *tpp, uint64_t address,
                              uint64_t size, uint64_t offset)
{
    return mem->reg_tpp == tpp->handle && mem->reg_address == address && mem->reg_size == size &&
           mem->reg_offset == offset;
}

static void record_registration(gdu_obj *mem, const gdu_obj *tpp, bool by_shim, bool counted,
                                uint64_t address, uint64_t size, uint64_t offset)
{
    mem->reg_tpp = tpp->handle;
    mem->reg_by_shim = by_shim;
    mem->reg_counted = counted;
    mem->reg_address = address;
    mem->reg_size = size;
    mem->reg_offset = offset;
}

static void register_memory(gdu_shim *s, gdu_obj *sub, gdu_obj *tpp, gdu_obj *mem,
                            const gdu_mapping *m)
{
    gdu_gpu_stats *g = gdu_shim_gpu(s, sub);
    uint64_t address, size, offset;
    if (!gdu_vidmem_aligned_part(m->base, m->length, m->offset, &address, &size, &offset)) {
        g->skipped++;
        g->skipped_bytes += m->length;
        gdu_shim_log(s, GDU_LOG_DEBUG,
                     "GPU %u: mapping 0x%llx+0x%llx has no 64 KiB aligned part; not registered",
                     gdu_tpp_gpu_number(s, sub), (unsigned long long)m->base,
                     (unsigned long long)m->length);
        return;
    }
    if (mem->reg_tpp != 0) {
        if (same_registration(mem, tpp, address, size, offset)) {
            g->already_registered++; /* by libcuda (test mode), before its mapping */
            return;
        }
        /* RM keys registrations by hMemory (third_party_p2p.c:499-503): a
         * memory object mapped at a second address cannot be registered there. */
        g->second_mappings++;
        g->skipped_bytes += m->length;
        gdu_shim_log(s, GDU_LOG_INFO,
                     "GPU %u: memory 0x%x is registered at 0x%llx already; its mapping at 0x%llx "
                     "is not registered "
                     "(RM keeps one registration per memory object)",
                     gdu_tpp_gpu_number(s, sub), mem->handle, (unsigned long long)mem->reg_address,
                     (unsigned long long)m->base);
        return;
    }
    g->skipped_bytes += m->length - size;
    for (int attempt = 0; attempt < 2; attempt++) {
        gdu_nv503c_register_vidmem p = {
            .hMemory = mem->handle, .address = address, .size = size, .offset = offset};
        uint32_t st =
            gdu_tpp_own_control(s, tpp, GDU_NV503C_CTRL_CMD_REGISTER_VIDMEM, &p, sizeof p, true);
        if (st == GDU_NV_OK) {
            record_registration(mem, tpp, true, true, address, size, offset);
            g->registered++;
            gdu_shim_log(s, GDU_LOG_DEBUG, "GPU %u: memory 0x%x at 0x%llx (%llu bytes) registered",
                         gdu_tpp_gpu_number(s, sub), mem->handle, (unsigned long long)address,
                         (unsigned long long)size);
            return;
        }
        if (st == GDU_NV_ERR_NOT_SUPPORTED) {
            /* RM registers only video memory (ADDR_FBMEM): this one is not. */
            g->skipped++;
            g->skipped_bytes += size;
            gdu_shim_log(s, GDU_LOG_DEBUG, "GPU %u: memory 0x%x is not registrable: %s",
                         gdu_tpp_gpu_number(s, sub), mem->handle, gdu_nv_status_name(st));
            return;
        }
        if (st == GDU_NV_ERR_INSERT_DUPLICATE_NAME && attempt == 0) {
            /* The memory is not registered (the shim would know), so the range
             * overlaps a registration RM still holds (btreeInsert,
             * third_party_p2p.c:519): one of the shim's whose VA was unmapped
             * without being noticed goes; anything else is not the shim's to take. */
            gdu_obj *old = gdu_tpp_registration_overlapping(s, tpp, address, size, true);
            if (old != NULL) {
                gdu_shim_log(
                    s, GDU_LOG_INFO,
                    "GPU %u: memory 0x%x's stale registration at 0x%llx is in the way; taken back",
                    gdu_tpp_gpu_number(s, sub), old->handle, (unsigned long long)old->reg_address);
                gdu_tpp_unregister(s, old);
                g->stale_unregistered++;
                if (old->reg_tpp == 0)
                    continue;
            }
        }
        char what[200];
        snprintf(what, sizeof what, "REGISTER_VIDMEM of memory 0x%x at 0x%llx (%llu bytes)%s",
                 mem->handle, (unsigned long long)address, (unsigned long long)size,
                 st == GDU_NV_ERR_INSERT_DUPLICATE_NAME
                     ? " overlaps a registration the shim did not make; left unregistered"
                     : "");
        gdu_tpp_failure(s, sub, st, what);
        return;
    }
}

struct device_mappings {
    gdu_shim *s;
    gdu_obj *sub, *tpp;
};

static void register_mapping_visit(gdu_map_node *n, void *arg)
{
    struct device_mappings *dm = arg;
    gdu_mapping *m = (gdu_mapping *)n;
    if (m->client != dm->sub->client)
        return;
    gdu_obj *mem = gdu_shim_obj(dm->s, m->client, m->memory);
    if (mem != NULL && mem->cls == GDU_NV01_MEMORY_LOCAL_USER && mem->reg_tpp == 0 &&
        gdu_shim_subdevice_of(dm->s, mem) == dm->sub)
        register_memory(dm->s, dm->sub, dm->tpp, mem, m);
}

/* Makes the shim's NV503C under sub; registers the device's VA spaces and the
 * device memory mapped so far. */
bool gdu_tpp_create(gdu_shim *s, gdu_obj *sub)
{
    gdu_nv503c_alloc_params ap = {.flags = GDU_NV503C_ALLOC_FLAGS_TYPE_BAR1};
    uint32_t h = 0; /* RM picks a handle from the client's own range: no clash with libcuda's */
    uint32_t st = gdu_tpp_own_alloc(s, sub->client, sub->handle, &h, GDU_NV50_THIRD_PARTY_P2P, &ap,
                                    sizeof ap);
    gdu_obj *tpp = st == GDU_NV_OK
                       ? gdu_shim_obj_add(s, sub->client, h, sub->handle, GDU_NV50_THIRD_PARTY_P2P)
                       : NULL;
    if (tpp == NULL) {
        char what[160];
        snprintf(what, sizeof what,
                 "creating ThirdPartyP2P (class 0x503c, BAR1) under subdevice 0x%x", sub->handle);
        if (st == GDU_NV_OK)
            gdu_tpp_own_free(s, sub->client, sub->handle, h);
        gdu_tpp_own_failed(s, sub, st, what);
        return false;
    }
    gdu_tpp_own_made(s, sub, tpp);
    gdu_shim_log(s, GDU_LOG_INFO,
                 "GPU %u: created ThirdPartyP2P 0x%x (BAR1) under subdevice 0x%x of client 0x%x",
                 gdu_tpp_gpu_number(s, sub), h, sub->handle, sub->client);
    gdu_tpp_ensure_vaspace(s, sub, tpp);
    struct device_mappings dm = {s, sub, tpp};
    gdu_map_each(&s->mappings, register_mapping_visit, &dm);
    return true;
}

/* ---- events ---- */

void gdu_tpp_on_mapping(gdu_shim *s, gdu_obj *sub, gdu_obj *mem, const gdu_mapping *m)
{
    if (s->refused)
        return;
    if (sub->mode == GDU_TPP_NONE) {
        gdu_tpp_create(s, sub); /* registers this mapping too */
        return;
    }
    if (sub->mode != GDU_TPP_UNLOCKED)
        return; /* native: libcuda registers; failed: said so once */
    gdu_obj *tpp = gdu_shim_obj(s, sub->client, sub->tpp);
    gdu_obj *now = tpp != NULL ? gdu_tpp_ensure_vaspace(s, sub, tpp) : NULL;
    if (now != NULL && now == tpp)
        register_memory(s, sub, tpp, mem, m); /* a new object has every mapping already */
}

void gdu_tpp_on_uvm_vaspace(gdu_shim *s, gdu_obj *vaspace)
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
    gdu_obj *tpp = sub != NULL && sub->tpp_owned ? gdu_shim_obj(s, sub->client, sub->tpp) : NULL;
    if (tpp != NULL && !s->refused)
        gdu_tpp_ensure_vaspace(s, sub, tpp);
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
        gdu_tpp_unregister(sc->s, o);
}

/* RM drops a registration only when its memory is freed
 * (CliUnregisterMemoryFromThirdPartyP2P, video_mem.c:1119), not when its VA
 * is unmapped; a registration left at an unmapped VA would be found for
 * whatever is mapped there next. */
void gdu_tpp_unmapping(gdu_shim *s, uint64_t base, uint64_t length)
{
    if (length == 0)
        return;
    struct unmap_scan sc = {s, base, length};
    gdu_map_each(&s->objects, unmap_visit, &sc);
}

void gdu_tpp_on_vaspace(gdu_shim *s, gdu_obj *sub, uint32_t vaspace)
{
    gdu_obj *tpp = gdu_shim_obj(s, sub->client, sub->tpp);
    if (tpp != NULL && sub->tpp_owned)
        gdu_tpp_ensure_vaspace(s, sub, tpp);
}

void gdu_tpp_on_native(gdu_shim *s, gdu_obj *sub, gdu_obj *tpp)
{
    if (s->testmode != NULL && !s->refused) {
        s->testmode->on_native(s, sub, tpp);
        return;
    }
    sub->tpp = tpp->handle;
    sub->tpp_owned = false;
    gdu_shim_gpu(s, sub)->native_empty[0] = '\0'; /* a new object of libcuda's */
    gdu_tpp_set_mode(s, sub, GDU_TPP_NATIVE, NULL);
    gdu_shim_log(s, GDU_LOG_INFO,
                 "GPU %u: libcuda has its own ThirdPartyP2P 0x%x: native, nothing to do",
                 gdu_tpp_gpu_number(s, sub), tpp->handle);
}

void gdu_tpp_before_native(gdu_shim *s, gdu_obj *sub)
{
    gdu_obj *tpp = gdu_shim_obj(s, sub->client, sub->tpp);
    uint32_t st = gdu_tpp_own_free(s, sub->client, sub->handle, sub->tpp);
    if (st != GDU_NV_OK) {
        gdu_tpp_failure(s, sub, st,
                        "freeing the shim's ThirdPartyP2P so that libcuda can make its own");
        return;
    }
    gdu_shim_log(s, GDU_LOG_INFO,
                 "GPU %u: libcuda makes its own ThirdPartyP2P; the shim's 0x%x is freed for it",
                 gdu_tpp_gpu_number(s, sub), sub->tpp);
    if (tpp != NULL) {
        gdu_tpp_forget(s, tpp);
        gdu_shim_obj_remove(s, tpp);
    }
}

void gdu_tpp_registration_ended(gdu_shim *s, gdu_obj *mem)
{
    gdu_obj *tpp = gdu_shim_obj(s, mem->client, mem->reg_tpp);
    gdu_obj *sub = tpp != NULL ? gdu_shim_obj(s, tpp->client, tpp->parent) : NULL;
    if (mem->reg_counted && sub != NULL)
        gdu_shim_gpu(s, sub)->unregistered++;
    mem->reg_tpp = 0;
    mem->reg_by_shim = false;
    mem->reg_counted = false;
}

void gdu_tpp_unregister(gdu_shim *s, gdu_obj *mem)
{
    gdu_obj *tpp = gdu_shim_obj(s, mem->client, mem->reg_tpp);
    gdu_obj *sub = tpp != NULL ? gdu_shim_obj(s, tpp->client, tpp->parent) : NULL;
    if (!mem->reg_by_shim || sub == NULL)
        return;
    gdu_nv503c_unregister_vidmem p = {.hMemory = mem->handle};
    uint32_t st =
        gdu_tpp_own_control(s, tpp, GDU_NV503C_CTRL_CMD_UNREGISTER_VIDMEM, &p, sizeof p, true);
    if (st == GDU_NV_OK || st == GDU_NV_ERR_OBJECT_NOT_FOUND) {
        gdu_tpp_registration_ended(s, mem);
        gdu_shim_log(s, GDU_LOG_DEBUG, "GPU %u: memory 0x%x unregistered: %s",
                     gdu_tpp_gpu_number(s, sub), mem->handle, gdu_nv_status_name(st));
    } else {
        char what[96];
        snprintf(what, sizeof what, "UNREGISTER_VIDMEM of memory 0x%x", mem->handle);
        gdu_tpp_failure(s, sub, st, what); /* RM still drops it when the memory is freed */
    }
}

void gdu_tpp_after_control(gdu_shim *s, gdu_obj *tpp, uint32_t cmd, const void *params, size_t size)
{
    uint32_t h;
    if (size < sizeof h)
        return;
    memcpy(&h, params, sizeof h);
    switch (cmd) {
    case GDU_NV503C_CTRL_CMD_REGISTER_VA_SPACE: {
        gdu_nv503c_register_va_space p = {0};
        memcpy(&p, params, size < sizeof p ? size : sizeof p);
        add_vaspace(tpp, h, false, p.vaSpaceToken);
        gdu_obj *sub = gdu_shim_obj(s, tpp->client, tpp->parent);
        if (sub != NULL) {
            gdu_gpu_stats *g = gdu_shim_gpu(s, sub);
            g->vaspace = h;
            g->vaspace_source = "libcuda";
        }
        break;
    }
    case GDU_NV503C_CTRL_CMD_UNREGISTER_VA_SPACE:
        gdu_tpp_remove_vaspace(tpp, h);
        break;
    case GDU_NV503C_CTRL_CMD_REGISTER_VIDMEM: {
        gdu_obj *mem = gdu_shim_obj(s, tpp->client, h);
        if (mem != NULL && size >= sizeof(gdu_nv503c_register_vidmem)) {
            gdu_nv503c_register_vidmem p;
            memcpy(&p, params, sizeof p);
            gdu_obj *sub = gdu_shim_obj(s, tpp->client, tpp->parent);
            mem->reg_tpp = tpp->handle;
            mem->reg_by_shim = false;
            /* On the shim's own object (test mode) libcuda's registration counts too. */
            mem->reg_counted = tpp->tpp_owned && sub != NULL;
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
        gdu_obj *mem = gdu_shim_obj(s, tpp->client, h);
        if (mem != NULL && mem->reg_tpp == tpp->handle)
            gdu_tpp_registration_ended(s, mem);
        break;
    }
    default:
        break;
    }
}

struct forget_scan {
    gdu_shim *s;
    gdu_obj *tpp;
};

static void forget_visit(gdu_map_node *n, void *arg)
{
    struct forget_scan *sc = arg;
    gdu_obj *o = (gdu_obj *)n;
    if (o->client == sc->tpp->client && o->reg_tpp == sc->tpp->handle)
        gdu_tpp_registration_ended(sc->s, o); /* RM dropped it with the object */
}

/* An invalidated NV503C: RM ran its destructor (its VA spaces and
 * registrations are gone, third_party_p2p.c:186-231) but kept its handle in
 * the client and under the subdevice (rs_server.c:1336-1372 frees it with
 * bInvalidateOnly; rs_client.c:855-871 then keeps the handle). Its controls
 * answer NV_ERR_RESOURCE_LOST (rs_server.c:1556-1560), and while the handle
 * lives a new NV503C under the subdevice answers NV_ERR_STATE_IN_USE (one per
 * parent: alloc_free.c:820-827); freeing it only removes the handle
 * (rs_client.c:811-812), NV_OK (all 580.142; measured on the H200,
 * tests/fixtures/rm-lifetime-h200-2026-12-02.txt). */
void gdu_tpp_invalidated(gdu_shim *s, gdu_obj *tpp)
{
    gdu_obj *sub = gdu_shim_obj(s, tpp->client, tpp->parent);
    if (sub == NULL)
        return;
    unsigned gpu = gdu_tpp_gpu_number(s, sub);
    if (tpp->tpp_owned && !tpp->tpp_adopted) {
        /* The handle is the shim's: freed here, so that the next mapping can
         * make a new object (as renew does). */
        uint32_t st = gdu_tpp_own_free(s, sub->client, sub->handle, tpp->handle);
        if (st != GDU_NV_OK) {
            char what[160];
            snprintf(what, sizeof what,
                     "freeing the shim's ThirdPartyP2P 0x%x, invalidated by RM with VA space 0x%x",
                     tpp->handle, tpp->tpp_invalidated_with);
            gdu_tpp_own_failed(s, sub, st, what); /* no new object while the handle lives */
            return;
        }
        gdu_shim_log(s, GDU_LOG_INFO,
                     "GPU %u: RM invalidated ThirdPartyP2P 0x%x (the shim's) with VA space 0x%x, "
                     "once registered with it; its dead handle is freed, a new object is made at "
                     "the next mapping",
                     gpu, tpp->handle, tpp->tpp_invalidated_with);
        return;
    }
    gdu_shim_log(s, GDU_LOG_INFO,
                 "GPU %u: RM invalidated ThirdPartyP2P 0x%x (%s) with VA space 0x%x, once "
                 "registered with it; the dead handle is libcuda's and stays until libcuda frees "
                 "it: no new ThirdPartyP2P can be made on this GPU until then",
                 gpu, tpp->handle,
                 tpp->tpp_adopted ? "the shim's, under libcuda's handle: test mode" : "libcuda's",
                 tpp->tpp_invalidated_with);
    gdu_gpu_stats *g = gdu_shim_gpu(s, sub);
    if (!tpp->tpp_owned && sub->mode == GDU_TPP_NATIVE)
        snprintf(g->native_empty, sizeof g->native_empty,
                 "libcuda's ThirdPartyP2P 0x%x was invalidated, not freed, with VA space 0x%x, "
                 "once registered with it (rs_server.c:1336-1372, rs_client.c:811-871): "
                 "nvidia-fs finds no buffer on this GPU, and no new ThirdPartyP2P can be made on "
                 "it until libcuda frees the dead handle",
                 tpp->handle, tpp->tpp_invalidated_with);
}

void gdu_tpp_forget(gdu_shim *s, gdu_obj *tpp)
{
    gdu_obj *sub = gdu_shim_obj(s, tpp->client, tpp->parent);
    struct forget_scan sc = {s, tpp};
    gdu_map_each(&s->objects, forget_visit, &sc);
    if (tpp->tpp_owned) {
        tpp->tpp_owned = false;
        __atomic_sub_fetch(&s->owned_tpp, 1, __ATOMIC_RELAXED);
    }
    if (tpp->tpp_answered) {
        tpp->tpp_answered = false;
        __atomic_sub_fetch(&s->answered_tpp, 1, __ATOMIC_RELAXED);
    }
    if (sub != NULL && sub->tpp == tpp->handle) {
        sub->tpp = 0;
        sub->tpp_owned = false;
        if (sub->mode == GDU_TPP_UNLOCKED)
            sub->mode = GDU_TPP_NONE; /* made again at the next mapping */
    }
}
