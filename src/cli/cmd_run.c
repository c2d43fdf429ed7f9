/* gdunlock run [options] -- CMD ARGS...: runs CMD with libgdunlock.so
 * preloaded (src/launch/), waits for it, then prints what the shim did in
 * each process of CMD that used a GPU, and exits with CMD's exit status. */
#include "cli/cli_error.h"
#include "cli/cli_json.h"
#include "cli/cli_options.h"
#include "cli/commands.h"
#include "util/exit_codes.h"
#include "launch/launch.h"
#include "util/json_text.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define RUN_SCHEMA "gdunlock-run/1"

struct run_options {
    const char *report; /* also write the merged report here */
    gdu_launch_options launch;
};

static void usage(FILE *out)
{
    fprintf(
        out,
        "Usage: gdunlock run [--report PATH] [--log LEVEL] [--json] [--rdma] [--test-drop-native] "
        "-- CMD [ARGS...]\n"
        "\n"
        "Runs CMD with the gdunlock shim (libgdunlock.so) preloaded: on every GPU where the\n"
        "driver gives CUDA no ThirdPartyP2P object (GeForce), the shim creates one and registers\n"
        "each device allocation with it, so that nvidia-fs/cuFile can DMA to and from GPU memory.\n"
        "CMD's own output is left as it is; afterwards the shim's report (per process and GPU:\n"
        "mode native / unlocked / failed + reason, allocations registered and unregistered,\n"
        "failures by RM status) goes to stderr as a table, or to stdout as JSON with --json.\n"
        "\n"
        "  --report PATH       also write the report (JSON) to PATH\n"
        "  --log LEVEL         shim log level in CMD: error (default), info or debug\n"
        "  --json              the report as JSON on stdout\n"
        "  --rdma              also answer the GPUDirect RDMA attributes for NCCL and ibverbs\n"
        "                      programs (GPUDirect RDMA through nvidia-peermem; opt-in, not yet\n"
        "                      shown on a GeForce; default: GDUNLOCK_RDMA)\n"
        "  --test-drop-native  test mode: replace libcuda's own ThirdPartyP2P objects by the\n"
        "                      shim's (reproduces the GeForce state on a datacenter GPU)\n"
        "\n"
        "SIGTERM, SIGINT, SIGHUP and SIGQUIT sent to gdunlock are passed on to CMD, which is\n"
        "waited for (a terminal's ^C reaches CMD itself); if gdunlock is killed, CMD gets "
        "SIGTERM.\n"
        "\n"
        "exit: CMD's exit status (128+N if a signal N ended it or was passed on), 64 bad\n"
        "arguments, 66 CMD cannot be run, 69 libgdunlock.so not found or not loaded in CMD\n"
        "(a static or setuid program), 70 internal error, 74 the report could not be written\n");
}

static int option(void *ctx, int opt, const char *arg)
{
    struct run_options *o = ctx;
    switch (opt) {
    case 'r':
        o->report = arg;
        break;
    case 'l':
        if (strcmp(arg, "error") != 0 && strcmp(arg, "info") != 0 && strcmp(arg, "debug") != 0)
            return gdu_cli_fail("run", GDU_EXIT_USAGE, NULL, NULL,
                                "--log '%s': give error, info or debug", arg);
        o->launch.log = arg;
        break;
    case 't':
        o->launch.test_drop_native = true;
        break;
    case 'R':
        o->launch.rdma = true;
        break;
    }
    return GDU_CLI_CONTINUE;
}

/* The options end at CMD: what follows is CMD's own. */
static int parse(int argc, char **argv, struct run_options *o, int *cmd_index)
{
    static const struct option longs[] = {
        {"report", required_argument, NULL, 'r'},
        {"log", required_argument, NULL, 'l'},
        {"test-drop-native", no_argument, NULL, 't'},
        {"rdma", no_argument, NULL, 'R'},
        GDU_CLI_JSON_OPTION,
        GDU_CLI_HELP_OPTION,
        {NULL, 0, NULL, 0},
    };
    static const gdu_cli_command cmd = {
        .name = "run",
        .usage = usage,
        .shortopts = "",
        .longs = longs,
        .min_operands = 1,
        .max_operands = -1,
        .operands_wanted = "no command given; write it after '--', e.g. gdunlock run -- python3 "
                           "train.py",
        .stop_at_operand = 1,
    };
    *o = (struct run_options){0};
    return gdu_cli_parse(&cmd, argc, argv, option, o, cmd_index);
}

/* With --json, stdout carries the report alone: CMD's standard output goes
 * to stderr while it runs. Returns the saved stdout (or -1: nothing moved). */
static int stdout_to_stderr(void)
{
    fflush(stdout);
    int saved = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    if (saved >= 0 && dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
        close(saved);
        saved = -1;
    }
    return saved;
}

static void stdout_back(int saved)
{
    if (saved >= 0) {
        dup2(saved, STDOUT_FILENO);
        close(saved);
    }
}

/* The one document of --json and --report: CMD's exit status (exit_code
 * is gdunlock's) and the merged reports, written to --report's file and
 * printed, or the reports as a table on stderr. Returns the exit status. */
static int show_reports(const struct run_options *o, json_t *processes, int cmd_rc)
{
    json_t *doc = gdu_cli_envelope(
        "run", json_pack("{s:i, s:O}", "exit_status", cmd_rc, "processes", processes), RUN_SCHEMA,
        cmd_rc);
    if (o->report != NULL && (doc == NULL || gdu_launch_write_report(doc, o->report) != 0)) {
        gdu_cli_note("run", "cannot write the report to %s: %s", o->report,
                     strerror(doc == NULL ? ENOMEM : errno));
        cmd_rc = GDU_EXIT_IOERR;
        json_object_set_new(doc, "exit_code", json_integer(cmd_rc));
    }
    if (gdu_cli_json()) {
        if (doc == NULL)
            cmd_rc = gdu_cli_fail("run", GDU_EXIT_SOFTWARE, NULL, NULL,
                                  "the JSON document could not be built (out of memory)");
        gdu_cli_print(json_incref(doc), 0);
    } else {
        /* The reports are the child's: printed escaped. */
        const char *nc = getenv("NO_COLOR");
        json_t *shown = gdu_json_escaped_copy(processes);
        if (shown != NULL)
            gdu_launch_print_processes(stderr, shown,
                                       isatty(STDERR_FILENO) && (nc == NULL || nc[0] == '\0'));
        json_decref(shown);
    }
    json_decref(doc);
    return cmd_rc;
}

int gdu_cmd_run(int argc, char **argv)
{
    struct run_options o;
    int cmd_at;
    int rc = parse(argc, argv, &o, &cmd_at);
    if (rc != GDU_CLI_CONTINUE)
        return rc;
    char shim[PATH_MAX * 2 + 64] = "", exe[PATH_MAX];
    if (!gdu_launch_find_shim(shim, sizeof shim, exe, sizeof exe))
        return gdu_cli_fail("run", GDU_EXIT_UNAVAILABLE, NULL,
                            "build it: cmake --build build --target gdu_shim, or install it",
                            "libgdunlock.so not found (looked for %s)", shim);
    gdu_launch_result res;
    char why[PATH_MAX + 128];
    int saved = gdu_cli_json() ? stdout_to_stderr() : -1;
    rc = gdu_launch_run(argv + cmd_at, shim, &o.launch, &res, why, sizeof why);
    stdout_back(saved);
    if (rc != 0)
        return gdu_cli_fail("run", rc == -EINVAL ? GDU_EXIT_UNAVAILABLE : GDU_EXIT_SOFTWARE, NULL,
                            rc == -EINVAL ? "set TMPDIR to a folder whose path has no space or ':'"
                                          : "set TMPDIR to a writable folder",
                            "%s", why);
    size_t i;
    const json_t *u;
    json_array_foreach(res.unreadable, i, u) gdu_cli_note(
        "run", "shim report %s unreadable: %s", json_string_value(json_object_get(u, "file")),
        json_string_value(json_object_get(u, "error")));
    json_t *processes = json_incref(res.processes);
    int status = res.status, ending_signal = res.ending_signal, exec_errno = res.exec_errno;
    bool shim_loaded = res.shim_loaded;
    gdu_launch_result_free(&res);
    if (status < 0) {
        json_decref(processes);
        return gdu_cli_fail("run",
                            exec_errno == ENOENT || exec_errno == EACCES ? GDU_EXIT_NOINPUT
                                                                         : GDU_EXIT_SOFTWARE,
                            NULL, NULL, "cannot run '%s': %s", argv[cmd_at], strerror(exec_errno));
    }
    int cmd_rc = WIFEXITED(status)     ? WEXITSTATUS(status)
                 : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                       : 1;
    if (ending_signal != 0) { /* as a shell reports a command a signal ended */
        gdu_cli_note("run", "%s; '%s' ended with status %d", strsignal(ending_signal), argv[cmd_at],
                     cmd_rc);
        cmd_rc = 128 + ending_signal;
    }
    if (!shim_loaded && ending_signal == 0) {
        json_decref(processes);
        return gdu_cli_fail("run", GDU_EXIT_UNAVAILABLE, "shim_not_loaded",
                            "run a dynamically linked program (LD_PRELOAD reaches no static or "
                            "setuid one) and leave LD_PRELOAD as gdunlock sets it",
                            "libgdunlock.so did not load in '%s' (%s), which ran without gdunlock "
                            "and exited with status %d",
                            argv[cmd_at], shim, cmd_rc);
    }
    cmd_rc = show_reports(&o, processes, cmd_rc);
    json_decref(processes);
    return cmd_rc;
}
