/* The text forms of --check, --status and --install / --revert, for
 * people (unlock_json.c has the JSON ones). Every text from outside (names,
 * paths, kernel log lines) is escaped: it may hold bytes that would drive
 * the terminal. */
#include "p2p/p2p_report.h"
#include "unlock/unlock_run.h"
#include "util/text.h"
#include "util/units.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* before, text escaped, after. */
static void put(FILE *out, const char *before, const char *text, const char *after)
{
    char *shown = gdu_text_escaped(text, strlen(text));
    fprintf(out, "%s%s%s", before, shown ? shown : "", after);
    free(shown);
}

static void print_notes(FILE *out, const char *title, const gdu_unlock_notes *n)
{
    if (n->n == 0)
        return;
    fprintf(out, "%s\n", title);
    for (size_t i = 0; i < n->n; i++) {
        put(out, "  - ", n->note[i].fact, "\n");
        put(out, "    fix: ", n->note[i].fix, "\n");
    }
}

static const char *tri_word(gdu_tri t, const char *yes, const char *no)
{
    return t == GDU_TRI_YES ? yes : t == GDU_TRI_NO ? no : "unknown";
}

/* What the plan reads of the machine: module, kernel, build tools, Secure
 * Boot, IOMMU. */
static void print_machine(FILE *out, const gdu_unlock_check *c)
{
    const gdu_module_env *e = &c->env;
    fprintf(out, "machine:\n");
    fprintf(out, "  module       %s%s%s\n",
            !c->driver_loaded ? "none loaded" : tri_word(c->open_module, "open", "proprietary"),
            c->version[0] ? " " : "", c->version);
    put(out, "  kernel       ", c->kernel[0] ? c->kernel : "unknown", "\n");
    put(out, "  headers      ",
        e->headers[0]                  ? e->headers
        : e->has_headers == GDU_TRI_NO ? "none"
                                       : "unknown",
        "\n");
    put(out, "  DKMS         ", e->dkms[0] ? e->dkms : "none", "\n");
    fprintf(out, "  compiler     %s, %s\n", e->cc[0] ? e->cc : "no cc",
            e->make[0] ? e->make : "no make");
    fprintf(out, "  Secure Boot  %s%s\n", tri_word(e->secure_boot, "on", "off"),
            e->secure_boot == GDU_TRI_YES
                ? (e->signing_key == GDU_TRI_YES ? " (DKMS signing key present)"
                                                 : " (no DKMS signing key)")
                : "");
    fprintf(out, "  IOMMU        %s%s%s%s\n", gdu_iommu_mode_name(c->iommu),
            c->iommu_cmdline[0] ? " (" : "", c->iommu_cmdline, c->iommu_cmdline[0] ? ")" : "");
}

static void print_gpu(FILE *out, const gdu_unlock_gpu *g)
{
    char b1[32], b2[32], b3[32], cc[16] = "?";
    if (g->cc_major)
        snprintf(cc, sizeof cc, "%d.%d", g->cc_major, g->cc_minor);
    fprintf(out, "GPU%d %s ", g->index, g->bdf);
    put(out, "", g->name[0] ? g->name : "(name unknown)", "");
    fprintf(out, " (%s, compute %s): %s\n", gdu_chip_family_name(g->family), cc,
            gdu_unlock_plan_name(g->plan));
    fprintf(out, "  BAR1 %s, video memory %s, Resizable BAR up to %s; display: %s\n",
            g->bar1 ? gdu_format_bytes(g->bar1, b1, sizeof b1) : "?",
            g->memory ? gdu_format_bytes(g->memory, b2, sizeof b2) : "?",
            g->rebar_max ? gdu_format_bytes(g->rebar_max, b3, sizeof b3) : "?",
            g->display[0] ? g->display : "none");
    put(out, "  why: ", g->why, "\n");
}

static void print_pair(FILE *out, const gdu_unlock_pair *p)
{
    fprintf(out, "GPU%d<->GPU%d: %s\n", p->a, p->b, gdu_unlock_plan_name(p->plan));
    fprintf(out, "  path %s, root complexes %s / %s, ACS %s, P2P now: %s\n",
            gdu_path_kind_name(p->path.kind), p->root_a[0] ? p->root_a : "?",
            p->root_b[0] ? p->root_b : "?",
            p->acs_redirect == GDU_TRI_YES  ? "redirects"
            : p->acs_redirect == GDU_TRI_NO ? "no redirect"
                                            : "unknown (run as root)",
            p->works == GDU_TRI_YES ? p->link : tri_word(p->works, "yes", "no"));
    put(out, "  why: ", p->why, "\n");
}

void gdu_unlock_print_check(FILE *out, const gdu_unlock_check *c)
{
    fprintf(out, "P2P unlock plan: %s\n", gdu_unlock_plan_name(c->plan));
    put(out, "  why: ", c->why, "\n");
    print_machine(out, c);
    for (size_t i = 0; i < c->n_gpus; i++)
        print_gpu(out, &c->gpus[i]);
    for (size_t i = 0; i < c->n_pairs; i++)
        print_pair(out, &c->pairs[i]);
    print_notes(out, "blocking:", &c->blockers);
    print_notes(out, "missing for --build / --install:", &c->missing);
    if (c->registry_dwords[0])
        fprintf(out, "registry keys: NVreg_RegistryDwords=\"%s\"\n", c->registry_dwords);
    if (c->next[0])
        fprintf(out, "next: %s\n", c->next);
}

void gdu_unlock_print_build(FILE *out, const gdu_unlock_build_args *a,
                            const gdu_unlock_build_result *r)
{
    put(out, "built ", r->version, "");
    put(out, " into ", a->out, "\n");
    if (r->patch[0])
        put(out, "  the edits: ", r->patch, "\n");
    put(out, "next: ",
        r->kernel_built ? "sudo gdunlock p2p unlock --install --out DIR"
                        : "built without the kernel modules (--no-kernel): nothing to "
                          "install",
        "\n");
}

void gdu_unlock_print_steps(FILE *out, const gdu_unlock_install_report *r, const char *what)
{
    fprintf(out, "%s%s%s:\n", what, r->version[0] ? " " : "", r->version);
    for (size_t i = 0; i < r->n_steps; i++)
        put(out, "  - ", r->steps[i], "\n");
    if (r->n_steps == 0)
        fprintf(out, "  (nothing to do)\n");
    if (r->next[0])
        put(out, "next: ", r->next, "\n");
}

static void print_status(FILE *out, const gdu_unlock_status *st)
{
    fprintf(out, "nvidia module: %s%s%s%s%s\n", st->loaded ? "loaded" : "not loaded",
            st->version[0] ? ", version " : "", st->version,
            st->srcversion[0] ? ", srcversion " : "", st->srcversion);
    fprintf(out, "gdunlock's unlock: %s%s%s%s%s\n",
            st->installed[0] ? st->installed : "not installed", st->plan[0] ? " (" : "", st->plan,
            st->plan[0] ? ")" : "",
            st->dkms_registered ? ", registered with DKMS as " GDU_UNLOCK_DKMS_NAME : "");
    fprintf(out, "running: %s\n",
            st->patched == GDU_TRI_YES  ? "gdunlock's unlock"
            : st->patched == GDU_TRI_NO ? "the stock module"
                                        : "unknown");
    put(out, "  why: ", st->patched_why, "\n");
    if (st->options[0])
        put(out, "options: ", st->options, "\n");
    fprintf(out, "kernel log (P2P lines):\n");
    for (size_t i = 0; i < st->n_log; i++)
        put(out, "  ", st->log[i], "\n");
    if (st->n_log == 0)
        put(out, "  ", st->log_why[0] ? st->log_why : "none", "\n");
}

void gdu_unlock_print_status_report(FILE *out, const gdu_unlock_target *t)
{
    gdu_unlock_status st;
    gdu_unlock_status_read(t, &st);
    print_status(out, &st);
    gdu_p2p_report *r = malloc(sizeof *r);
    char why[256];
    fprintf(out, "\n");
    if (r != NULL && gdu_unlock_matrix(t, r, why, sizeof why) == 0)
        gdu_p2p_print_report(out, r, 0);
    else
        put(out, "P2P matrix: ", r != NULL ? why : "out of memory", "\n");
    free(r);
}
