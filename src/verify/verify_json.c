/* The verify run as one JSON document (the --json output, and what a
 * re-executed verify child hands back to its parent). */
#include "util/exit_codes.h"
#include "util/json_text.h"
#include "verify/verify.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *call_json(const gdu_verify_call *c)
{
    return json_pack("{s:b, s:b, s:i, s:o}", "ran", c->ran, "ok", c->ok, "code", c->code, "text",
                     gdu_json_text(c->text));
}

static json_t *list_json(const gdu_verify_reason *list, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_pack("{s:o, s:o}", "id", gdu_json_text(list[i].id), "text",
                                           gdu_json_text(list[i].text)));
    return a;
}

static json_t *buffers_json(const gdu_verify_evidence *ev)
{
    json_t *a = json_array();
    for (int m = 0; m < GDU_VERIFY_MEM_COUNT; m++) {
        const gdu_verify_buffer *b = &ev->buffers[m];
        json_t *o = json_pack("{s:s, s:o, s:o, s:o, s:o, s:b, s:b}", "kind",
                              gdu_verify_mem_name((gdu_verify_mem)m), "alloc", call_json(&b->alloc),
                              "buf_register", call_json(&b->buf_register), "write",
                              call_json(&b->write), "read", call_json(&b->read), "compared",
                              b->compared, "integrity_ok", b->integrity_ok);
        if (b->compared && !b->integrity_ok)
            json_object_set_new(o, "mismatch_offset", json_integer((json_int_t)b->mismatch_offset));
        if (b->skipped[0])
            json_object_set_new(o, "skipped", gdu_json_text(b->skipped));
        json_array_append_new(a, o);
    }
    return a;
}

static json_t *nvfs_json(const gdu_verify_evidence *ev)
{
    json_t *o = json_pack("{s:b, s:b}", "before", ev->nvfs_before, "after", ev->nvfs_after);
    if (ev->nvfs_why[0])
        json_object_set_new(o, "error", gdu_json_text(ev->nvfs_why));
    const gdu_nvfs_stats *st = ev->nvfs_after ? &ev->stats_after : &ev->stats_before;
    if (ev->nvfs_before || ev->nvfs_after) {
        json_object_set_new(o, "stats_version", json_integer(st->stats_version));
        json_object_set_new(o, "driver_version", gdu_json_text(st->driver_version));
        json_object_set_new(o, "gds_version", gdu_json_text(st->gds_version));
    }
    if (!ev->nvfs_before || !ev->nvfs_after)
        return o;
    json_object_set_new(o, "counters_reset", json_boolean(ev->delta.counters_reset));
    json_t *delta = json_object();
    for (int f = 0; f < GDU_NVFS_FIELD_COUNT; f++)
        if (ev->delta.present[f])
            json_object_set_new(delta, gdu_nvfs_field_key(f), json_integer(ev->delta.value[f]));
    json_object_set_new(o, "delta", delta);
    json_t *gpus = json_array();
    for (size_t g = 0; g < ev->delta.n_gpus; g++) {
        const gdu_nvfs_gpu_delta *d = &ev->delta.gpus[g];
        json_array_append_new(gpus,
                              json_pack("{s:o, s:o, s:I, s:I, s:I, s:I}", "pci",
                                        gdu_json_text(d->pci), "uuid", gdu_json_text(d->uuid),
                                        "registered_mib_delta", (json_int_t)d->registered_mib,
                                        "registered_mib_after", (json_int_t)d->registered_mib_after,
                                        "cache_mib_delta", (json_int_t)d->cache_mib,
                                        "cache_mib_after", (json_int_t)d->cache_mib_after));
    }
    json_object_set_new(o, "gpus", gpus);
    return o;
}

static json_t *cufile_json(const gdu_verify_evidence *ev)
{
    json_t *o =
        json_pack("{s:o, s:i, s:o, s:o, s:o, s:o}", "library", gdu_json_text(ev->cufile_library),
                  "version", ev->cufile_version, "load", call_json(&ev->cufile_load), "driver_open",
                  call_json(&ev->driver_open), "properties", call_json(&ev->driver_props),
                  "handle_register", call_json(&ev->handle_register));
    if (ev->cufile_log[0])
        json_object_set_new(o, "log", gdu_json_text(ev->cufile_log));
    if (ev->driver_props.ok) {
        char version[32];
        snprintf(version, sizeof version, "%u.%u", ev->nvfs_major, ev->nvfs_minor);
        json_object_set_new(o, "nvfs_version", json_string(version));
        json_object_set_new(o, "compat_allowed", json_boolean(ev->compat_allowed));
        json_object_set_new(o, "max_direct_io_size",
                            json_integer((json_int_t)ev->max_direct_io_size));
    }
    return o;
}

json_t *gdu_verify_shim_json(const gdu_verify_shim *s)
{
    json_t *o = json_pack("{s:b}", "active", s->active);
    if (!s->active)
        json_object_set_new(o, "why_inactive", gdu_json_text(s->why_inactive));
    if (s->report_error[0])
        json_object_set_new(o, "report_error", gdu_json_text(s->report_error));
    if (s->mode[0])
        json_object_set_new(o, "mode", gdu_json_text(s->mode));
    if (s->reason[0])
        json_object_set_new(o, "reason", gdu_json_text(s->reason));
    if (s->registered >= 0)
        json_object_set_new(o, "registered", json_integer(s->registered));
    if (s->unregistered >= 0)
        json_object_set_new(o, "unregistered", json_integer(s->unregistered));
    if (s->cufile_registered >= 0) {
        json_t *k = json_pack("{s:I, s:I}", "cufile_buffers", (json_int_t)s->cufile_registered,
                              "found", (json_int_t)s->cufile_found);
        if (s->lookup_refusal[0])
            json_object_set_new(k, "first_refusal", gdu_json_text(s->lookup_refusal));
        json_object_set_new(o, "kernel_lookup", k);
    }
    return o;
}

json_t *gdu_verify_reasons_json(const gdu_verify_result *r)
{
    return list_json(r->reasons, r->n_reasons);
}

json_t *gdu_verify_to_json(const gdu_verify_evidence *ev, const gdu_verify_result *r)
{
    json_t *doc =
        json_pack("{s:s, s:i, s:o}", "verdict", gdu_verify_verdict_name(r->verdict), "exit_code",
                  gdu_verify_exit_code(r->verdict), "reasons", list_json(r->reasons, r->n_reasons));
    json_object_set_new(doc, "notes", list_json(r->notes, r->n_notes));
    json_object_set_new(doc, "gdunlock", json_string(GDUNLOCK_VERSION));
    /* The path as the user gave it: exact in path_escaped when it is not UTF-8. */
    json_t *file = json_object();
    gdu_json_set_text(file, "path", ev->path);
    json_object_set_new(file, "size", json_integer((json_int_t)ev->size));
    json_object_set_new(file, "open", call_json(&ev->file));
    json_object_set_new(doc, "file", file);
    json_object_set_new(doc, "gpu",
                        json_pack("{s:i, s:o, s:o}", "index", ev->gpu, "name",
                                  gdu_json_text(ev->gpu_name), "pci", gdu_json_text(ev->gpu_pci)));
    json_object_set_new(doc, "cuda", call_json(&ev->cuda));
    json_object_set_new(doc, "cufile", cufile_json(ev));
    json_object_set_new(doc, "buffers", buffers_json(ev));
    json_object_set_new(doc, "nvidia_fs", nvfs_json(ev));
    json_t *engine =
        json_pack("{s:o, s:o, s:o, s:b}", "check", call_json(&ev->engine), "backend",
                  gdu_json_text(ev->engine_backend), "reason", gdu_json_text(ev->engine_reason),
                  "integrity_ok", ev->engine_integrity_ok);
    json_object_set_new(doc, "engine", engine);
    json_object_set_new(doc, "shim", gdu_verify_shim_json(&ev->shim));
    return doc;
}

json_t *gdu_verify_error_json(const char *why, int err)
{
    return json_pack("{s:o, s:i}", "error", gdu_json_text(why), "errno", err);
}

int gdu_verify_document_exit_code(const json_t *doc)
{
    if (json_object_get(doc, "error") == NULL)
        return (int)json_integer_value(json_object_get(doc, "exit_code"));
    if (json_is_true(json_object_get(doc, "crashed")))
        return GDU_EXIT_FAILED;
    switch ((int)json_integer_value(json_object_get(doc, "errno"))) {
    case -ENODEV:
        return GDU_EXIT_UNAVAILABLE; /* no GPU */
    case -EEXIST:
    case -EINVAL:
        return GDU_EXIT_USAGE; /* bad arguments, or PATH would be overwritten */
    case -ENOENT:
    case -EACCES:
    case -ENOTDIR:
    case -EROFS:
        return GDU_EXIT_NOINPUT; /* PATH's folder missing or not writable */
    default:
        return GDU_EXIT_SOFTWARE;
    }
}
