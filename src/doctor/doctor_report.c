#include "doctor/doctor_report.h"
#include "util/json_text.h"

#include "p2p/p2p_verdict_json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gdu_report_init(gdu_report *r) { memset(r, 0, sizeof *r); }

void gdu_report_free(gdu_report *r)
{
    free(r->findings);
    free(r->pairs);
    memset(r, 0, sizeof *r);
}

gdu_finding *gdu_report_add(gdu_report *r, const char *id, const char *area, gdu_status status,
                            const char *title_fmt, ...)
{
    static gdu_finding scratch;
    gdu_finding *f = &scratch;
    if (r->n_findings == r->cap_findings) {
        size_t cap = r->cap_findings ? r->cap_findings * 2 : 32;
        gdu_finding *grown = realloc(r->findings, cap * sizeof *grown);
        if (grown != NULL) {
            r->findings = grown;
            r->cap_findings = cap;
        }
    }
    if (r->n_findings < r->cap_findings)
        f = &r->findings[r->n_findings++];
    memset(f, 0, sizeof *f);
    snprintf(f->id, sizeof f->id, "%s", id);
    snprintf(f->area, sizeof f->area, "%s", area);
    f->status = status;
    va_list ap;
    va_start(ap, title_fmt);
    vsnprintf(f->title, sizeof f->title, title_fmt, ap);
    va_end(ap);
    return f;
}

void gdu_finding_evidence(gdu_finding *f, const char *fmt, ...)
{
    if (f->n_evidence >= GDU_MAX_EVIDENCE)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->evidence[f->n_evidence++], sizeof f->evidence[0], fmt, ap);
    va_end(ap);
}

void gdu_finding_fix(gdu_finding *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->fix, sizeof f->fix, fmt, ap);
    va_end(ap);
}

__attribute__((format(printf, 4, 0))) static void add_reason(gdu_report *r, gdu_gds_verdict level,
                                                             bool note, const char *fmt, va_list ap)
{
    if (r->n_reasons >= GDU_MAX_REASONS)
        return;
    gdu_reason *reason = &r->reasons[r->n_reasons++];
    reason->level = level;
    reason->note = note;
    vsnprintf(reason->text, sizeof reason->text, fmt, ap);
}

void gdu_report_reason(gdu_report *r, gdu_gds_verdict level, const char *fmt, ...)
{
    if (level > r->gds)
        r->gds = level;
    va_list ap;
    va_start(ap, fmt);
    add_reason(r, level, false, fmt, ap);
    va_end(ap);
}

void gdu_report_note(gdu_report *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add_reason(r, r->gds, true, fmt, ap);
    va_end(ap);
}

void gdu_report_unknown(gdu_report *r, gdu_gds_verdict could_be, const char *fmt, ...)
{
    size_t before = r->n_reasons;
    va_list ap;
    va_start(ap, fmt);
    add_reason(r, GDU_GDS_UNKNOWN, false, fmt, ap);
    va_end(ap);
    if (r->n_reasons > before)
        r->reasons[before].could_be = could_be;
}

void gdu_report_settle(gdu_report *r)
{
    bool unknown = false;
    for (size_t i = 0; i < r->n_reasons; i++)
        unknown |= !r->reasons[i].note && r->reasons[i].level == GDU_GDS_UNKNOWN &&
                   r->reasons[i].could_be > r->gds;
    for (size_t i = 0; i < r->n_reasons && !unknown; i++)
        if (!r->reasons[i].note && r->reasons[i].level == GDU_GDS_UNKNOWN) {
            r->reasons[i].note = true; /* the known causes are as bad already */
            r->reasons[i].level = r->gds;
        }
    if (unknown)
        r->gds = GDU_GDS_UNKNOWN;
}

const gdu_finding *gdu_report_find(const gdu_report *r, const char *id)
{
    for (size_t i = 0; i < r->n_findings; i++)
        if (strcmp(r->findings[i].id, id) == 0)
            return &r->findings[i];
    return NULL;
}

const char *gdu_status_id(gdu_status s)
{
    static const char *const ids[] = {"ok", "warn", "fail", "unknown", "info"};
    return (unsigned)s < 5 ? ids[s] : "unknown";
}

const char *gdu_gds_verdict_id(gdu_gds_verdict v)
{
    static const char *const ids[] = {"direct", "direct_with_gdunlock", "compat_only", "impossible",
                                      "unknown"};
    return (unsigned)v < 5 ? ids[v] : "unknown";
}

const char *gdu_direct_path_id(gdu_direct_path p)
{
    static const char *const ids[] = {"none", "nvidia-fs", "p2pdma", "unknown"};
    return (unsigned)p < 4 ? ids[p] : "unknown";
}

const char *gdu_gds_verdict_text(gdu_gds_verdict v)
{
    static const char *const text[] = {"direct", "direct with gdunlock", "compat only",
                                       "impossible", "unknown"};
    return (unsigned)v < 5 ? text[v] : "unknown";
}

static json_t *finding_to_json(const gdu_finding *f)
{
    json_t *evidence = json_array();
    for (size_t i = 0; i < f->n_evidence; i++)
        json_array_append_new(evidence, gdu_json_text(f->evidence[i]));
    return json_pack("{s:o, s:s, s:s, s:o, s:o, s:o}", "id", gdu_json_text(f->id), "area", f->area,
                     "status", gdu_status_id(f->status), "title", gdu_json_text(f->title),
                     "evidence", evidence, "fix", gdu_json_text(f->fix));
}

json_t *gdu_report_to_json(const gdu_report *r)
{
    json_t *reasons = json_array(), *pairs = json_array(), *findings = json_array();
    for (size_t i = 0; i < r->n_reasons; i++) {
        const gdu_reason *x = &r->reasons[i];
        json_t *o =
            json_pack("{s:s, s:o}", "level", x->note ? "note" : gdu_gds_verdict_id(x->level),
                      "text", gdu_json_text(x->text));
        if (!x->note && x->level == GDU_GDS_UNKNOWN)
            json_object_set_new(o, "could_be", json_string(gdu_gds_verdict_id(x->could_be)));
        json_array_append_new(reasons, o);
    }
    for (size_t i = 0; i < r->n_pairs; i++) {
        const gdu_p2p_pair *p = &r->pairs[i];
        json_t *bridges = json_array();
        for (size_t k = 0; k < p->path.n_bridges; k++)
            json_array_append_new(bridges, gdu_json_text(p->path.bridges[k]));
        json_array_append_new(pairs,
                              json_pack("{s:i, s:i, s:o, s:s, s:o}", "gpu_a", p->a, "gpu_b", p->b,
                                        "verdict", gdu_p2p_verdict_json(&p->verdict), "pcie_path",
                                        gdu_path_kind_name(p->path.kind), "bridges", bridges));
    }
    for (size_t i = 0; i < r->n_findings; i++)
        json_array_append_new(findings, finding_to_json(&r->findings[i]));
    json_t *gpus = json_array();
    for (size_t i = 0; i < r->n_gpus; i++) {
        const gdu_report_gpu *g = &r->gpus[i];
        json_array_append_new(
            gpus,
            json_pack("{s:i, s:o, s:o, s:i, s:i, s:I, s:I, s:I, s:I, s:{s:i, s:i, s:i, s:i}}",
                      "index", g->index, "pci", gdu_json_text(g->bdf), "name",
                      gdu_json_text(g->name), "geforce", g->geforce, "cuda_ordinal",
                      g->cuda_ordinal, "bar1_bytes", (json_int_t)g->bar1_bytes, "rm_bar1_bytes",
                      (json_int_t)g->rm_bar1_bytes, "rm_bar1_available_bytes",
                      (json_int_t)g->rm_bar1_available, "memory_bytes", (json_int_t)g->memory_bytes,
                      "link", "cur_gen", g->cur_gen, "cur_width", g->cur_width, "max_gen",
                      g->max_gen, "max_width", g->max_width));
    }
    /* The target is a path the user named: exact in target_escaped when not UTF-8. */
    json_t *gds = json_pack("{s:s}", "verdict", gdu_gds_verdict_id(r->gds));
    if (gds != NULL && gdu_json_set_text(gds, "target", r->gds_target) != 0)
        gds = (json_decref(gds), NULL);
    if (json_object_set_new(gds, "reasons", reasons) != 0 ||
        json_object_set_new(gds, "direct_path", json_string(gdu_direct_path_id(r->direct_path))) !=
            0 ||
        json_object_set_new(gds, "direct_path_why", gdu_json_text(r->direct_path_why)) != 0)
        gds = (json_decref(gds), NULL);
    return json_pack("{s:s, s:b, s:{s:o, s:i}, s:o, s:o, s:o, s:o}", "schema", "gdunlock-doctor/2",
                     "driver_present", r->driver_present, "driver", "version",
                     gdu_json_text(r->driver_version), "open_module", r->open_module, "gpus", gpus,
                     "gds", gds, "p2p", pairs, "findings", findings);
}
