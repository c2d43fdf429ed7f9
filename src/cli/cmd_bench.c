/* gdunlock bench: storage<->GPU throughput of every path, side by side, on
 * the same file, I/O size, order and parallelism. */
#include "bench/bench.h"
#include "cli/bench_render.h"
#include "cli/cli_error.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "gdunlock/io.h"
#include "util/units.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: gdunlock bench (-f FILE | -D DIR) [options]\n"
            "\n"
            "Moves the same bytes of one file to (or from) GPU memory by every path and\n"
            "prints GB/s, the ratio to this machine's ceiling, CPU use and per-I/O latency.\n"
            "Paths: direct (cuFile with nvidia-fs), cufile-compat (cuFile without it),\n"
            "engine (gdunlock's pipeline), naive (one thread: pread + cuMemcpyHtoD),\n"
            "host (same I/O into pinned host memory: the storage ceiling), h2d (pinned\n"
            "copy ceiling; d2h for writes) and host-uring (host's I/O through io_uring\n"
            "at the same queue depth). A path that cannot run here says why.\n"
            "\n"
            "  -f FILE          file to use (-D DIR: DIR/gdunlock-bench.dat)\n"
            "  -s SIZE          bytes moved per path (default 1G; a multiple of 4K)\n"
            "  -i SIZE          bytes per I/O (default 16M; a multiple of 4K)\n"
            "  -w N             workers / threads (default %u: the CPUs, 2..16)\n"
            "  -x read|write    direction (default read: file -> GPU)\n"
            "  -m seq|rand      I/O order (default seq)\n"
            "  -d N             GPU index (default 0)\n"
            "  --mem KIND       cudamalloc (default) or vmm (cuMemCreate + cuMemMap)\n"
            "  --cold           O_DIRECT for every path and the page cache dropped first\n"
            "                   (default: warm page cache, buffered I/O)\n"
            "  --paths LIST     comma-separated subset of the paths above (default all)\n"
            "  --chunk SIZE     engine chunk size (default: the engine's own, %uM, or %uM\n"
            "                   with --cold; the engine gets the same -i requests as\n"
            "                   every path and splits them)\n"
            "  --staging N      engine staging buffers per worker (default %u)\n"
            "  --create         create or rewrite FILE with the verifiable pattern\n"
            "  --force          let --create or -x write overwrite a FILE that is not a\n"
            "                   bench file (refused otherwise: it may be someone's data)\n"
            "  --rounds N       measure every path N times, alternating paths (the\n"
            "                   order reversed every other round); report each path's\n"
            "                   median round with the range (default 3, 1..9)\n"
            "  --no-verify      do not check the data after each path, nor that FILE holds\n"
            "                   the pattern (reads: any file of at least -s bytes)\n"
            "  --seed N         pattern seed (default 1)\n"
            "  --json           machine-readable output\n"
            "  --progress       progress on stderr even when it is not a terminal\n"
            "\n"
            "GDUNLOCK_IO_WORKERS, GDUNLOCK_IO_CHUNK and GDUNLOCK_IO_STAGING set the defaults\n"
            "of -w, --chunk and --staging (the options win).\n"
            "\n"
            "Before each cold or write path the bench syncs and waits until dirty pages\n"
            "are written back (and, cold and root, drops the page cache).\n"
            "\n"
            "exit: 0 all paths that could run ran and their data was right; 1 wrong data;\n"
            "64 bad arguments (or FILE would be overwritten without --force); 66 file\n"
            "missing, not a regular file or not a bench file; 69 no GPU;\n"
            "74 an I/O error.\n",
            gdu_io_default_workers(), GDU_IO_DEFAULT_CHUNK >> 20, GDU_IO_DEFAULT_DIRECT_CHUNK >> 20,
            GDU_IO_DEFAULT_STAGING);
}

static int bad_arg(const char *what, const char *value)
{
    return gdu_cli_fail("bench", GDU_EXIT_USAGE, NULL, NULL,
                        "invalid %s '%s' (see gdunlock bench --help)", what, value);
}

static int parse_paths(const char *list, unsigned *out)
{
    char *copy = strdup(list), *save = NULL;
    *out = 0;
    int ok = copy != NULL;
    for (char *t = copy ? strtok_r(copy, ",", &save) : NULL; t; t = strtok_r(NULL, ",", &save)) {
        int found = -1;
        for (int p = 0; p < BENCH_NPATHS; p++)
            if (strcmp(t, bench_path_names[p]) == 0 || (p == BENCH_H2D && strcmp(t, "d2h") == 0))
                found = p;
        if (found < 0)
            ok = 0;
        else
            *out |= 1u << found;
    }
    free(copy);
    return ok && *out ? 0 : -EINVAL;
}

enum {
    OPT_MEM = 256,
    OPT_COLD,
    OPT_PATHS,
    OPT_CHUNK,
    OPT_STAGING,
    OPT_CREATE,
    OPT_NOVERIFY,
    OPT_SEED,
    OPT_JSON,
    OPT_PROGRESS,
    OPT_ROUNDS,
    OPT_FORCE
};

static int parse_args(int argc, char **argv, bench_config *c, bool *progress, char *path_buf,
                      size_t path_len)
{
    static const struct option longs[] = {{"help", no_argument, NULL, 'h'},
                                          {"mem", required_argument, NULL, OPT_MEM},
                                          {"cold", no_argument, NULL, OPT_COLD},
                                          {"paths", required_argument, NULL, OPT_PATHS},
                                          {"chunk", required_argument, NULL, OPT_CHUNK},
                                          {"staging", required_argument, NULL, OPT_STAGING},
                                          {"create", no_argument, NULL, OPT_CREATE},
                                          {"no-verify", no_argument, NULL, OPT_NOVERIFY},
                                          {"seed", required_argument, NULL, OPT_SEED},
                                          {"json", no_argument, NULL, OPT_JSON},
                                          {"progress", no_argument, NULL, OPT_PROGRESS},
                                          {"rounds", required_argument, NULL, OPT_ROUNDS},
                                          {"force", no_argument, NULL, OPT_FORCE},
                                          {NULL, 0, NULL, 0}};
    uint64_t v;
    const char *dir = NULL;
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "hf:D:s:i:w:x:m:d:", longs, NULL)) != -1) {
        switch (opt) {
        case 'h':
            usage(stdout);
            return -1;
        case 'f':
            c->file = optarg;
            break;
        case 'D':
            dir = optarg;
            break;
        case 's':
            if (gdu_parse_size(optarg, &v) != 0 || v == 0 || v % 4096)
                return bad_arg("-s size (a multiple of 4K)", optarg);
            c->total = v;
            break;
        case 'i':
            if (gdu_parse_size(optarg, &v) != 0 || v == 0 || v % 4096 || v > GDU_IO_MAX_CHUNK)
                return bad_arg("-i size (a multiple of 4K, at most 1G)", optarg);
            c->io_size = v;
            break;
        case 'w':
            if (gdu_parse_uint(optarg, 1, GDU_IO_MAX_WORKERS, &v) != 0)
                return bad_arg("-w workers (1..256)", optarg);
            c->workers = (unsigned)v;
            break;
        case 'x':
            if (strcmp(optarg, "read") && strcmp(optarg, "write"))
                return bad_arg("-x (read or write)", optarg);
            c->write = strcmp(optarg, "write") == 0;
            break;
        case 'm':
            if (strcmp(optarg, "seq") && strcmp(optarg, "rand"))
                return bad_arg("-m (seq or rand)", optarg);
            c->random = strcmp(optarg, "rand") == 0;
            break;
        case 'd':
            if (gdu_parse_uint(optarg, 0, 1023, &v) != 0)
                return bad_arg("-d GPU index", optarg);
            c->device = (int)v;
            break;
        case OPT_MEM:
            if (strcmp(optarg, "cudamalloc") && strcmp(optarg, "vmm"))
                return bad_arg("--mem (cudamalloc or vmm)", optarg);
            c->vmm = strcmp(optarg, "vmm") == 0;
            break;
        case OPT_COLD:
            c->cold = true;
            break;
        case OPT_PATHS:
            if (parse_paths(optarg, &c->paths) != 0)
                return bad_arg("--paths (direct,cufile-compat,engine,naive,host,h2d,host-uring)",
                               optarg);
            break;
        case OPT_CHUNK:
            if (gdu_parse_size(optarg, &v) != 0 || v == 0 || v % 4096 || v > GDU_IO_MAX_CHUNK)
                return bad_arg("--chunk size (a multiple of 4K, at most 1G)", optarg);
            c->chunk = v;
            break;
        case OPT_STAGING:
            if (gdu_parse_uint(optarg, 1, GDU_IO_MAX_STAGING, &v) != 0)
                return bad_arg("--staging (1..16)", optarg);
            c->staging = (unsigned)v;
            break;
        case OPT_CREATE:
            c->create = true;
            break;
        case OPT_FORCE:
            c->force = true;
            break;
        case OPT_NOVERIFY:
            c->verify = false;
            break;
        case OPT_SEED:
            if (gdu_parse_uint(optarg, 0, UINT32_MAX, &v) != 0)
                return bad_arg("--seed", optarg);
            c->seed = (uint32_t)v;
            break;
        case OPT_ROUNDS:
            if (gdu_parse_uint(optarg, 1, BENCH_MAX_ROUNDS, &v) != 0)
                return bad_arg("--rounds (1..9)", optarg);
            c->rounds = (unsigned)v;
            break;
        case OPT_JSON:
            c->json = true;
            break;
        case OPT_PROGRESS:
            *progress = true;
            break;
        default:
            return gdu_cli_bad_option("bench", usage);
        }
    }
    if (optind < argc)
        return bad_arg("argument", argv[optind]);
    if ((c->file == NULL) == (dir == NULL))
        return gdu_cli_fail("bench", GDU_EXIT_USAGE, NULL, NULL,
                            "give exactly one of -f FILE or -D DIR");
    if (dir != NULL) {
        snprintf(path_buf, path_len, "%s/gdunlock-bench.dat", dir);
        c->file = path_buf;
    }
    if (c->io_size > c->total)
        c->io_size = c->total;
    if (c->chunk == 0) /* the engine's own default for this mode */
        c->chunk = c->cold ? GDU_IO_DEFAULT_DIRECT_CHUNK : c->default_chunk;
    return 0;
}

/* "bench: engine     3.00 / 8.00 GiB", rewritten in place. */
static void show_progress(void *user, const char *path, uint64_t done, uint64_t total, bool final)
{
    fprintf(stderr, "\rbench: %-13s %8.2f / %.2f GiB%s", path, (double)done / (1u << 30),
            (double)total / (1u << 30), final ? "\n" : "");
    fflush(stderr);
}

int gdu_cmd_bench(int argc, char **argv)
{
    /* The engine's defaults, GDUNLOCK_IO_* included, until an option says otherwise. */
    gdu_io_options d;
    char why[512] = "";
    if (gdu_io_options_default(&d, why, sizeof why) != 0)
        return gdu_cli_fail("bench", GDU_EXIT_USAGE, NULL, NULL, "%s", why);
    bench_config c = {.total = 1ull << 30,
                      .io_size = 16u << 20,
                      .workers = d.workers,
                      .staging = d.staging_per_worker,
                      .default_chunk = d.chunk_size,
                      .rounds = 3,
                      .verify = true,
                      .seed = 1,
                      .paths = (1u << BENCH_NPATHS) - 1};
    char path_buf[4096];
    bool progress = false;
    int rc = parse_args(argc, argv, &c, &progress, path_buf, sizeof path_buf);
    if (rc != 0)
        return rc < 0 ? GDU_EXIT_OK : rc;
    if (progress || isatty(STDERR_FILENO))
        c.progress = show_progress;
    int s = bench_prepare_file(&c, why, sizeof why);
    if (s != 0) {
        int code = s == -EEXIST ? GDU_EXIT_USAGE
                   : s == -ENOENT || s == -EINVAL || s == -EACCES || s == -EISDIR || s == -ENOTDIR
                       ? GDU_EXIT_NOINPUT
                       : GDU_EXIT_IOERR;
        return gdu_cli_fail("bench", code, NULL, NULL, "%s", why);
    }
    bench_run run;
    if (bench_run_paths(&c, &run, why, sizeof why) != 0)
        return gdu_cli_fail("bench", GDU_EXIT_SOFTWARE, NULL, NULL, "%s", why);
    const bench_result *res = run.res;
    if (c.json)
        bench_print_json(&c, &run.gpu, res, argc, argv);
    else
        bench_print_table(&c, &run.gpu, res);
    rc = GDU_EXIT_OK;
    for (int p = 0; p < BENCH_NPATHS; p++) {
        if (res[p].verified == 0 && rc == GDU_EXIT_OK)
            rc = GDU_EXIT_FAILED;
        if (bench_failed(&res[p]))
            rc = GDU_EXIT_IOERR;
    }
    if (rc == GDU_EXIT_OK && run.needed_gpu)
        rc = GDU_EXIT_UNAVAILABLE;
    bench_run_free(&run);
    return rc;
}
