/* gdunlock doctor [PATH] [--sysroot DIR] [--capture DIR] [--json]: can
 * GPUDirect Storage and P2P work on this machine, why not, and the fix. */
#include "cli/cli_error.h"
#include "cli/cli_json.h"
#include "cli/cli_options.h"
#include "cli/commands.h"
#include "doctor/doctor_render.h"
#include "util/exit_codes.h"
#include "facts/capture.h"
#include "doctor/doctor.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *out)
{
    fprintf(
        out,
        "Usage: gdunlock doctor [PATH] [--sysroot DIR] [--capture DIR] [--json] [--progress]\n"
        "\n"
        "Says whether GPUDirect Storage and GPU P2P can work on this machine, exactly\n"
        "why not, and the fix. With PATH, the storage verdict is about that file or\n"
        "directory (its filesystem, block devices, NVMe and PCIe path); without it,\n"
        "about any NVMe drive.\n"
        "\n"
        "  --sysroot DIR   examine a captured machine: read /sys, /proc, /etc, /run under\n"
        "                  DIR and the live-driver answers from DIR/gdunlock-live.json\n"
        "  --capture DIR   also copy every file doctor read, and the live answers, into\n"
        "                  DIR (attach it to a bug report; replay with --sysroot DIR)\n"
        "  --json          machine-readable report (schema: docs/doctor-json.md)\n"
        "  --progress      say what is being probed on stderr even when it is not a terminal\n"
        "  -h, --help      this text\n"
        "\n"
        "exit status: 0 direct GDS possible now, 10 direct with gdunlock, 11 compat only,\n"
        "12 impossible, 13 unknown (evidence missing: the reasons say what to capture or run),\n"
        "69 no NVIDIA driver, 64 bad arguments (or a --capture DIR that is not empty),\n"
        "66 PATH or sysroot missing or --capture DIR cannot be created, 74 the report or\n"
        "the capture could not be written\n");
}

/* The path as the examined machine names it: resolved live, normalised in a sysroot. */
static int target_path(const char *arg, bool live, char *out, size_t len)
{
    if (live) {
        char real[PATH_MAX];
        if (realpath(arg, real) == NULL)
            return gdu_cli_fail("doctor", GDU_EXIT_NOINPUT, NULL, NULL,
                                "%s: %s (name an existing file or directory)", arg,
                                strerror(errno));
        snprintf(out, len, "%s", real);
        return 0;
    }
    if (arg[0] != '/')
        return gdu_cli_fail("doctor", GDU_EXIT_USAGE, NULL, NULL,
                            "with --sysroot, PATH must be "
                            "absolute on the captured machine (got '%s')",
                            arg);
    snprintf(out, len, "%s", arg);
    size_t n = strlen(out);
    while (n > 1 && out[n - 1] == '/')
        out[--n] = '\0';
    return 0;
}

struct doctor_args {
    const char *sysroot, *capture;
    bool progress;
};

static int option(void *ctx, int opt, const char *arg)
{
    struct doctor_args *a = ctx;
    if (opt == 's')
        a->sysroot = arg;
    else if (opt == 'c')
        a->capture = arg;
    else if (opt == 'p')
        a->progress = true;
    return GDU_CLI_CONTINUE;
}

/* --capture: the snapshot's files into capture, said on stderr. Returns 0,
 * or -1 when they could not be written. */
static int capture_into(const gdu_snapshot *sys, const char *capture)
{
    gdu_capture_stats st;
    char why[512];
    if (gdu_capture_write(sys, capture, &st, why, sizeof why) != 0) {
        gdu_cli_note("doctor", "capture failed: %s", why);
        return -1;
    }
    gdu_cli_note("doctor",
                 "captured %zu files and %zu links into %s (%zu absent, %zu "
                 "unreadable); replay with: gdunlock doctor --sysroot %s",
                 st.files, st.links, capture, st.missing, st.failed, capture);
    return 0;
}

/* The places doctor reads and writes, checked before anything is probed:
 * the sysroot (into sr), PATH (into path, when given) and the capture's
 * folder. Returns 0, or the exit status of the failure it reported. */
static int check_places(gdu_sysroot *sr, const char *sysroot, const char *capture, const char *arg,
                        char path[PATH_MAX])
{
    char why[512];
    if (gdu_sysroot_init(sr, sysroot) != 0)
        return gdu_cli_fail("doctor", GDU_EXIT_USAGE, NULL, NULL, "--sysroot path too long");
    int rc = 0, prepared = 0;
    if (gdu_sysroot_check(sr, why, sizeof why) != 0)
        rc = gdu_cli_fail("doctor", GDU_EXIT_NOINPUT, NULL, NULL, "--sysroot %s", why);
    else if (arg != NULL)
        rc = target_path(arg, sysroot == NULL, path, PATH_MAX);
    if (rc == 0 && capture != NULL)
        prepared = gdu_capture_prepare(capture, why, sizeof why);
    if (prepared != 0)
        rc = gdu_cli_fail("doctor", prepared == -EEXIST ? GDU_EXIT_USAGE : GDU_EXIT_NOINPUT, NULL,
                          NULL, "--capture %s", why);
    if (rc != 0)
        gdu_sysroot_free(sr);
    return rc;
}

int gdu_cmd_doctor(int argc, char **argv)
{
    static const struct option longs[] = {
        {"sysroot", required_argument, NULL, 's'},
        {"capture", required_argument, NULL, 'c'},
        {"progress", no_argument, NULL, 'p'},
        GDU_CLI_JSON_OPTION,
        GDU_CLI_HELP_OPTION,
        {NULL, 0, NULL, 0},
    };
    static const gdu_cli_command cmd = {.name = "doctor",
                                        .usage = usage,
                                        .shortopts = "",
                                        .longs = longs,
                                        .max_operands = 1,
                                        .operands_wanted = "one PATH at most"};
    struct doctor_args a = {.progress = isatty(STDERR_FILENO)};
    int first;
    int parsed = gdu_cli_parse(&cmd, argc, argv, option, &a, &first);
    if (parsed != GDU_CLI_CONTINUE)
        return parsed;
    const char *sysroot = a.sysroot, *capture = a.capture;
    bool json = gdu_cli_json(), progress = a.progress;
    if (sysroot != NULL && capture != NULL)
        return gdu_cli_fail("doctor", GDU_EXIT_USAGE, NULL, NULL,
                            "--capture records the live "
                            "machine; it cannot be combined with --sysroot");
    gdu_sysroot sr;
    char path[PATH_MAX];
    const char *target = first < argc ? path : NULL;
    int rc = check_places(&sr, sysroot, capture, first < argc ? argv[first] : NULL, path);
    if (rc != 0)
        return rc;
    gdu_snapshot *sys = malloc(sizeof *sys);
    if (sys == NULL)
        return gdu_cli_fail("doctor", GDU_EXIT_SOFTWARE, NULL, NULL, "out of memory");
    if (progress)
        fprintf(stderr, "doctor: probing driver, PCI devices, storage, IOMMU and CUDA...\n");
    gdu_snapshot_take(&sr, target ? &target : NULL, target ? 1 : 0, sys);
    gdu_report report;
    gdu_doctor_diagnose(sys, target, &report);
    int code = gdu_doctor_exit_code(&report);

    char source[PATH_MAX + 16];
    snprintf(source, sizeof source, "%s%s", sysroot ? "sysroot " : "live machine",
             sysroot ? sysroot : "");
    /* A write error on stdout is main's to report (74). */
    rc = code;
    if (!json)
        gdu_doctor_print_human(stdout, &report, source, gdu_doctor_want_color(stdout));
    else
        rc = gdu_cli_print_report("doctor", gdu_doctor_to_json(&report, source), NULL, code, 0);
    if (capture != NULL && capture_into(sys, capture) != 0)
        rc = GDU_EXIT_IOERR;
    gdu_report_free(&report);
    gdu_snapshot_free(sys);
    free(sys);
    gdu_sysroot_free(&sr);
    return rc;
}
