/* The shim's tracking as the kernel's lookup sees it (src/pinmodel): every
 * ThirdPartyP2P object of the process that RM holds, with the VA spaces and
 * the video memory registered with it; and the buffers the program registers
 * with cuFile, each with the verdict of that lookup when it was registered
 * (nvidia-fs pins a buffer inside cuFileBufRegister). */
#include "driverabi/nv_classes.h"
#include "pinmodel/pin_model.h"
#include "shim/shim_state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    gdu_pin_object *objects;
    gdu_pin_vidmem *vidmem;
    gdu_pin_gpu gpus[GDU_SHIM_GPU_SLOTS];
    size_t n_objects, n_vidmem, cap_objects, cap_vidmem;
    bool failed;
} pin_view;

struct view_scan {
    gdu_shim *s;
    pin_view *v;
    const gdu_obj *tpp; /* second pass: the object whose registrations are collected */
};

/* An NV503C that RM holds: not one freed by the shim whose calls it answers. */
static bool held_by_rm(const gdu_obj *o)
{
    return o->cls == GDU_NV50_THIRD_PARTY_P2P && !o->tpp_answered;
}

static void count_visit(gdu_map_node *n, void *arg)
{
    struct view_scan *sc = arg;
    const gdu_obj *o = (const gdu_obj *)n;
    if (held_by_rm(o))
        sc->v->cap_objects++;
    else if (o->reg_tpp != 0)
        sc->v->cap_vidmem++;
}

static void vidmem_visit(gdu_map_node *n, void *arg)
{
    struct view_scan *sc = arg;
    const gdu_obj *o = (const gdu_obj *)n;
    pin_view *v = sc->v;
    if (o->reg_tpp == sc->tpp->handle && o->client == sc->tpp->client &&
        v->n_vidmem < v->cap_vidmem)
        v->vidmem[v->n_vidmem++] = (gdu_pin_vidmem){.memory = o->handle,
                                                    .address = o->reg_address,
                                                    .size = o->reg_size,
                                                    .offset = o->reg_offset};
}

static unsigned slot_of(gdu_shim *s, const gdu_obj *sub)
{
    return (unsigned)(gdu_shim_gpu(s, sub) - s->gpus);
}

static void object_visit(gdu_map_node *n, void *arg)
{
    struct view_scan *sc = arg;
    const gdu_obj *o = (const gdu_obj *)n;
    pin_view *v = sc->v;
    if (!held_by_rm(o) || v->n_objects >= v->cap_objects)
        return;
    const gdu_obj *sub = gdu_shim_obj(sc->s, o->client, o->parent);
    size_t first = v->n_vidmem;
    struct view_scan inner = {sc->s, v, o};
    gdu_map_each(&sc->s->objects, vidmem_visit, &inner);
    v->objects[v->n_objects++] = (gdu_pin_object){
        .gpu = sub != NULL ? slot_of(sc->s, sub) : GDU_SHIM_GPU_SLOTS - 1,
        .pid = sc->s->pid,
        .n_vaspaces = o->n_tpp_vaspaces,
        .vidmem = v->vidmem + first,
        .n_vidmem = v->n_vidmem - first,
    };
}

static int view_build(gdu_shim *s, pin_view *v, gdu_pin_state *st)
{
    memset(v, 0, sizeof *v);
    struct view_scan sc = {s, v, NULL};
    gdu_map_each(&s->objects, count_visit, &sc);
    v->objects = calloc(v->cap_objects + 1, sizeof *v->objects);
    v->vidmem = calloc(v->cap_vidmem + 1, sizeof *v->vidmem);
    if (v->objects == NULL || v->vidmem == NULL) {
        free(v->objects);
        free(v->vidmem);
        return -1;
    }
    gdu_map_each(&s->objects, object_visit, &sc);
    /* RM's own BAR1 size where it said it (its check, p2p.c:1019-1030, counts
     * that one), else the PCI BAR's. Not RM's unused figure: the lookup runs
     * after cuFileBufRegister, whose pin that figure already holds. */
    for (unsigned i = 0; i < GDU_SHIM_GPU_SLOTS; i++) {
        const gdu_gpu_stats *g = &s->gpus[i];
        v->gpus[i] =
            (gdu_pin_gpu){.gpu = i,
                          .bar1_bytes = g->rm_bar1_total != 0 ? g->rm_bar1_total : g->bar1_bytes,
                          .mapped_bytes = g->cufile_pinned};
    }
    *st = (gdu_pin_state){.pid = s->pid,
                          .objects = v->objects,
                          .n_objects = v->n_objects,
                          .gpus = v->gpus,
                          .n_gpus = GDU_SHIM_GPU_SLOTS};
    return 0;
}

static void view_free(pin_view *v)
{
    free(v->objects);
    free(v->vidmem);
}

static void ask_rm_bar1(gdu_shim *s, gdu_gpu_stats *g)
{
    g->rm_bar1_total = g->rm_bar1_available = 0;
    g->rm_bar1_why[0] = '\0';
    if (s->ops.rm_bar1 == NULL)
        snprintf(g->rm_bar1_why, sizeof g->rm_bar1_why, "not asked");
    else if (s->ops.rm_bar1(s->ops.ctx, g->pci, &g->rm_bar1_total, &g->rm_bar1_available,
                            g->rm_bar1_why, sizeof g->rm_bar1_why) != 0)
        g->rm_bar1_total = g->rm_bar1_available = 0;
}

void gdu_shim_fill_bar1(gdu_shim *s, bool refresh_rm)
{
    for (unsigned i = 0; i < GDU_SHIM_GPU_SLOTS; i++) {
        gdu_gpu_stats *g = &s->gpus[i];
        if (!g->seen || g->pci[0] == '\0')
            continue;
        if (!g->bar1_asked || refresh_rm)
            ask_rm_bar1(s, g);
        if (!g->bar1_asked && s->ops.bar1_bytes != NULL)
            g->bar1_bytes = s->ops.bar1_bytes(s->ops.ctx, g->pci);
        g->bar1_asked = true;
    }
}

/* Runs the lookup; -1 when out of memory. */
static int lookup(gdu_shim *s, uint64_t ptr, uint64_t size, gdu_pin_verdict *out)
{
    gdu_shim_fill_bar1(s, false);
    pin_view v;
    gdu_pin_state st;
    if (view_build(s, &v, &st) != 0)
        return -1;
    gdu_pin_lookup(&st, ptr, size, out);
    view_free(&v);
    return 0;
}

int gdu_shim_pin_lookup(gdu_shim *s, uint64_t ptr, uint64_t size, int *err, char *why,
                        size_t why_len)
{
    gdu_pin_verdict v;
    pthread_mutex_lock(&s->lock);
    int r = lookup(s, ptr, size, &v);
    pthread_mutex_unlock(&s->lock);
    if (r != 0) {
        *err = 0;
        if (why != NULL)
            snprintf(why, why_len, "out of memory");
        return -1;
    }
    *err = v.err;
    if (why != NULL)
        gdu_pin_explain(&v, why, why_len);
    return (int)v.rule;
}

/* The GPU slot of the mapping holding va, or the unknown slot. */
static unsigned slot_of_address(gdu_shim *s, uint64_t va)
{
    const gdu_mapping *m = gdu_shim_mapping_at(s, va);
    const gdu_obj *mem = m != NULL ? gdu_shim_obj(s, m->client, m->memory) : NULL;
    const gdu_obj *sub = mem != NULL ? gdu_shim_subdevice_of(s, mem) : NULL;
    return sub != NULL ? slot_of(s, sub) : GDU_SHIM_GPU_SLOTS - 1;
}

struct native_scan {
    gdu_shim *s;
    unsigned slot, live;
};

static void native_reg_visit(gdu_map_node *n, void *arg)
{
    struct native_scan *sc = arg;
    const gdu_obj *o = (const gdu_obj *)n;
    const gdu_obj *tpp = o->reg_tpp != 0 ? gdu_shim_obj(sc->s, o->client, o->reg_tpp) : NULL;
    const gdu_obj *sub =
        tpp != NULL && !tpp->tpp_owned ? gdu_shim_obj(sc->s, tpp->client, tpp->parent) : NULL;
    if (sub != NULL && slot_of(sc->s, sub) == sc->slot)
        sc->live++;
}

/* A native GPU: libcuda's own NV503C must hold the program's buffers. One
 * that holds none when the program gives cuFile a buffer is reported once,
 * with the likely reason. */
static void check_native(gdu_shim *s, unsigned slot, uint64_t ptr)
{
    gdu_gpu_stats *g = &s->gpus[slot];
    if (slot >= GDU_SHIM_GPU_SLOTS - 1 || g->mode != GDU_TPP_NATIVE || g->native_empty[0])
        return;
    struct native_scan sc = {s, slot, 0};
    gdu_map_each(&s->objects, native_reg_visit, &sc);
    if (sc.live == 0)
        snprintf(g->native_empty, sizeof g->native_empty,
                 "libcuda's ThirdPartyP2P held no registration when cuFile buffer 0x%llx was "
                 "registered: libcuda registers cuMemAlloc memory, VMM memory only when made with "
                 "gpuDirectRDMACapable",
                 (unsigned long long)ptr);
}

/* Why a buffer no registration holds cannot be pinned, where the memory's
 * kind tells more than the model can. */
static void explain_unregistered(gdu_cufile_buf *b, const char *memory_kind, bool mps, bool mapped)
{
    if (memory_kind != NULL && strcmp(memory_kind, "host") == 0)
        snprintf(
            b->why, sizeof b->why,
            "host memory: nvidia-fs pins only GPU memory through BAR1 (its lookup answers -EINVAL, "
            "third_party_p2p.c:618); libcufile moves host buffers itself; register a cuMemAlloc "
            "buffer for "
            "GPUDirect");
    else if (memory_kind != NULL && strcmp(memory_kind, "managed") == 0)
        snprintf(b->why, sizeof b->why,
                 "managed memory (cuMemAllocManaged): it has no ThirdPartyP2P registration, so "
                 "nvidia-fs cannot "
                 "pin it (-EINVAL, third_party_p2p.c:618); use cuMemAlloc/cudaMalloc memory");
    else if (mps && !mapped)
        snprintf(b->why, sizeof b->why,
                 "MPS: the GPU memory belongs to the MPS server process, and the kernel looks the "
                 "buffer up by "
                 "the calling process (third_party_p2p.c:300-342): GPUDirect Storage cannot pin "
                 "it; run without MPS");
}

void gdu_shim_cufile_registered(gdu_shim *s, uint64_t ptr, uint64_t size, int flags, int status,
                                const char *memory_kind, bool mps)
{
    pthread_mutex_lock(&s->lock);
    gdu_pin_verdict v;
    if (lookup(s, ptr, size, &v) != 0) {
        pthread_mutex_unlock(&s->lock);
        return;
    }
    /* A free entry, else the oldest deregistered one: the report keeps the
     * most recent buffers, and every live one for the BAR1 count. */
    gdu_cufile_buf *b = NULL;
    for (unsigned i = 0; i < GDU_SHIM_CUFILE_BUFS; i++) {
        gdu_cufile_buf *c = &s->cufile[i];
        if (c->seq == 0) {
            b = c;
            break;
        }
        if (!c->live && (b == NULL || c->seq < b->seq))
            b = c;
    }
    s->cufile_registered++;
    if (v.rule == GDU_PIN_FOUND)
        s->cufile_found++;
    if (b == NULL) {
        s->cufile_dropped++; /* every entry live: counted, not listed */
        pthread_mutex_unlock(&s->lock);
        return;
    }
    if (b->seq != 0)
        s->cufile_dropped++; /* an older, deregistered entry makes room */
    *b = (gdu_cufile_buf){.seq = s->cufile_registered,
                          .ptr = ptr,
                          .size = size,
                          .flags = flags,
                          .status = status,
                          .live = status == 0,
                          .rule = (int)v.rule,
                          .err = v.err};
    b->slot = v.object != SIZE_MAX ? v.gpu : slot_of_address(s, ptr);
    check_native(s, b->slot, ptr);
    if (memory_kind != NULL)
        snprintf(b->memory_kind, sizeof b->memory_kind, "%s", memory_kind);
    gdu_pin_explain(&v, b->why, sizeof b->why);
    if (v.rule == GDU_PIN_NOT_REGISTERED)
        explain_unregistered(b, memory_kind, mps, b->slot != GDU_SHIM_GPU_SLOTS - 1);
    if (v.rule == GDU_PIN_FOUND && status == 0) {
        b->pinned = v.length; /* counts against BAR1 until deregistered */
        s->gpus[b->slot].cufile_pinned += v.length;
    }
    gdu_shim_log(s, v.rule == GDU_PIN_FOUND ? GDU_LOG_DEBUG : GDU_LOG_INFO,
                 "cuFile buffer 0x%llx+%llu: %s", (unsigned long long)ptr, (unsigned long long)size,
                 b->why);
    pthread_mutex_unlock(&s->lock);
}

void gdu_shim_cufile_deregistered(gdu_shim *s, uint64_t ptr)
{
    pthread_mutex_lock(&s->lock);
    for (unsigned i = 0; i < GDU_SHIM_CUFILE_BUFS; i++) {
        gdu_cufile_buf *b = &s->cufile[i];
        if (b->live && b->ptr == ptr) {
            b->live = false;
            s->gpus[b->slot].cufile_pinned -= b->pinned;
            b->pinned = 0;
            break;
        }
    }
    pthread_mutex_unlock(&s->lock);
}
