/* gdunlock p2p unlock: what this machine needs for GeForce BAR1 P2P
 * (--check), and building, installing, reverting and reading back the
 * unlock (src/unlock). */
#include "cli/cli_error.h"
#include "cli/cli_json.h"
#include "cli/cli_options.h"
#include "cli/commands.h"
#include "util/exit_codes.h"
#include "unlock/unlock_run.h"

#include <stdio.h>
#include <stdlib.h>

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

static int report_error(const gdu_unlock_error *e)
{
    return gdu_cli_fail(NAME, e->exit_code, e->code, e->fix[0] ? e->fix : NULL, "%s", e->message);
}

static int do_check(const struct options *o, gdu_unlock_check *c)
{
    gdu_unlock_error err;
    if (gdu_unlock_check_machine(o->sysroot, c, &err) != 0)
        return report_error(&err);
    if (gdu_cli_json())
        return gdu_cli_print_report(NAME, gdu_unlock_check_json(c), "gdunlock-p2p-unlock-check/1",
                                    GDU_EXIT_OK, 0);
    gdu_unlock_print_check(stdout, c);
    return GDU_EXIT_OK;
}

static int do_build(const struct options *o, gdu_unlock_check *c)
{
    gdu_unlock_build_args a = {.out = o->out ? o->out : "gdunlock-p2p-build",
                               .source = o->source,
                               .kernel_headers = o->headers,
                               .no_kernel = o->no_kernel};
    gdu_unlock_build_result r;
    gdu_unlock_error err;
    if (gdu_unlock_build_here(&a, c, &r, &err) != 0)
        return report_error(&err);
    if (gdu_cli_json())
        return gdu_cli_print_report(NAME, gdu_unlock_build_json(&a, &r),
                                    "gdunlock-p2p-unlock-build/1", GDU_EXIT_OK, 0);
    gdu_unlock_print_build(stdout, &a, &r);
    return GDU_EXIT_OK;
}

static int do_change(const struct options *o, gdu_unlock_check *c)
{
    gdu_unlock_target t;
    gdu_unlock_target_of(o->sysroot, &t);
    gdu_unlock_error err;
    gdu_unlock_install_report *r = malloc(sizeof *r);
    if (r == NULL)
        return gdu_cli_fail(NAME, GDU_EXIT_SOFTWARE, NULL, NULL, "out of memory");
    int ok = o->action == INSTALL ? gdu_unlock_check_machine(o->sysroot, c, &err) == 0 &&
                                        gdu_unlock_install(&t, c, o->out, r, &err) == 0
                                  : gdu_unlock_revert(&t, r, &err) == 0;
    int rc = ok ? GDU_EXIT_OK : report_error(&err);
    if (ok && gdu_cli_json())
        rc = gdu_cli_print_report(NAME, gdu_unlock_install_json(r),
                                  o->action == INSTALL ? "gdunlock-p2p-unlock-install/1"
                                                       : "gdunlock-p2p-unlock-revert/1",
                                  GDU_EXIT_OK, 0);
    else if (ok)
        gdu_unlock_print_steps(stdout, r, o->action == INSTALL ? "installed" : "reverted");
    free(r);
    return rc;
}

static int do_status(const struct options *o)
{
    gdu_unlock_target t;
    gdu_unlock_target_of(o->sysroot, &t);
    if (gdu_cli_json())
        return gdu_cli_print_report(NAME, gdu_unlock_status_report_json(t.root),
                                    "gdunlock-p2p-unlock-status/1", GDU_EXIT_OK, 0);
    gdu_unlock_print_status_report(stdout, &t);
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
