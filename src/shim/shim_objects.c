/* The shim's record of a process's RM objects (key: client << 32 | handle),
 * what each is under, and the per-GPU statistics; and its log. Shared by the
 * ioctl hooks (shim_core.c), the NV503C lifecycle (shim_tpp.c) and the test
 * modes (shim_testmode.c). All of it runs under gdu_shim.lock. */
#include "driverabi/nv_classes.h"
#include "shim/shim_pool.h"
#include "shim/shim_state.h"

#include <stdarg.h>
#include <stdio.h>

/* How far up the object tree we look (RM nests a handful of levels). */
#define GDU_MAX_DEPTH 16

static uint64_t obj_key(uint32_t client, uint32_t handle)
{
    return (uint64_t)client << 32 | handle;
}

void gdu_shim_vlog(gdu_shim *s, int level, const char *fmt, va_list ap)
{
    if (level > s->cfg.log_level || s->ops.log == NULL)
        return;
    char line[512];
    int n = snprintf(line, sizeof line, "gdunlock: ");
    vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    s->ops.log(s->ops.ctx, level, line);
}

void gdu_shim_log(gdu_shim *s, int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    gdu_shim_vlog(s, level, fmt, ap);
    va_end(ap);
}

gdu_obj *gdu_shim_obj(gdu_shim *s, uint32_t client, uint32_t handle)
{
    return (gdu_obj *)gdu_map_find(&s->objects, obj_key(client, handle));
}

gdu_obj *gdu_shim_obj_add(gdu_shim *s, uint32_t client, uint32_t handle, uint32_t parent,
                          uint32_t cls)
{
    gdu_obj *o = gdu_pool_alloc(sizeof *o);
    if (o == NULL) {
        gdu_shim_log(s, GDU_LOG_ERROR, "out of memory tracking RM object 0x%x; it is ignored",
                     handle);
        return NULL;
    }
    o->node.key = obj_key(client, handle);
    o->client = client;
    o->handle = handle;
    o->parent = parent;
    o->cls = cls;
    o->fd = -1;
    if (gdu_map_insert(&s->objects, &o->node) != 0) {
        gdu_pool_free(o, sizeof *o);
        gdu_shim_log(s, GDU_LOG_ERROR, "out of memory tracking RM object 0x%x; it is ignored",
                     handle);
        return NULL;
    }
    gdu_obj *p = parent != handle ? gdu_shim_obj(s, client, parent) : NULL;
    if (p != NULL)
        p->children++;
    return o;
}

void gdu_shim_obj_remove(gdu_shim *s, gdu_obj *o)
{
    gdu_map_remove(&s->objects, o->node.key);
    gdu_obj *p = o->parent != o->handle ? gdu_shim_obj(s, o->client, o->parent) : NULL;
    if (p != NULL && p->children > 0)
        p->children--;
    gdu_pool_free(o, sizeof *o);
}

gdu_obj *gdu_shim_device_of(gdu_shim *s, const gdu_obj *o)
{
    for (int depth = 0; o != NULL && depth < GDU_MAX_DEPTH; depth++) {
        if (o->cls == GDU_NV01_DEVICE_0)
            return (gdu_obj *)o;
        if (o->parent == o->handle)
            return NULL;
        o = gdu_shim_obj(s, o->client, o->parent);
    }
    return NULL;
}

/* The subdevice whose NV503C registers memory o: its own subdevice parent, or
 * its device's (first) subdevice. */
gdu_obj *gdu_shim_subdevice_of(gdu_shim *s, const gdu_obj *o)
{
    const gdu_obj *p = gdu_shim_obj(s, o->client, o->parent);
    if (p != NULL && p->cls == GDU_NV20_SUBDEVICE_0)
        return (gdu_obj *)p;
    gdu_obj *dev = gdu_shim_device_of(s, p);
    return dev != NULL && dev->subdevice != 0 ? gdu_shim_obj(s, o->client, dev->subdevice) : NULL;
}

gdu_gpu_stats *gdu_shim_gpu(gdu_shim *s, const gdu_obj *subdevice)
{
    const gdu_obj *dev = gdu_shim_device_of(s, subdevice);
    unsigned slot = dev != NULL && dev->instance < GDU_SHIM_GPU_SLOTS - 1 ? dev->instance
                                                                          : GDU_SHIM_GPU_SLOTS - 1;
    s->gpus[slot].seen = true;
    return &s->gpus[slot];
}

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

gdu_mapping *gdu_shim_mapping_at(gdu_shim *s, uint64_t va)
{
    struct containing_scan sc = {va, (gdu_mapping *)gdu_map_find(&s->mappings, va)};
    if (sc.found == NULL)
        gdu_map_each(&s->mappings, containing_visit, &sc);
    return sc.found;
}
