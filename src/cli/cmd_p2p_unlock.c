/* gdunlock p2p unlock: what this machine needs for GeForce BAR1 P2P
 * (--check), and building, installing, reverting and reading back the
 * unlock (src/unlock). */
#include "cli/cli_error.h"
#include "cli/cli_json.h"
#include "cli/cli_options.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "p2p/p2p_report.h"
#include "unlock/unlock_run.h"
#include "util/text.h"
#include "util/units.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NAME "p2p unlock"

enum action { CHECK, BUILD, INSTALL, REVERT, STATUS };

struct options {
    enum action action;
    int actions_given;
    const char *sysroot, *source, *headers, *out;
    bool no_kernel;
};

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: gdunlock p2p unlock [--check|--build|--install|--revert|--status] [--json]\n"
            "                           [--sysroot DIR] [--out DIR] [--source DIR|TARBALL]\n"
            "                           [--kernel-headers DIR] [--no-kernel]\n"
            "\n"
            "GPU-to-GPU P2P for GeForce cards, which NVIDIA's driver withholds: what this\n"
            "machine needs, and the open kernel module of the installed version with\n"
            "gdunlock's BAR1 P2P edits, through DKMS (docs/p2p-unlock.md).\n"
            "\n"
            "  --check      (the default) per GPU and per pair, the plan and why: nothing to do,\n"
            "               registry keys only, patched module, or impossible here (the blocking\n"
            "               fact and its fix); from the module (open or proprietary, version),\n"
            "               the chip family, BAR1 against video memory, a display on the GPU,\n"
            "               the IOMMU, ACS and root complexes on the path, Secure Boot, kernel\n"
            "               headers, DKMS and a compiler\n"
            "  --build      get the sources of exactly the installed version, apply the edits,\n"
            "               write them as one .patch and build the modules into --out DIR\n"
            "               (default ./gdunlock-p2p-build); nothing outside DIR is written\n"
            "  --source DIR|TARBALL  the open module's sources to use (on a machine without\n"
            "               the driver, their own version is built)\n"
            "  --kernel-headers DIR  build against these headers, not the running kernel's\n"
            "  --no-kernel  stop after the kernel-independent part (the edited RM core)\n"
            "  --install    (root) install what the plan needs: the build in --out DIR through\n"
            "               DKMS as " GDU_UNLOCK_DKMS_NAME " (the stock package stays), and\n"
            "               the module options in " GDU_UNLOCK_MODPROBE_CONF "; then says\n"
            "               how to load it\n"
            "  --revert     (root) back to the stock module and options; always possible, also\n"
            "               after an interrupted install\n"
            "  --status     which module runs (gdunlock's or the stock one), what gdunlock\n"
            "               installed, the driver's P2P lines from the kernel log, and the\n"
            "               pairs' P2P verdicts (as 'gdunlock p2p --no-bench')\n"
            "  --sysroot DIR  a machine captured with 'gdunlock doctor --capture DIR' (--check,\n"
            "               --status), or the tree --install and --revert write into instead of\n"
            "               / (default: $GDUNLOCK_UNLOCK_ROOT, else the machine itself)\n"
            "  --json       machine-readable output\n"
            "\n"
            "exit: 0 done (--check whatever the plan), 1 a step failed or was refused (the\n"
            "message says why and the fix; a failed --install undid its steps), 64 bad\n"
            "arguments, 66 --sysroot or --out missing, 69 a tool missing (DKMS, headers,\n"
            "compiler, mokutil, the build program), 70 internal error, 77 not root; --build\n"
            "passes on the build program's status (65 an edit did not apply, 66 no source of\n"
            "that version, 69 a tool missing, 70 the compile failed, 73/74 cannot write DIR)\n");
}

static int option(void *ctx, int opt, const char *arg)
{
    struct options *o = ctx;
    switch (opt) {
    case 'c':
    case 'b':
    case 'i':
    case 'r':
    case 's':
        o->action = opt == 'c'   ? CHECK
                    : opt == 'b' ? BUILD
                    : opt == 'i' ? INSTALL
                    : opt == 'r' ? REVERT
                                 : STATUS;
        if (++o->actions_given > 1)
            return gdu_cli_fail(NAME, GDU_EXIT_USAGE, NULL, NULL,
                                "give one of --check, --build, --install, --revert, --status");
        break;
    case 'S':
        o->source = arg;
        break;
    case 'k':
        o->headers = arg;
        break;
    case 'n':
        o->no_kernel = true;
        break;
    case 'o':
        o->out = arg;
        break;
    case 'R':
        o->sysroot = arg;
        break;
    }
    return GDU_CLI_CONTINUE;
}

static int parse(int argc, char **argv, struct options *o)
{
    static const struct option longs[] = {
        {"check", no_argument, NULL, 'c'},
        {"build", no_argument, NULL, 'b'},
        {"install", no_argument, NULL, 'i'},
        {"revert", no_argument, NULL, 'r'},
        {"status", no_argument, NULL, 's'},
        {"source", required_argument, NULL, 'S'},
        {"kernel-headers", required_argument, NULL, 'k'},
        {"no-kernel", no_argument, NULL, 'n'},
        {"out", required_argument, NULL, 'o'},
        {"sysroot", required_argument, NULL, 'R'},
        GDU_CLI_JSON_OPTION,
        GDU_CLI_HELP_OPTION,
        {NULL, 0, NULL, 0},
    };
    static const gdu_cli_command cmd = {
        .name = NAME, .usage = usage, .shortopts = "", .longs = longs};
    *o = (struct options){.action = CHECK};
    int first;
    int rc = gdu_cli_parse(&cmd, argc, argv, option, o, &first);
    if (rc != GDU_CLI_CONTINUE)
        return rc;
    if ((o->source || o->headers || o->no_kernel) && o->action != BUILD)
        return gdu_cli_fail(NAME, GDU_EXIT_USAGE, NULL, NULL,
                            "--source, --kernel-headers and --no-kernel go with --build");
    if (o->out && o->action != BUILD && o->action != INSTALL)
        return gdu_cli_fail(NAME, GDU_EXIT_USAGE, NULL, NULL,
                            "--out goes with --build or --install");
    if (o->sysroot == NULL && o->action != BUILD) {
        const char *env = getenv("GDUNLOCK_UNLOCK_ROOT");
        o->sysroot = env && env[0] ? env : NULL;
    }
    if (o->sysroot && o->action == BUILD)
        return gdu_cli_fail(NAME, GDU_EXIT_USAGE, NULL, NULL,
                            "--build takes the version from the running driver or --source, not "
                            "--sysroot");
    return GDU_CLI_CONTINUE;
}

/* ---- rendering ---- */

/* before, text escaped (it may hold outside bytes), after. */
static void put(const char *before, const char *text, const char *after)
{
    char *shown = gdu_text_escaped(text, strlen(text));
    printf("%s%s%s", before, shown ? shown : "", after);
    free(shown);
}

static void print_notes(const char *title, const gdu_unlock_notes *n)
{
    if (n->n == 0)
        return;
    printf("%s\n", title);
    for (size_t i = 0; i < n->n; i++) {
        put("  - ", n->note[i].fact, "\n");
        put("    fix: ", n->note[i].fix, "\n");
    }
}

static const char *tri_word(gdu_tri t, const char *yes, const char *no)
{
    return t == GDU_TRI_YES ? yes : t == GDU_TRI_NO ? no : "unknown";
}

static void print_check(const gdu_unlock_check *c)
{
    const gdu_module_env *e = &c->env;
    char b1[32], b2[32], b3[32];
    printf("P2P unlock plan: %s\n", gdu_unlock_plan_name(c->plan));
    put("  why: ", c->why, "\n");
    printf("machine:\n");
    printf("  module       %s%s%s\n",
           !c->driver_loaded ? "none loaded" : tri_word(c->open_module, "open", "proprietary"),
           c->version[0] ? " " : "", c->version);
    put("  kernel       ", c->kernel[0] ? c->kernel : "unknown", "\n");
    put("  headers      ",
        e->headers[0]                  ? e->headers
        : e->has_headers == GDU_TRI_NO ? "none"
                                       : "unknown",
        "\n");
    put("  DKMS         ", e->dkms[0] ? e->dkms : "none", "\n");
    printf("  compiler     %s, %s\n", e->cc[0] ? e->cc : "no cc", e->make[0] ? e->make : "no make");
    printf("  Secure Boot  %s%s\n", tri_word(e->secure_boot, "on", "off"),
           e->secure_boot == GDU_TRI_YES
               ? (e->signing_key == GDU_TRI_YES ? " (DKMS signing key present)"
                                                : " (no DKMS signing key)")
               : "");
    printf("  IOMMU        %s%s%s%s\n", gdu_iommu_mode_name(c->iommu),
           c->iommu_cmdline[0] ? " (" : "", c->iommu_cmdline, c->iommu_cmdline[0] ? ")" : "");
    for (size_t i = 0; i < c->n_gpus; i++) {
        const gdu_unlock_gpu *g = &c->gpus[i];
        char cc[16] = "?";
        if (g->cc_major)
            snprintf(cc, sizeof cc, "%d.%d", g->cc_major, g->cc_minor);
        printf("GPU%d %s ", g->index, g->bdf);
        put("", g->name[0] ? g->name : "(name unknown)", "");
        printf(" (%s, compute %s): %s\n", gdu_chip_family_name(g->family), cc,
               gdu_unlock_plan_name(g->plan));
        printf("  BAR1 %s, video memory %s, Resizable BAR up to %s; display: %s\n",
               g->bar1 ? gdu_format_bytes(g->bar1, b1, sizeof b1) : "?",
               g->memory ? gdu_format_bytes(g->memory, b2, sizeof b2) : "?",
               g->rebar_max ? gdu_format_bytes(g->rebar_max, b3, sizeof b3) : "?",
               g->display[0] ? g->display : "none");
        put("  why: ", g->why, "\n");
    }
    for (size_t i = 0; i < c->n_pairs; i++) {
        const gdu_unlock_pair *p = &c->pairs[i];
        printf("GPU%d<->GPU%d: %s\n", p->a, p->b, gdu_unlock_plan_name(p->plan));
        printf("  path %s, root complexes %s / %s, ACS %s, P2P now: %s\n",
               gdu_path_kind_name(p->path.kind), p->root_a[0] ? p->root_a : "?",
               p->root_b[0] ? p->root_b : "?",
               p->acs_redirect == GDU_TRI_YES  ? "redirects"
               : p->acs_redirect == GDU_TRI_NO ? "no redirect"
                                               : "unknown (run as root)",
               p->works == GDU_TRI_YES ? p->link : tri_word(p->works, "yes", "no"));
        put("  why: ", p->why, "\n");
    }
    print_notes("blocking:", &c->blockers);
    print_notes("missing for --build / --install:", &c->missing);
    if (c->registry_dwords[0])
        printf("registry keys: NVreg_RegistryDwords=\"%s\"\n", c->registry_dwords);
    if (c->next[0])
        printf("next: %s\n", c->next);
}

static void print_steps(const gdu_unlock_install_report *r, const char *what)
{
    printf("%s%s%s:\n", what, r->version[0] ? " " : "", r->version);
    for (size_t i = 0; i < r->n_steps; i++)
        put("  - ", r->steps[i], "\n");
    if (r->n_steps == 0)
        printf("  (nothing to do)\n");
    if (r->next[0])
        put("next: ", r->next, "\n");
}

static void print_status(const gdu_unlock_status *st)
{
    printf("nvidia module: %s%s%s%s%s\n", st->loaded ? "loaded" : "not loaded",
           st->version[0] ? ", version " : "", st->version,
           st->srcversion[0] ? ", srcversion " : "", st->srcversion);
    printf("gdunlock's unlock: %s%s%s%s%s\n", st->installed[0] ? st->installed : "not installed",
           st->plan[0] ? " (" : "", st->plan, st->plan[0] ? ")" : "",
           st->dkms_registered ? ", registered with DKMS as " GDU_UNLOCK_DKMS_NAME : "");
    printf("running: %s\n", st->patched == GDU_TRI_YES  ? "gdunlock's unlock"
                            : st->patched == GDU_TRI_NO ? "the stock module"
                                                        : "unknown");
    put("  why: ", st->patched_why, "\n");
    if (st->options[0])
        put("options: ", st->options, "\n");
    printf("kernel log (P2P lines):\n");
    for (size_t i = 0; i < st->n_log; i++)
        put("  ", st->log[i], "\n");
    if (st->n_log == 0)
        put("  ", st->log_why[0] ? st->log_why : "none", "\n");
}

/* ---- actions ---- */

static int report_error(const gdu_unlock_error *e)
{
    return gdu_cli_fail(NAME, e->exit_code, e->code, e->fix[0] ? e->fix : NULL, "%s", e->message);
}

/* The snapshot of the machine (or capture) and its plan. */
static int take_check(const char *sysroot, gdu_unlock_check *c)
{
    gdu_sysroot sr;
    char why[512] = "path too long";
    if (gdu_sysroot_init(&sr, sysroot) != 0 || gdu_sysroot_check(&sr, why, sizeof why) != 0)
        return gdu_cli_fail(NAME, GDU_EXIT_NOINPUT, NULL, NULL, "--sysroot %s", why);
    gdu_snapshot *s = malloc(sizeof *s);
    if (s == NULL) {
        gdu_sysroot_free(&sr);
        return gdu_cli_fail(NAME, GDU_EXIT_SOFTWARE, NULL, NULL, "out of memory");
    }
    gdu_snapshot_take(&sr, NULL, 0, s);
    gdu_unlock_check_run(s, c);
    gdu_snapshot_free(s);
    free(s);
    gdu_sysroot_free(&sr);
    return 0;
}

static void target_of(const struct options *o, gdu_unlock_target *t)
{
    memset(t, 0, sizeof *t);
    if (o->sysroot && strcmp(o->sysroot, "/") != 0) {
        snprintf(t->root, sizeof t->root, "%s", o->sysroot);
        size_t n = strlen(t->root);
        while (n > 1 && t->root[n - 1] == '/')
            t->root[--n] = '\0';
    }
    /* A tree standing for the machine is the caller's to write; the
     * machine itself needs root. */
    t->privileged = t->root[0] != '\0' || geteuid() == 0;
}

static int do_check(const struct options *o, gdu_unlock_check *c)
{
    int rc = take_check(o->sysroot, c);
    if (rc != 0)
        return rc;
    if (gdu_cli_json())
        return gdu_cli_print_report(NAME, gdu_unlock_check_json(c), "gdunlock-p2p-unlock-check/1",
                                    GDU_EXIT_OK, 0);
    print_check(c);
    return GDU_EXIT_OK;
}

static int do_build(const struct options *o, gdu_unlock_check *c)
{
    gdu_unlock_error err;
    char program[4096];
    if (gdu_unlock_build_program(program, sizeof program, &err) != 0)
        return report_error(&err);
    int rc = take_check(NULL, c);
    if (rc != 0)
        return rc;
    if (c->driver_loaded && c->open_module == GDU_TRI_NO)
        return gdu_cli_fail(
            NAME, GDU_EXIT_UNAVAILABLE, "proprietary_module",
            c->blockers.n ? c->blockers.note[0].fix : NULL,
            "the loaded module is NVIDIA's proprietary one (%s): its core is closed "
            "and cannot be edited",
            c->version);
    if (!c->driver_loaded && o->source == NULL)
        return gdu_cli_fail(NAME, GDU_EXIT_UNAVAILABLE, "no_driver",
                            "load the NVIDIA open module, or name the sources with --source",
                            "no NVIDIA module is loaded, so the version to build is unknown");
    gdu_unlock_build_args a = {.program = program,
                               .out = o->out ? o->out : "gdunlock-p2p-build",
                               .source = o->source,
                               .kernel_headers = o->headers,
                               .version = c->driver_loaded ? c->version : NULL,
                               .no_kernel = o->no_kernel};
    gdu_unlock_build_result r;
    if (gdu_unlock_build(&a, &r, &err) != 0)
        return report_error(&err);
    if (gdu_cli_json())
        return gdu_cli_print_report(NAME,
                                    json_pack("{s:s, s:s, s:s, s:o, s:b}", "status", r.status,
                                              "version", r.version, "out", a.out, "patch",
                                              r.patch[0] ? json_string(r.patch) : json_null(),
                                              "kernel_built", r.kernel_built),
                                    "gdunlock-p2p-unlock-build/1", GDU_EXIT_OK, 0);
    put("built ", r.version, "");
    put(" into ", a.out, "\n");
    if (r.patch[0])
        put("  the edits: ", r.patch, "\n");
    put("next: ",
        r.kernel_built ? "sudo gdunlock p2p unlock --install --out DIR"
                       : "built without the kernel modules (--no-kernel): nothing to "
                         "install",
        "\n");
    return GDU_EXIT_OK;
}

static int do_change(const struct options *o, gdu_unlock_check *c)
{
    gdu_unlock_target t;
    target_of(o, &t);
    gdu_unlock_error err;
    gdu_unlock_install_report *r = malloc(sizeof *r);
    if (r == NULL)
        return gdu_cli_fail(NAME, GDU_EXIT_SOFTWARE, NULL, NULL, "out of memory");
    int rc;
    if (o->action == INSTALL) {
        rc = take_check(o->sysroot, c);
        if (rc == 0)
            rc = gdu_unlock_install(&t, c, o->out, r, &err) == 0 ? GDU_EXIT_OK : report_error(&err);
    } else
        rc = gdu_unlock_revert(&t, r, &err) == 0 ? GDU_EXIT_OK : report_error(&err);
    if (rc == GDU_EXIT_OK) {
        if (gdu_cli_json())
            rc = gdu_cli_print_report(NAME, gdu_unlock_install_json(r),
                                      o->action == INSTALL ? "gdunlock-p2p-unlock-install/1"
                                                           : "gdunlock-p2p-unlock-revert/1",
                                      GDU_EXIT_OK, 0);
        else
            print_steps(r, o->action == INSTALL ? "installed" : "reverted");
    }
    free(r);
    return rc;
}

static int do_status(const struct options *o)
{
    gdu_unlock_target t;
    target_of(o, &t);
    if (gdu_cli_json())
        return gdu_cli_print_report(NAME, gdu_unlock_status_report_json(t.root),
                                    "gdunlock-p2p-unlock-status/1", GDU_EXIT_OK, 0);
    gdu_unlock_status st;
    gdu_unlock_status_read(&t, &st);
    print_status(&st);
    gdu_p2p_report *r = malloc(sizeof *r);
    char why[256];
    printf("\n");
    if (r != NULL && gdu_unlock_matrix(&t, r, why, sizeof why) == 0)
        gdu_p2p_print_report(stdout, r, 0);
    else
        put("P2P matrix: ", r != NULL ? why : "out of memory", "\n");
    free(r);
    return GDU_EXIT_OK;
}

int gdu_cmd_p2p_unlock(int argc, char **argv)
{
    struct options o;
    int rc = parse(argc, argv, &o);
    if (rc != GDU_CLI_CONTINUE)
        return rc;
    if (o.action == STATUS)
        return do_status(&o);
    gdu_unlock_check *c = malloc(sizeof *c);
    if (c == NULL)
        return gdu_cli_fail(NAME, GDU_EXIT_SOFTWARE, NULL, NULL, "out of memory");
    rc = o.action == CHECK   ? do_check(&o, c)
         : o.action == BUILD ? do_build(&o, c)
                             : do_change(&o, c);
    free(c);
    return rc;
}
