/* The JSON forms of --check, --status and --install / --revert
 * (docs/p2p-unlock.md documents their members). */
#include "unlock/unlock_run.h"

#include "util/json_text.h"

#include <stdio.h>

static json_t *tri(gdu_tri t)
{
    return t == GDU_TRI_UNKNOWN ? json_null() : json_boolean(t == GDU_TRI_YES);
}

static json_t *str_or_null(const char *s)
{
    return s != NULL && s[0] ? json_string(s) : json_null();
}

static json_t *bytes_or_null(uint64_t v) { return v ? json_integer((json_int_t)v) : json_null(); }

static json_t *notes(const gdu_unlock_notes *n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n->n; i++)
        json_array_append_new(
            a, json_pack("{s:s, s:s}", "fact", n->note[i].fact, "fix", n->note[i].fix));
    return a;
}

static json_t *gpu_json(const gdu_unlock_gpu *g)
{
    return json_pack("{s:i, s:s, s:s, s:o, s:o, s:s, s:o, s:o, s:o, s:o, s:s, s:s, s:o}", "index",
                     g->index, "pci", g->bdf, "name", g->name, "geforce", tri(g->geforce), "cc",
                     g->cc_major ? json_sprintf("%d.%d", g->cc_major, g->cc_minor) : json_null(),
                     "family", gdu_chip_family_name(g->family), "bar1_bytes",
                     bytes_or_null(g->bar1), "memory_bytes", bytes_or_null(g->memory),
                     "rebar_max_bytes", bytes_or_null(g->rebar_max), "display",
                     str_or_null(g->display), "plan", gdu_unlock_plan_id(g->plan), "why", g->why,
                     "blockers", notes(&g->blockers));
}

static json_t *pair_json(const gdu_unlock_pair *p)
{
    return json_pack("{s:i, s:i, s:s, s:[s,s], s:o, s:o, s:s, s:o, s:o, s:s, s:s, s:o}", "a", p->a,
                     "b", p->b, "path", gdu_path_kind_name(p->path.kind), "root_complexes",
                     p->root_a, p->root_b, "acs_redirect", tri(p->acs_redirect), "acs_redirecting",
                     str_or_null(p->acs_bridges), "iommu",
                     p->iommu == GDU_P2P_IOMMU_OFF           ? "off"
                     : p->iommu == GDU_P2P_IOMMU_PASSTHROUGH ? "passthrough"
                     : p->iommu == GDU_P2P_IOMMU_TRANSLATED  ? "translated"
                                                             : "unknown",
                     "p2p_works", tri(p->works), "link", str_or_null(p->link), "plan",
                     gdu_unlock_plan_id(p->plan), "why", p->why, "blockers", notes(&p->blockers));
}

json_t *gdu_unlock_check_json(const gdu_unlock_check *c)
{
    const gdu_module_env *e = &c->env;
    json_t *gpus = json_array(), *pairs = json_array();
    for (size_t i = 0; i < c->n_gpus; i++)
        json_array_append_new(gpus, gpu_json(&c->gpus[i]));
    for (size_t i = 0; i < c->n_pairs; i++)
        json_array_append_new(pairs, pair_json(&c->pairs[i]));
    json_t *machine = json_pack(
        "{s:b, s:o, s:o, s:o, s:o, s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "driver_loaded",
        c->driver_loaded, "open_module", tri(c->open_module), "driver_version",
        str_or_null(c->version), "kernel", str_or_null(c->kernel), "kernel_headers",
        str_or_null(e->headers), "iommu", gdu_iommu_mode_name(c->iommu), "iommu_cmdline",
        str_or_null(c->iommu_cmdline), "secure_boot", tri(e->secure_boot), "signing_key",
        tri(e->signing_key), "dkms", str_or_null(e->dkms), "cc", str_or_null(e->cc), "make",
        str_or_null(e->make), "uefi", tri(e->efi));
    return json_pack("{s:s, s:s, s:b, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "plan",
                     gdu_unlock_plan_id(c->plan), "why", c->why, "live", c->live, "machine",
                     machine, "gpus", gpus, "pairs", pairs, "blockers", notes(&c->blockers),
                     "missing", notes(&c->missing), "registry_dwords",
                     str_or_null(c->registry_dwords), "next", str_or_null(c->next));
}

json_t *gdu_unlock_status_json(const gdu_unlock_status *st)
{
    json_t *log = json_array();
    for (size_t i = 0; i < st->n_log; i++)
        json_array_append_new(log, gdu_json_text(st->log[i]));
    json_t *dkms = st->dkms_registered
                       ? json_sprintf(GDU_UNLOCK_DKMS_NAME "/%s", st->installed_version)
                       : json_null();
    return json_pack("{s:b, s:o, s:o, s:o, s:o, s:o, s:o, s:b, s:o, s:o, s:s, s:o, s:o, s:o}",
                     "loaded", st->loaded, "version", str_or_null(st->version), "srcversion",
                     str_or_null(st->srcversion), "installed", str_or_null(st->installed), "plan",
                     str_or_null(st->plan), "installed_version", str_or_null(st->installed_version),
                     "installed_srcversion", str_or_null(st->installed_srcversion),
                     "dkms_registered", st->dkms_registered, "dkms_module", dkms, "patched",
                     tri(st->patched), "why", st->patched_why, "options", str_or_null(st->options),
                     "kernel_log", log, "kernel_log_error", str_or_null(st->log_why));
}

json_t *gdu_unlock_install_json(const gdu_unlock_install_report *r)
{
    json_t *steps = json_array();
    for (size_t i = 0; i < r->n_steps; i++)
        json_array_append_new(steps, gdu_json_text(r->steps[i]));
    return json_pack("{s:s, s:o, s:o, s:o, s:o}", "plan", gdu_unlock_plan_id(r->plan), "version",
                     str_or_null(r->version), "kernel", str_or_null(r->kernel), "steps", steps,
                     "next", str_or_null(r->next));
}

json_t *gdu_unlock_build_json(const gdu_unlock_build_args *a, const gdu_unlock_build_result *r)
{
    return json_pack("{s:s, s:s, s:s, s:o, s:b}", "status", r->status, "version", r->version, "out",
                     a->out, "patch", r->patch[0] ? json_string(r->patch) : json_null(),
                     "kernel_built", r->kernel_built);
}
