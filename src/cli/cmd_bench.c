/* gdunlock bench: storage<->GPU throughput of every path, side by side, on
 * the same file, I/O size, order and parallelism. */
#include "bench/bench.h"
#include "cli/cli_error.h"
#include "cli/cli_json.h"
#include "cli/cli_options.h"
#include "util/progress.h"
#include "cli/commands.h"
#include "util/exit_codes.h"
#include "gdunlock/io.h"
#include "util/text.h"
#include "util/units.h"

#include <errno.h>
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
            "  -T SECONDS       gdsio's duration: each path passes over the -s bytes again\n"
            "                   and again until SECONDS have passed (one round unless\n"
            "                   --rounds is given; default: one pass)\n"
            "  -i SIZE          bytes per I/O (default 16M; a multiple of 4K)\n"
            "  -w N             workers / threads (default: 3/4 of the CPUs, 2 to 16)\n"
            "  -x 0|1|2         gdsio's transfer type, as the paths that move data so:\n"
            "                   0 storage -> GPU by cuFile (direct, cufile-compat),\n"
            "                   1 storage -> CPU memory (host, host-uring), 2 storage ->\n"
            "                   CPU memory -> GPU (engine, naive); default every path\n"
            "  -I 0|1|2|3       gdsio's I/O type: 0 read (default: file -> GPU), 1 write,\n"
            "                   2 randread, 3 randwrite\n"
            "  --rw TYPE        the same by name: read, write, randread, randwrite\n"
            "  -m seq|rand      the I/O order alone (default seq)\n"
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
            "                   the pattern. A read of a FILE that does not hold it reads it\n"
            "                   as it is, unchecked, and says so (as gdsio reads any file)\n"
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
            "missing, not a regular file or smaller than -s; 69 no GPU;\n"
            "74 an I/O error.\n",
            GDU_IO_DEFAULT_CHUNK >> 20, GDU_IO_DEFAULT_DIRECT_CHUNK >> 20, GDU_IO_DEFAULT_STAGING);
}

static int bad_arg(const char *what, const char *value)
{
    return gdu_cli_fail("bench", GDU_EXIT_USAGE, NULL, NULL, "invalid %s '%s'", what, value);
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
    OPT_RW = 'I', /* -I takes gdsio's numbers, --rw their names */
    OPT_MEM = 256,
    OPT_COLD,
    OPT_PATHS,
    OPT_CHUNK,
    OPT_STAGING,
    OPT_CREATE,
    OPT_NOVERIFY,
    OPT_SEED,
    OPT_PROGRESS,
    OPT_ROUNDS,
    OPT_FORCE,
    OPT_SECONDS = 'T'
};

struct bench_args {
    bench_config *c;
    const char *dir;
    bool progress, rounds_given;
    unsigned paths; /* chosen by -x and --paths; 0: every path */
};

/* gdsio's I/O types (-I), in its order, and by name (--rw). */
static const char *const io_types[] = {"read", "write", "randread", "randwrite"};

static int io_type(const char *arg, bench_config *c)
{
    for (unsigned t = 0; t < 4; t++) {
        char number[2] = {(char)('0' + t), '\0'};
        if (strcmp(arg, number) == 0 || strcmp(arg, io_types[t]) == 0) {
            c->write = t == 1 || t == 3;
            c->random = t >= 2;
            return GDU_CLI_CONTINUE;
        }
    }
    return bad_arg("-I/--rw (0 read, 1 write, 2 randread, 3 randwrite)", arg);
}

/* gdsio's transfer types (-x): the paths that move data that way. */
static int xfer_type(const char *arg, unsigned *paths)
{
    static const unsigned by_type[] = {
        1u << BENCH_DIRECT | 1u << BENCH_COMPAT,
        1u << BENCH_HOST | 1u << BENCH_HOST_URING,
        1u << BENCH_ENGINE | 1u << BENCH_NAIVE,
    };
    uint64_t t;
    if (strcmp(arg, "read") == 0 || strcmp(arg, "write") == 0)
        return gdu_cli_fail("bench", GDU_EXIT_USAGE, NULL, NULL,
                            "-x is gdsio's transfer type (0, 1 or 2), no longer the direction: "
                            "give -I %d or --rw %s",
                            arg[0] == 'w', arg);
    if (gdu_parse_uint(arg, 0, 2, &t) != 0)
        return bad_arg("-x transfer type (0 GPU direct, 1 CPU only, 2 CPU -> GPU; gdsio's "
                       "others have no bench path)",
                       arg);
    *paths |= by_type[t];
    return GDU_CLI_CONTINUE;
}

/* The options that take a size in bytes (-s, -i, --chunk): true when opt
 * is one, with *rc its outcome. */
static bool size_option(bench_config *c, int opt, const char *arg, int *rc)
{
    uint64_t v;
    bool bad = gdu_parse_size(arg, &v) != 0 || v == 0 || v % 4096;
    *rc = GDU_CLI_CONTINUE;
    if (opt == 's' && bad)
        *rc = bad_arg("-s size (a multiple of 4K)", arg);
    else if (opt == 's')
        c->total = v;
    else if (opt == 'i' && (bad || v > GDU_IO_MAX_CHUNK))
        *rc = bad_arg("-i size (a multiple of 4K, at most 1G)", arg);
    else if (opt == 'i')
        c->io_size = v;
    else if (opt == OPT_CHUNK && (bad || v > GDU_IO_MAX_CHUNK))
        *rc = bad_arg("--chunk size (a multiple of 4K, at most 1G)", arg);
    else if (opt == OPT_CHUNK)
        c->chunk = v;
    else
        return false;
    return true;
}

/* The options that take a count in a range (-w, -d, --staging, --seed,
 * --rounds, -T): true when opt is one, with *rc its outcome. */
static bool count_option(struct bench_args *a, int opt, const char *arg, int *rc)
{
    static const struct {
        int opt;
        uint64_t min, max;
        const char *what;
    } counts[] = {
        {'w', 1, GDU_IO_MAX_WORKERS, "-w workers (1..256)"},
        {'d', 0, 1023, "-d GPU index"},
        {OPT_STAGING, 1, GDU_IO_MAX_STAGING, "--staging (1..16)"},
        {OPT_SEED, 0, UINT32_MAX, "--seed"},
        {OPT_ROUNDS, 1, BENCH_MAX_ROUNDS, "--rounds (1..9)"},
        {OPT_SECONDS, 1, 86400, "-T seconds (1..86400)"},
    };
    size_t k = 0;
    while (k < sizeof counts / sizeof counts[0] && counts[k].opt != opt)
        k++;
    if (k == sizeof counts / sizeof counts[0])
        return false;
    uint64_t v;
    *rc = GDU_CLI_CONTINUE;
    if (gdu_parse_uint(arg, counts[k].min, counts[k].max, &v) != 0) {
        *rc = bad_arg(counts[k].what, arg);
        return true;
    }
    bench_config *c = a->c;
    if (opt == 'w')
        c->workers = (unsigned)v;
    else if (opt == 'd')
        c->device = (int)v;
    else if (opt == OPT_STAGING)
        c->staging = (unsigned)v;
    else if (opt == OPT_SEED)
        c->seed = (uint32_t)v;
    else if (opt == OPT_ROUNDS) {
        c->rounds = (unsigned)v;
        a->rounds_given = true;
    } else
        c->seconds = (unsigned)v;
    return true;
}

static int option(void *ctx, int opt, const char *arg)
{
    struct bench_args *a = ctx;
    bench_config *c = a->c;
    int rc;
    if (size_option(c, opt, arg, &rc) || count_option(a, opt, arg, &rc))
        return rc;
    unsigned named;
    switch (opt) {
    case 'f':
        c->file = arg;
        break;
    case 'D':
        a->dir = arg;
        break;
    case 'x':
        return xfer_type(arg, &a->paths);
    case OPT_RW:
        return io_type(arg, c);
    case 'm':
        if (strcmp(arg, "seq") && strcmp(arg, "rand"))
            return bad_arg("-m (seq or rand)", arg);
        c->random = strcmp(arg, "rand") == 0;
        break;
    case OPT_MEM:
        if (strcmp(arg, "cudamalloc") && strcmp(arg, "vmm"))
            return bad_arg("--mem (cudamalloc or vmm)", arg);
        c->vmm = strcmp(arg, "vmm") == 0;
        break;
    case OPT_PATHS:
        if (parse_paths(arg, &named) != 0)
            return bad_arg("--paths (direct,cufile-compat,engine,naive,host,h2d,host-uring)", arg);
        a->paths |= named;
        break;
    case OPT_COLD:
        c->cold = true;
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
    case OPT_PROGRESS:
        a->progress = true;
        break;
    }
    return GDU_CLI_CONTINUE;
}

/* The options into c; workers and staging stay 0 where no option set them. */
static int parse_args(int argc, char **argv, struct bench_args *a)
{
    static const struct option longs[] = {{"rw", required_argument, NULL, OPT_RW},
                                          {"mem", required_argument, NULL, OPT_MEM},
                                          {"cold", no_argument, NULL, OPT_COLD},
                                          {"paths", required_argument, NULL, OPT_PATHS},
                                          {"chunk", required_argument, NULL, OPT_CHUNK},
                                          {"staging", required_argument, NULL, OPT_STAGING},
                                          {"create", no_argument, NULL, OPT_CREATE},
                                          {"no-verify", no_argument, NULL, OPT_NOVERIFY},
                                          {"seed", required_argument, NULL, OPT_SEED},
                                          {"progress", no_argument, NULL, OPT_PROGRESS},
                                          {"rounds", required_argument, NULL, OPT_ROUNDS},
                                          {"force", no_argument, NULL, OPT_FORCE},
                                          GDU_CLI_JSON_OPTION,
                                          GDU_CLI_HELP_OPTION,
                                          {NULL, 0, NULL, 0}};
    static const gdu_cli_command cmd = {
        .name = "bench", .usage = usage, .shortopts = "f:D:s:i:w:x:I:m:d:T:", .longs = longs};
    int first;
    int rc = gdu_cli_parse(&cmd, argc, argv, option, a, &first);
    if (rc != GDU_CLI_CONTINUE)
        return rc;
    if ((a->c->file == NULL) == (a->dir == NULL))
        return gdu_cli_fail("bench", GDU_EXIT_USAGE, NULL, NULL,
                            "give exactly one of -f FILE or -D DIR");
    if (a->paths != 0)
        a->c->paths = a->paths;
    if (a->c->seconds > 0 && !a->rounds_given)
        a->c->rounds = 1; /* gdsio's -T: one run of that length */
    return GDU_CLI_CONTINUE;
}

/* "bench: engine 3.00 GiB / 8.00 GiB ( 37%)  2.41 GB/s  ETA 2s"; each
 * path (a static name) is a task of its own. */
static void show_progress(void *user, const char *path, uint64_t done, uint64_t total, bool final)
{
    gdu_progress_bytes(user, path, done, total, final);
}

/* The exit code of an error about the bench file (bench_prepare_file's, or
 * the file replaced during the run): usage where it would be overwritten, no
 * input where it is missing or not a regular file, else an I/O error. */
static int file_exit_code(int err)
{
    return err == -EEXIST ? GDU_EXIT_USAGE
           : err == -ENOENT || err == -EINVAL || err == -EACCES || err == -EISDIR || err == -ENOTDIR
               ? GDU_EXIT_NOINPUT
               : GDU_EXIT_IOERR;
}

/* The exit status of a run: an I/O error on any path, else wrong data,
 * else no GPU where a path needed one, else 0. */
static int exit_status(const bench_run *run)
{
    int rc = GDU_EXIT_OK;
    for (int p = 0; p < BENCH_NPATHS; p++) {
        if (run->res[p].verified == 0 && rc == GDU_EXIT_OK)
            rc = GDU_EXIT_FAILED;
        if (bench_failed(&run->res[p]))
            rc = GDU_EXIT_IOERR;
    }
    return rc == GDU_EXIT_OK && run->needed_gpu ? GDU_EXIT_UNAVAILABLE : rc;
}

int gdu_cmd_bench(int argc, char **argv)
{
    bench_config c = {.total = 1ull << 30,
                      .io_size = 16u << 20,
                      .rounds = 3,
                      .verify = true,
                      .seed = 1,
                      .paths = (1u << BENCH_NPATHS) - 1};
    struct bench_args a = {.c = &c};
    int rc = parse_args(argc, argv, &a);
    if (rc != GDU_CLI_CONTINUE)
        return rc;
    bool progress = a.progress;
    char why[512] = "";
    if (bench_config_fill(&c, why, sizeof why) != 0)
        return gdu_cli_fail("bench", GDU_EXIT_USAGE, NULL, NULL, "%s", why);
    char path_buf[4096];
    if (a.dir != NULL) {
        snprintf(path_buf, sizeof path_buf, "%s/gdunlock-bench.dat", a.dir);
        c.file = path_buf;
    }
    gdu_progress shown;
    gdu_progress_start(&shown);
    shown.prefix = "bench: ";
    if (progress || shown.tty) {
        c.progress = show_progress;
        c.progress_user = &shown;
    }
    int s = bench_prepare_file(&c, why, sizeof why);
    char file_note[sizeof why];
    if (s == BENCH_FILE_FOREIGN) { /* read as it is, unchecked */
        snprintf(file_note, sizeof file_note, "%s", why);
        c.file_note = file_note;
        c.verify = false;
        fputs("gdunlock bench: note: ", stderr);
        gdu_text_put(stderr, file_note);
        fputc('\n', stderr);
    } else if (s != 0) {
        return gdu_cli_fail("bench", file_exit_code(s), NULL, NULL, "%s", why);
    }
    bench_run run;
    s = bench_run_paths(&c, &run, why, sizeof why);
    if (s != 0)
        return gdu_cli_fail("bench", s == -ENOMEM ? GDU_EXIT_SOFTWARE : file_exit_code(s), NULL,
                            NULL, "%s", why);
    const bench_result *res = run.res;
    rc = exit_status(&run);
    if (gdu_cli_json())
        rc = gdu_cli_print_report("bench", bench_to_json(&c, &run.gpu, res), "gdunlock-bench/1", rc,
                                  0);
    else
        bench_print_table(stdout, &c, &run.gpu, res);
    bench_run_free(&run);
    return rc;
}
