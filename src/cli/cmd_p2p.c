/* gdunlock p2p: GPU-to-GPU capability (CUDA and the RM's caps, with the
 * reason and fix where P2P is missing) and bandwidth/latency matrices. */
#include "cli/cli_error.h"
#include "cli/cli_json.h"
#include "cli/cli_options.h"
#include "cli/commands.h"
#include "util/exit_codes.h"
#include "p2p/p2p_collect.h"
#include "util/text.h"
#include "util/units.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { DEFAULT_ITERS = 5, COPIES_PER_SAMPLE = 5, LATENCY_COPIES = 100, CHASE_HOPS = 10000 };
#define DEFAULT_SIZE (256ull << 20)

struct options {
    const char *gpus, *sysroot;
    uint64_t size;
    unsigned iters;
    int progress, no_bench, no_sm;
};

static void usage(FILE *out)
{
    fprintf(
        out,
        "Usage: gdunlock p2p [--gpus LIST] [--size N] [--iters N] [--no-bench] [--no-sm] [--json]\n"
        "                    [--progress] [--sysroot DIR]\n"
        "  or:  gdunlock p2p unlock [--check|--build|--install|--revert|--status] ...\n"
        "\n"
        "GPU-to-GPU peer access: for each ordered GPU pair, CUDA's can-access-peer and P2P\n"
        "attributes, the driver's (RM) P2P caps with the connection type (NVLink, PCIe BAR1,\n"
        "PCIe mailbox, C2C) and, where P2P is missing, the reason and the fix. Then copy-engine\n"
        "bandwidth (unidirectional and bidirectional) and latency matrices with peer access\n"
        "disabled (staged through host memory) and enabled, laid out like CUDA's\n"
        "p2pBandwidthLatencyTest (rows = source, columns = destination, diagonal = within one\n"
        "GPU); each cell is the median of its samples, with the spread; copied data is checked.\n"
        "Then the SM routes with peer access enabled: a copy kernel on the source GPU storing\n"
        "into the destination (SM write) and on the destination loading from the source (SM\n"
        "read), and pointer-chase latency of dependent loads; each route (copy engine, SM\n"
        "write, SM read) is checked with a known pattern read back through the memory's owner,\n"
        "and a route that faults or returns wrong data gets its reason. An SM fault stops the\n"
        "SM part (the GPU context refuses further work); the copy-engine results stand.\n"
        "'gdunlock p2p unlock' says what a GeForce machine needs for P2P and installs it\n"
        "('gdunlock p2p unlock --help').\n"
        "\n"
        "  --gpus LIST   CUDA ordinals to test, e.g. 0,1 (default: all, at most %d)\n"
        "  --size N      bytes per bandwidth copy (default 256M; 4K..64G)\n"
        "  --iters N     timed samples per cell (default %d; 1..1000)\n"
        "  --no-bench    capability only, no measurements\n"
        "  --no-sm       copy engines only, no SM kernels\n"
        "  --sysroot DIR the capability part of a machine captured with 'gdunlock doctor\n"
        "                --capture DIR' (no measurements)\n"
        "  --json        machine-readable output\n"
        "  --progress    progress on stderr even when it is not a terminal\n"
        "\n"
        "exit: 0 done (pairs without P2P and SM faults between GPUs included, each with its\n"
        "reason), 1 a measurement failed, copied data was wrong, or the SM kernels did not\n"
        "load, 64 bad arguments, 66 --sysroot DIR missing, 69 no NVIDIA driver / libcuda /\n"
        "GPU (or a capture without CUDA's answers), 70 internal error,\n"
        "74 the report could not be written\n",
        GDU_P2P_MAX_GPUS, DEFAULT_ITERS);
}

static int option(void *ctx, int opt, const char *arg)
{
    struct options *o = ctx;
    uint64_t v;
    switch (opt) {
    case 'g': {
        /* The list's form is checked here, before any GPU is looked at;
         * the ordinals are checked against the devices in pick_gpus. */
        int ordinals[GDU_P2P_MAX_GPUS];
        size_t got;
        if (gdu_parse_index_list(arg, 1023, ordinals, GDU_P2P_MAX_GPUS, &got) != 0)
            return gdu_cli_fail("p2p", GDU_EXIT_USAGE, NULL, NULL,
                                "--gpus '%s': give up to %d "
                                "comma-separated CUDA ordinals, e.g. 0,1",
                                arg, GDU_P2P_MAX_GPUS);
        o->gpus = arg;
        break;
    }
    case 's':
        if (gdu_parse_size(arg, &v) != 0 || v < 4096 || v > (64ull << 30))
            return gdu_cli_fail("p2p", GDU_EXIT_USAGE, NULL, NULL,
                                "--size '%s': give a size from 4K to 64G (e.g. 256M)", arg);
        o->size = v;
        break;
    case 'i':
        if (gdu_parse_uint(arg, 1, 1000, &v) != 0)
            return gdu_cli_fail("p2p", GDU_EXIT_USAGE, NULL, NULL,
                                "--iters '%s': give a count from 1 to 1000", arg);
        o->iters = (unsigned)v;
        break;
    case 'n':
        o->no_bench = 1;
        break;
    case 'S':
        o->no_sm = 1;
        break;
    case 'p':
        o->progress = 1;
        break;
    case 'r':
        o->sysroot = arg;
        break;
    }
    return GDU_CLI_CONTINUE;
}

static int parse(int argc, char **argv, struct options *o)
{
    static const struct option longs[] = {
        {"gpus", required_argument, NULL, 'g'},
        {"size", required_argument, NULL, 's'},
        {"iters", required_argument, NULL, 'i'},
        {"no-bench", no_argument, NULL, 'n'},
        {"no-sm", no_argument, NULL, 'S'},
        {"progress", no_argument, NULL, 'p'},
        {"sysroot", required_argument, NULL, 'r'},
        GDU_CLI_JSON_OPTION,
        GDU_CLI_HELP_OPTION,
        {NULL, 0, NULL, 0},
    };
    static const gdu_cli_command cmd = {
        .name = "p2p", .usage = usage, .shortopts = "", .longs = longs};
    *o = (struct options){.size = DEFAULT_SIZE, .iters = DEFAULT_ITERS};
    int first;
    return gdu_cli_parse(&cmd, argc, argv, option, o, &first);
}

/* The CUDA ordinals to test: --gpus (checked against the device count, no
 * repeats) or the first GDU_P2P_MAX_GPUS devices. */
static int pick_gpus(const char *list, int count, int *ordinals, int *n)
{
    if (list == NULL) {
        *n = count < GDU_P2P_MAX_GPUS ? count : GDU_P2P_MAX_GPUS;
        for (int i = 0; i < *n; i++)
            ordinals[i] = i;
        return 0;
    }
    size_t got = 0;
    int rc = gdu_parse_index_list(list, 1023, ordinals, GDU_P2P_MAX_GPUS, &got);
    if (rc != 0)
        return gdu_cli_fail("p2p", GDU_EXIT_USAGE, NULL, NULL,
                            "--gpus '%s': give up to %d "
                            "comma-separated CUDA ordinals, e.g. 0,1",
                            list, GDU_P2P_MAX_GPUS);
    for (size_t i = 0; i < got; i++) {
        if (ordinals[i] >= count)
            return gdu_cli_fail("p2p", GDU_EXIT_USAGE, NULL, NULL,
                                "--gpus: there is no GPU %d "
                                "(CUDA sees %d, ordinals 0..%d)",
                                ordinals[i], count, count - 1);
        for (size_t k = 0; k < i; k++)
            if (ordinals[k] == ordinals[i])
                return gdu_cli_fail("p2p", GDU_EXIT_USAGE, NULL, NULL,
                                    "--gpus: GPU %d is listed twice", ordinals[i]);
    }
    *n = (int)got;
    return 0;
}

static void show_progress(void *user, const char *phase, unsigned done, unsigned total)
{
    int tty = *(const int *)user;
    if (tty)
        fprintf(stderr, "\r[%3u/%3u] %s\033[K", done + 1, total, phase);
    else
        fprintf(stderr, "[%3u/%3u] %s\n", done + 1, total, phase);
    if (tty && done + 1 == total)
        fputc('\n', stderr);
}

/* The report on stdout: the table, or with --json the document. Returns the
 * exit status (write errors are main's: 74). */
static int output(const gdu_p2p_report *r, int status)
{
    if (gdu_cli_json())
        return gdu_cli_print_report("p2p", gdu_p2p_report_json(r), "gdunlock-p2p/1", status,
                                    JSON_REAL_PRECISION(6));
    int colour = isatty(STDOUT_FILENO) && getenv("NO_COLOR") == NULL;
    gdu_p2p_print_report(stdout, r, colour);
    return status;
}

/* The report from a snapshot of the machine (the collection doctor judges
 * too), taken before the measurements. */
static int judge(const struct options *o, const gdu_snapshot *s, gdu_p2p_report *r)
{
    char why[256];
    if (!s->live.cuda_ok)
        return gdu_cli_fail("p2p", GDU_EXIT_UNAVAILABLE, NULL,
                            "install the NVIDIA driver (it provides libcuda.so.1) on a machine "
                            "with an NVIDIA GPU",
                            "CUDA is not usable: %s",
                            s->live.cuda_why[0] ? s->live.cuda_why
                            : s->live_error[0]  ? s->live_error
                                                : "the capture has no " GDU_LIVE_FILE);
    int count = (int)s->live.n_gpus;
    if (count == 0)
        return gdu_cli_fail("p2p", GDU_EXIT_UNAVAILABLE, NULL,
                            "check nvidia-smi and CUDA_VISIBLE_DEVICES",
                            "no CUDA GPU visible (device count 0)");
    int ordinals[GDU_P2P_MAX_GPUS], n = 0;
    int rc = pick_gpus(o->gpus, count, ordinals, &n);
    if (rc != 0)
        return rc;
    const gdu_cuda *cu = NULL;
    if (s->live_machine && !o->no_bench && (cu = gdu_cuda_load(why, sizeof why)) == NULL)
        return gdu_cli_fail("p2p", GDU_EXIT_UNAVAILABLE, NULL, NULL, "CUDA is not usable: %s", why);
    int tty = isatty(STDERR_FILENO);
    r->bench = (gdu_p2p_bench_config){.bytes = o->size,
                                      .iters = o->iters,
                                      .reps = COPIES_PER_SAMPLE,
                                      .latency_reps = LATENCY_COPIES,
                                      .sm = !o->no_sm,
                                      .chase_hops = CHASE_HOPS,
                                      .progress = (tty || o->progress) ? show_progress : NULL,
                                      .progress_user = &tty};
    if (gdu_p2p_collect(r, s, cu, ordinals, n, why, sizeof why) != 0)
        return gdu_cli_fail("p2p", GDU_EXIT_UNAVAILABLE, NULL, NULL, "querying the GPUs failed: %s",
                            why);
    int status = r->bench_error[0] || gdu_p2p_measurement_failed(r) ? GDU_EXIT_FAILED : GDU_EXIT_OK;
    status = output(r, status);
    if (r->bench_error[0])
        fprintf(stderr, "gdunlock p2p: measurement failed: %s\n", r->bench_error);
    return status;
}

static int run(const struct options *o, gdu_p2p_report *r)
{
    gdu_snapshot *s;
    char why[512];
    int rc = gdu_snapshot_of(o->sysroot, &s, why, sizeof why);
    if (rc == GDU_SNAPSHOT_BAD_ROOT)
        return gdu_cli_fail("p2p", GDU_EXIT_NOINPUT, NULL, NULL, "--sysroot %s", why);
    if (rc != 0)
        return gdu_cli_fail("p2p", GDU_EXIT_SOFTWARE, NULL, NULL, "out of memory");
    rc = judge(o, s, r);
    gdu_snapshot_release(s);
    return rc;
}

int gdu_cmd_p2p(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "unlock") == 0)
        return gdu_cmd_p2p_unlock(argc - 1, argv + 1);
    struct options o;
    int rc = parse(argc, argv, &o);
    if (rc != GDU_CLI_CONTINUE)
        return rc;
    gdu_p2p_report *r = calloc(1, sizeof *r);
    if (r == NULL)
        return gdu_cli_fail("p2p", GDU_EXIT_SOFTWARE, NULL, NULL, "out of memory");
    time_t now = time(NULL);
    struct tm tm;
    strftime(r->date, sizeof r->date, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
    /* For the table's "command:" line, escaped (the JSON document has it exact). */
    char *line = gdu_cli_command_line();
    char *shown = line != NULL ? gdu_text_escaped(line, strlen(line)) : NULL;
    snprintf(r->command_line, sizeof r->command_line, "%s", shown != NULL ? shown : "gdunlock p2p");
    free(shown);
    free(line);
    rc = run(&o, r);
    free(r);
    return rc;
}
