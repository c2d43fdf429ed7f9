/* gdunlock report [PATH] [--out FILE] [--sysroot DIR] [--json]: the evidence
 * of this machine in one file to attach to an issue (report/report_bundle.h). */
#include "cli/cli_error.h"
#include "cli/cli_json.h"
#include "cli/cli_options.h"
#include "cli/commands.h"
#include "util/exit_codes.h"
#include "probe/sysroot.h"
#include "util/json_text.h"
#include "report/report_bundle.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: gdunlock report [PATH] [--out FILE] [--force] [--sysroot DIR] [--json]\n"
            "\n"
            "Gathers what gdunlock sees on this machine into one file to attach to an issue\n"
            "(a GeForce user's report is what the project lacks): doctor's capture and report,\n"
            "gdunlock verify --json on PATH (the shim's report and nvidia-fs stats before and\n"
            "after it inside), libcufile's log of that run, the kernel's log lines about the\n"
            "driver, nvidia-fs, NVMe and P2PDMA, and the driver's parameters and nvidia-fs stats\n"
            "as doctor's snapshot read them. Host names, user names and paths, UUIDs and serial\n"
            "numbers are scrubbed. Replay it with\n"
            "  tar xf FILE && gdunlock doctor --sysroot gdunlock-report/capture\n"
            "\n"
            "  PATH            the file verify writes and removes, on the storage to test\n"
            "                  (default: gdunlock-report.verify here); as verify, an existing\n"
            "                  non-empty file is refused\n"
            "  --out FILE      the bundle (default: gdunlock-report-DATE.tar here); made\n"
            "                  anew, never written through a symbolic link\n"
            "  --force         replace a file (or link) already at FILE\n"
            "  --sysroot DIR   bundle a capture instead (its snapshot only, no verify)\n"
            "  --json          machine-readable summary\n"
            "  -h, --help      this text\n"
            "\n"
            "exit status: 0 written, 64 bad arguments (or FILE exists, without --force),\n"
            "66 sysroot missing, 74 the bundle could not be written\n");
}

struct options {
    const char *out, *sysroot;
    bool force;
};

static int option(void *ctx, int opt, const char *arg)
{
    struct options *o = ctx;
    if (opt == 'o')
        o->out = arg;
    else if (opt == 's')
        o->sysroot = arg;
    else if (opt == 'f')
        o->force = true;
    return GDU_CLI_CONTINUE;
}

/* What was written, as JSON or text. */
static int render(const char *out, const gdu_bundle_result *res)
{
    if (gdu_cli_json()) {
        json_t *doc =
            json_pack("{s:o, s:i, s:I, s:I, s:o}", "bundle", gdu_json_text(out), "verify_exit",
                      res->verify_exit, "files_scrubbed", (json_int_t)res->files_scrubbed,
                      "replaced", (json_int_t)res->replaced, "notes", gdu_json_text(res->notes));
        return gdu_cli_print_report("report", doc, "gdunlock-report/1", GDU_EXIT_OK, 0);
    }
    printf("gdunlock report: wrote %s (%zu values scrubbed in %ld files)\n", out, res->replaced,
           res->files_scrubbed);
    if (res->verify_exit >= 0)
        printf("  verify exited %d (its JSON is in the bundle)\n", res->verify_exit);
    if (res->notes[0])
        printf("  not gathered: %s\n", res->notes);
    printf("  attach it to an issue at the project; replay it with:\n"
           "  tar xf %s && gdunlock doctor --sysroot gdunlock-report/capture\n",
           out);
    return GDU_EXIT_OK;
}

int gdu_cmd_report(int argc, char **argv)
{
    static const struct option longs[] = {
        {"out", required_argument, NULL, 'o'},
        {"sysroot", required_argument, NULL, 's'},
        {"force", no_argument, NULL, 'f'},
        GDU_CLI_JSON_OPTION,
        GDU_CLI_HELP_OPTION,
        {NULL, 0, NULL, 0},
    };
    static const gdu_cli_command cmd = {.name = "report",
                                        .usage = usage,
                                        .shortopts = "o:",
                                        .longs = longs,
                                        .min_operands = 0,
                                        .max_operands = 1,
                                        .operands_wanted = "one PATH at most"};
    struct options o = {0};
    int first;
    int parsed = gdu_cli_parse(&cmd, argc, argv, option, &o, &first);
    if (parsed != GDU_CLI_CONTINUE)
        return parsed;
    if (o.sysroot != NULL && first < argc)
        return gdu_cli_fail("report", GDU_EXIT_USAGE, NULL, NULL,
                            "with --sysroot nothing is verified: give no PATH");
    gdu_sysroot sr;
    char why[512] = "path too long";
    if (gdu_sysroot_init(&sr, o.sysroot) != 0 || gdu_sysroot_check(&sr, why, sizeof why) != 0)
        return gdu_cli_fail("report", GDU_EXIT_NOINPUT, NULL, NULL, "--sysroot %s", why);
    gdu_sysroot_free(&sr);
    char name[64], exe[PATH_MAX];
    if (o.out == NULL) {
        time_t now = time(NULL);
        struct tm tm;
        strftime(name, sizeof name, "gdunlock-report-%Y%m%d-%H%M%S.tar", gmtime_r(&now, &tm));
        o.out = name;
    }
    /* Another stats file (a copy, or a test's): GDUNLOCK_NVFS_STATS, as for verify. */
    const char *stats = getenv("GDUNLOCK_NVFS_STATS");
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    gdu_bundle_request req = {.sysroot = o.sysroot,
                              .target = o.sysroot      ? NULL
                                        : first < argc ? argv[first]
                                                       : "gdunlock-report.verify",
                              .exe = exe,
                              .out = o.out,
                              .nvfs_stats = stats && *stats ? stats : NULL,
                              .force = o.force};
    gdu_bundle_result res;
    int made = gdu_bundle_make(&req, &res, why, sizeof why);
    if (made != 0)
        return gdu_cli_fail("report", made == -EEXIST ? GDU_EXIT_USAGE : GDU_EXIT_IOERR, NULL, NULL,
                            "%s", why);
    return render(o.out, &res);
}
