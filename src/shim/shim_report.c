/* The shim's report as JSON (written at exit by the interposer, read by
 * `gdunlock run` and `gdunlock verify`; schema: docs/shim-report.md). Written
 * without a JSON library: the shim is loaded into every preloaded process. */
#include "driverabi/nv_classes.h"
#include "driverabi/nv_status.h"
#include "pinmodel/pin_model.h"
#include "shim/shim_state.h"
#include "util/jsonw.h"

#include <stdio.h>

static const char *mode_name(gdu_tpp_mode m)
{
    switch (m) {
    case GDU_TPP_NATIVE:
        return "native";
    case GDU_TPP_UNLOCKED:
        return "unlocked";
    case GDU_TPP_FAILED:
        return "failed";
    default:
        return "idle";
    }
}

static void rm_device(gdu_jsonw *w, const char *key, unsigned slot)
{
    if (slot < GDU_SHIM_GPU_SLOTS - 1)
        gdu_jsonw_uint(w, key, slot);
    else
        gdu_jsonw_null(w, key);
}

static void gpu_json(gdu_jsonw *w, const gdu_shim *s, unsigned slot, const gdu_gpu_stats *g)
{
    const char *reason = g->reason[0] ? g->reason : NULL;
    if (reason == NULL && g->mode == GDU_TPP_NATIVE && g->native_empty[0])
        reason = g->native_empty;
    if (reason == NULL && s->refused)
        reason = s->refusal;
    gdu_jsonw_object_begin(w, NULL);
    rm_device(w, "rm_device", slot);
    gdu_jsonw_string(w, "pci", g->pci[0] ? g->pci : NULL);
    gdu_jsonw_string(w, "mode",
                     s->refused && g->mode != GDU_TPP_NATIVE ? "failed" : mode_name(g->mode));
    gdu_jsonw_string(w, "reason", reason);
    if (g->vaspace != 0)
        gdu_jsonw_uint(w, "va_space", g->vaspace);
    else
        gdu_jsonw_null(w, "va_space");
    gdu_jsonw_string(w, "va_space_source", g->vaspace_source);
    gdu_jsonw_uint(w, "objects_created", g->objects_created);
    gdu_jsonw_uint(w, "va_spaces_registered", g->va_spaces_registered);
    gdu_jsonw_uint(w, "registered", g->registered);
    gdu_jsonw_uint(w, "registered_by_libcuda", g->registered_by_libcuda);
    gdu_jsonw_uint(w, "already_registered", g->already_registered);
    gdu_jsonw_uint(w, "unregistered", g->unregistered);
    gdu_jsonw_uint(w, "live", g->registered - g->unregistered);
    gdu_jsonw_uint(w, "skipped", g->skipped);
    gdu_jsonw_uint(w, "skipped_bytes", g->skipped_bytes);
    gdu_jsonw_uint(w, "second_mappings", g->second_mappings);
    gdu_jsonw_uint(w, "stale_unregistered", g->stale_unregistered);
    gdu_jsonw_uint(w, "bar1_bytes", g->bar1_bytes);
    /* RM's figures, shared by every process, as doctor shows them. */
    gdu_jsonw_uint(w, "rm_bar1_bytes", g->rm_bar1_total);
    gdu_jsonw_uint(w, "rm_bar1_available_bytes", g->rm_bar1_available);
    gdu_jsonw_string(w, "rm_bar1_why", g->rm_bar1_why[0] ? g->rm_bar1_why : NULL);
    gdu_jsonw_uint(w, "cufile_pinned_bytes", g->cufile_pinned);
    gdu_jsonw_uint(w, "failures", g->failures);
    gdu_jsonw_uint(w, "answered_for_libcuda", g->answered_for_libcuda);
    gdu_jsonw_object_begin(w, "failures_by_status");
    for (unsigned i = 0; i < GDU_SHIM_FAIL_KINDS && g->fail[i].count != 0; i++)
        gdu_jsonw_uint(w, gdu_nv_status_name(g->fail[i].status), g->fail[i].count);
    gdu_jsonw_object_end(w);
    gdu_jsonw_object_begin(w, "dma_buf");
    gdu_jsonw_uint(w, "exports", g->dmabuf_exports);
    gdu_jsonw_uint(w, "failures", g->dmabuf_failures);
    gdu_jsonw_bool(w, "unsupported", g->dmabuf_unsupported);
    gdu_jsonw_string(w, "last_refusal", g->dmabuf_why[0] ? g->dmabuf_why : NULL);
    gdu_jsonw_object_end(w);
    gdu_jsonw_object_end(w);
}

static void cufile_json(gdu_jsonw *w, const gdu_shim *s)
{
    gdu_jsonw_object_begin(w, "cufile_buffers");
    gdu_jsonw_uint(w, "registered", s->cufile_registered);
    gdu_jsonw_uint(w, "found", s->cufile_found);
    gdu_jsonw_uint(w, "not_listed", s->cufile_dropped);
    gdu_jsonw_array_begin(w, "buffers");
    /* In registration order. */
    for (uint64_t seq = 1, listed = 0; listed < GDU_SHIM_CUFILE_BUFS && seq <= s->cufile_registered;
         seq++) {
        for (unsigned i = 0; i < GDU_SHIM_CUFILE_BUFS; i++) {
            const gdu_cufile_buf *b = &s->cufile[i];
            if (b->seq != seq)
                continue;
            listed++;
            gdu_jsonw_object_begin(w, NULL);
            gdu_jsonw_uint(w, "address", b->ptr);
            gdu_jsonw_uint(w, "size", b->size);
            gdu_jsonw_int(w, "flags", b->flags);
            gdu_jsonw_int(w, "cufile_status", b->status);
            gdu_jsonw_bool(w, "live", b->live);
            rm_device(w, "rm_device", b->slot);
            gdu_jsonw_string(w, "memory_kind", b->memory_kind[0] ? b->memory_kind : NULL);
            gdu_jsonw_string(w, "kernel_lookup", gdu_pin_rule_name((gdu_pin_rule)b->rule));
            gdu_jsonw_int(w, "errno", b->err);
            gdu_jsonw_string(w, "why", b->why);
            gdu_jsonw_object_end(w);
        }
    }
    gdu_jsonw_array_end(w);
    gdu_jsonw_object_end(w);
}

struct reg_scan {
    gdu_jsonw *w;
    const gdu_obj *tpp;
};

static void reg_visit(gdu_map_node *n, void *arg)
{
    struct reg_scan *sc = arg;
    const gdu_obj *o = (const gdu_obj *)n;
    if (o->reg_tpp != sc->tpp->handle || o->client != sc->tpp->client)
        return;
    gdu_jsonw_object_begin(sc->w, NULL);
    gdu_jsonw_uint(sc->w, "memory", o->handle);
    gdu_jsonw_uint(sc->w, "address", o->reg_address);
    gdu_jsonw_uint(sc->w, "size", o->reg_size);
    gdu_jsonw_uint(sc->w, "offset", o->reg_offset);
    gdu_jsonw_string(sc->w, "by", o->reg_by_shim ? "shim" : "libcuda");
    gdu_jsonw_object_end(sc->w);
}

struct object_scan {
    gdu_shim *s;
    gdu_jsonw *w;
};

/* Every NV503C object RM holds for the process, with its VA spaces and registrations. */
static void object_visit(gdu_map_node *n, void *arg)
{
    struct object_scan *sc = arg;
    const gdu_obj *o = (const gdu_obj *)n;
    if (o->cls != GDU_NV50_THIRD_PARTY_P2P || o->tpp_answered)
        return;
    gdu_jsonw *w = sc->w;
    const gdu_obj *sub = gdu_shim_obj(sc->s, o->client, o->parent);
    gdu_jsonw_object_begin(w, NULL);
    gdu_jsonw_uint(w, "client", o->client);
    gdu_jsonw_uint(w, "handle", o->handle);
    rm_device(w, "rm_device",
              sub != NULL ? (unsigned)(gdu_shim_gpu(sc->s, sub) - sc->s->gpus)
                          : GDU_SHIM_GPU_SLOTS - 1);
    gdu_jsonw_string(w, "owner", o->tpp_owned ? "shim" : "libcuda");
    gdu_jsonw_array_begin(w, "va_spaces");
    for (unsigned i = 0; i < o->n_tpp_vaspaces; i++) {
        const gdu_obj *v = gdu_shim_obj(sc->s, o->client, o->tpp_vaspaces[i]);
        gdu_jsonw_object_begin(w, NULL);
        gdu_jsonw_uint(w, "handle", o->tpp_vaspaces[i]);
        gdu_jsonw_bool(w, "uvm", v != NULL && v->uvm_registered);
        gdu_jsonw_string(w, "by", (o->tpp_vaspaces_by_shim >> i) & 1u ? "shim" : "libcuda");
        gdu_jsonw_object_end(w);
    }
    gdu_jsonw_array_end(w);
    gdu_jsonw_array_begin(w, "registrations");
    struct reg_scan rs = {w, o};
    gdu_map_each(&sc->s->objects, reg_visit, &rs);
    gdu_jsonw_array_end(w);
    gdu_jsonw_object_end(w);
}

static void attr_json(gdu_jsonw *w, const gdu_shim *s, const char *key, const gdu_attr_answers *a)
{
    gdu_jsonw_object_begin(w, key);
    gdu_jsonw_bool(w, "answer_on", s->cfg.rdma_attr_answer);
    gdu_jsonw_bool(w, "test_libcuda_zero", s->cfg.test_rdma_attr_zero);
    gdu_jsonw_bool(w, "rdma_network", s->cfg.rdma_network);
    gdu_jsonw_uint(w, "asked_with_0", a->asked);
    gdu_jsonw_uint(w, "answered_1", a->answered);
    gdu_jsonw_uint(w, "answered_1_for_network", a->answered_for_network);
    gdu_jsonw_uint(w, "kept", a->kept);
    gdu_jsonw_string(w, "kept_for", a->kept_for[0] ? a->kept_for : NULL);
    gdu_jsonw_object_end(w);
}

char *gdu_shim_report_json(gdu_shim *s, bool with_registrations)
{
    gdu_jsonw w;
    gdu_jsonw_init(&w);
    pthread_mutex_lock(&s->lock);
    gdu_shim_fill_bar1(s, true);
    gdu_jsonw_object_begin(&w, NULL);
    gdu_jsonw_uint(&w, "pid", s->pid);
    gdu_jsonw_string(&w, "gdunlock", GDUNLOCK_VERSION);
    gdu_jsonw_string(&w, "driver", s->driver);
    if (s->layout_known) {
        gdu_jsonw_object_begin(&w, "uvm_layout");
        gdu_jsonw_uint(&w, "max_gpus", s->layout.max_gpus);
        gdu_jsonw_uint(&w, "block_size", s->layout.size);
        gdu_jsonw_bool(&w, "validated", s->layout_validated);
        gdu_jsonw_object_end(&w);
    } else {
        gdu_jsonw_null(&w, "uvm_layout");
    }
    gdu_jsonw_string(&w, "refused", s->refused || !s->layout_known ? s->refusal : NULL);
    gdu_jsonw_bool(&w, "test_drop_native", s->cfg.test_drop_native);
    gdu_jsonw_bool(&w, "test_strict", s->cfg.test_drop_native && s->cfg.test_strict);
    gdu_jsonw_uint(&w, "rm_clients", s->clients);
    gdu_jsonw_uint(&w, "rm_calls", s->rm_calls);
    gdu_jsonw_uint(&w, "mappings", s->mappings.count);
    gdu_jsonw_array_begin(&w, "gpus");
    for (unsigned i = 0; i < GDU_SHIM_GPU_SLOTS; i++)
        if (s->gpus[i].seen)
            gpu_json(&w, s, i, &s->gpus[i]);
    gdu_jsonw_array_end(&w);
    cufile_json(&w, s);
    attr_json(&w, s, "gpu_direct_rdma_attribute", &s->rdma_device_attr);
    attr_json(&w, s, "gpu_direct_rdma_pointer_attribute", &s->rdma_pointer_attr);
    attr_json(&w, s, "dma_buf_attribute", &s->dma_buf_attr);
    if (with_registrations) {
        gdu_jsonw_array_begin(&w, "thirdpartyp2p");
        struct object_scan os = {s, &w};
        gdu_map_each(&s->objects, object_visit, &os);
        gdu_jsonw_array_end(&w);
    }
    gdu_jsonw_object_end(&w);
    pthread_mutex_unlock(&s->lock);
    return gdu_jsonw_finish(&w);
}
