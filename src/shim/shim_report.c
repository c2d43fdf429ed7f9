/* The shim's report as JSON (written at exit by the interposer, read by
 * `gdunlock run`). */
#include "driverabi/nv_status.h"
#include "shim/shim_state.h"

#include <unistd.h>

static const char *mode_name(gdu_p2p_mode m)
{
    switch (m) {
    case GDU_P2P_NATIVE:
        return "native";
    case GDU_P2P_UNLOCKED:
        return "unlocked";
    case GDU_P2P_FAILED:
        return "failed";
    default:
        return "idle";
    }
}

static json_t *gpu_json(const gdu_shim *s, unsigned slot, const gdu_gpu_stats *g)
{
    json_t *failures = json_object();
    for (unsigned i = 0; i < GDU_SHIM_FAIL_KINDS && g->fail[i].count != 0; i++)
        json_object_set_new(failures, gdu_nv_status_name(g->fail[i].status), json_integer((json_int_t)g->fail[i].count));
    const char *reason = g->reason[0] ? g->reason : NULL;
    if (reason == NULL && s->refused)
        reason = s->refusal;
    return json_pack("{s:o, s:s?, s:s, s:s?, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o}",
                     "rm_device", slot < GDU_SHIM_GPU_SLOTS - 1 ? json_integer(slot) : json_null(),
                     "pci", g->pci[0] ? g->pci : NULL,
                     "mode", s->refused && g->mode != GDU_P2P_NATIVE ? "failed" : mode_name(g->mode),
                     "reason", reason,
                     "objects_created", (json_int_t)g->objects_created,
                     "va_spaces_registered", (json_int_t)g->va_spaces_registered,
                     "registered", (json_int_t)g->registered,
                     "registered_by_libcuda", (json_int_t)g->registered_by_libcuda,
                     "already_registered", (json_int_t)g->already_registered,
                     "unregistered", (json_int_t)g->unregistered,
                     "live", (json_int_t)(g->registered - g->unregistered),
                     "skipped", (json_int_t)g->skipped,
                     "skipped_bytes", (json_int_t)g->skipped_bytes,
                     "failures", (json_int_t)g->failures,
                     "answered_for_libcuda", (json_int_t)g->answered_for_libcuda,
                     "failures_by_status", failures);
}

json_t *gdu_shim_report(gdu_shim *s)
{
    pthread_mutex_lock(&s->lock);
    json_t *gpus = json_array();
    for (unsigned i = 0; i < GDU_SHIM_GPU_SLOTS; i++)
        if (s->gpus[i].seen)
            json_array_append_new(gpus, gpu_json(s, i, &s->gpus[i]));
    json_t *layout = s->layout_known ? json_pack("{s:I, s:I, s:b}", "max_gpus", (json_int_t)s->layout.max_gpus,
                                                 "block_size", (json_int_t)s->layout.size, "validated",
                                                 s->layout_validated)
                                     : json_null();
    json_t *r = json_pack("{s:i, s:s, s:s, s:o, s:s?, s:b, s:b, s:I, s:I, s:I, s:o}",
                          "pid", (int)getpid(),
                          "gdunlock", GDUNLOCK_VERSION,
                          "driver", s->driver,
                          "uvm_layout", layout,
                          "refused", s->refused || !s->layout_known ? s->refusal : NULL,
                          "test_drop_native", s->cfg.test_drop_native,
                          "test_strict", s->cfg.test_drop_native && s->cfg.test_strict,
                          "rm_clients", (json_int_t)s->clients,
                          "rm_calls", (json_int_t)s->rm_calls,
                          "mappings", (json_int_t)s->mappings.count,
                          "gpus", gpus);
    pthread_mutex_unlock(&s->lock);
    return r;
}
