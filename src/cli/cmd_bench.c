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
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *out)
{
    fprintf(out,
            "usage: gdunlock bench (-f FILE | -D DIR) [options]\n"
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
            "  -w N             workers / threads (default %u: half the CPUs, 2..16)\n"
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

enum { OPT_MEM = 256, OPT_COLD, OPT_PATHS, OPT_CHUNK, OPT_STAGING, OPT_CREATE, OPT_NOVERIFY,
       OPT_SEED, OPT_JSON, OPT_PROGRESS, OPT_ROUNDS, OPT_FORCE };

static int parse_args(int argc, char **argv, bench_config *c, char *path_buf, size_t path_len)
{
    static const struct option longs[] = {
        {"help", no_argument, NULL, 'h'},         {"mem", required_argument, NULL, OPT_MEM},
        {"cold", no_argument, NULL, OPT_COLD},     {"paths", required_argument, NULL, OPT_PATHS},
        {"chunk", required_argument, NULL, OPT_CHUNK},
        {"staging", required_argument, NULL, OPT_STAGING},
        {"create", no_argument, NULL, OPT_CREATE}, {"no-verify", no_argument, NULL, OPT_NOVERIFY},
        {"seed", required_argument, NULL, OPT_SEED}, {"json", no_argument, NULL, OPT_JSON},
        {"progress", no_argument, NULL, OPT_PROGRESS}, {"rounds", required_argument, NULL, OPT_ROUNDS},
        {"force", no_argument, NULL, OPT_FORCE},   {NULL, 0, NULL, 0}};
    uint64_t v;
    const char *dir = NULL;
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "hf:D:s:i:w:x:m:d:", longs, NULL)) != -1) {
        switch (opt) {
        case 'h': usage(stdout); return -1;
        case 'f': c->file = optarg; break;
        case 'D': dir = optarg; break;
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
        case OPT_COLD: c->cold = true; break;
        case OPT_PATHS:
            if (parse_paths(optarg, &c->paths) != 0)
                return bad_arg("--paths (direct,cufile-compat,engine,naive,host,h2d,host-uring)", optarg);
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
        case OPT_CREATE: c->create = true; break;
        case OPT_FORCE: c->force = true; break;
        case OPT_NOVERIFY: c->verify = false; break;
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
        case OPT_JSON: c->json = true; break;
        case OPT_PROGRESS: c->progress = true; break;
        default:
            usage(stderr);
            gdu_cli_error_doc("bench", GDU_EXIT_USAGE, NULL, "unknown option or missing argument (see gdunlock bench --help)", NULL);
            return GDU_EXIT_USAGE;
        }
    }
    if (optind < argc)
        return bad_arg("argument", argv[optind]);
    if ((c->file == NULL) == (dir == NULL))
        return gdu_cli_fail("bench", GDU_EXIT_USAGE, NULL, NULL, "give exactly one of -f FILE or -D DIR");
    if (dir != NULL) {
        snprintf(path_buf, path_len, "%s/gdunlock-bench.dat", dir);
        c->file = path_buf;
    }
    if (c->io_size > c->total)
        c->io_size = c->total;
    if (c->chunk == 0) /* the engine's own default for this mode */
        c->chunk = c->cold ? GDU_IO_DEFAULT_DIRECT_CHUNK : GDU_IO_DEFAULT_CHUNK;
    return 0;
}

static bench_plan make_plan(const bench_config *c)
{
    bench_plan p;
    p.n = (size_t)((c->total + c->io_size - 1) / c->io_size);
    p.offset = malloc(p.n * sizeof *p.offset);
    if (p.offset == NULL)
        return p;
    for (size_t i = 0; i < p.n; i++)
        p.offset[i] = (uint64_t)i * c->io_size;
    uint64_t s = 0x2545F4914F6CDD1Dull ^ c->seed;
    for (size_t i = p.n; c->random && i > 1; i--) { /* Fisher-Yates */
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        size_t j = (size_t)(s % i);
        uint64_t t = p.offset[i - 1];
        p.offset[i - 1] = p.offset[j];
        p.offset[j] = t;
    }
    return p;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void percentiles(bench_result *r, const bench_lat *lat, const bench_config *c)
{
    size_t n = (size_t)((r->bytes + c->io_size - 1) / c->io_size);
    if (n == 0 || n > lat->n)
        n = lat->n;
    double *s = malloc(n * sizeof *s);
    if (s == NULL)
        return;
    memcpy(s, lat->us, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_double);
    r->p50_us = s[n / 2];
    size_t k = (size_t)((double)n * 0.99 + 0.999999);
    r->p99_us = s[k > 0 ? k - 1 : 0];
    free(s);
}

/* Untimed preparation before one path: reads start from a clean device
 * buffer and (cold) an empty page cache; writes from an empty file; cold
 * reads and writes from a storage with no writeback in progress. */
static int before_path(const bench_config *c, bench_gpu *g, int path, char *why, size_t len)
{
    int fd = open(c->file, (c->write ? O_WRONLY : O_RDONLY) | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, len, "cannot open %s: %s", c->file, strerror(errno));
        return -errno;
    }
    if (c->write && path != BENCH_H2D && ftruncate(fd, 0) != 0) {
        int err = errno;
        snprintf(why, len, "cannot truncate %s: %s", c->file, strerror(err));
        close(fd);
        return -err;
    }
    if (c->cold) {
        fdatasync(fd);
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    }
    close(fd);
    if (c->cold || c->write)
        bench_settle(c->cold);
    if (!c->write && !bench_is_host(path) && path != BENCH_H2D && g->ok)
        return bench_gpu_reset(g, c, why, len);
    return 0;
}

/* Untimed: data written reaches the disk before the next path; then the
 * data a path moved is checked against the pattern. */
static void after_path(const bench_config *c, bench_gpu *g, int path, bool verify, bench_result *r)
{
    if (c->write && path != BENCH_H2D) {
        int fd = open(c->file, O_WRONLY | O_CLOEXEC);
        if (fd >= 0) {
            fdatasync(fd);
            close(fd);
        }
    }
    if (!verify || bench_is_host(path) || path == BENCH_H2D || r->status != 0 || !r->ran)
        return;
    char why[256] = "";
    int ok = c->write ? bench_file_verify(c, why, sizeof why) : bench_gpu_verify(g, c, why, sizeof why);
    r->verified = ok == 1;
    if (ok != 1) {
        size_t used = strlen(r->note);
        snprintf(r->note + used, sizeof r->note - used, "%sVERIFY: %s", used ? "; " : "", why);
    }
}

/* Warm runs read a page-cache-resident file: read it once, untimed. */
static void warm_page_cache(const bench_config *c)
{
    int fd = open(c->file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    size_t n = 16u << 20;
    char *buf = malloc(n);
    for (uint64_t off = 0; buf != NULL && off < c->total; off += n)
        if (pread(fd, buf, n, (off_t)off) <= 0)
            break;
    free(buf);
    close(fd);
}

/* One timed run of one path, with its untimed preparation and check. */
static void run_path(const bench_config *c, bench_gpu *g, const bench_plan *plan, bench_lat *lat,
                     int p, bool verify, bench_result *r)
{
    char why[512] = "";
    int s = before_path(c, g, p, why, sizeof why);
    if (s != 0) {
        r->status = s;
        snprintf(r->note, sizeof r->note, "%.300s", why);
        return;
    }
    memset(lat->us, 0, plan->n * sizeof(double));
    if (p == BENCH_H2D)
        bench_run_h2d(c, g, plan, lat, r);
    else if (p == BENCH_HOST)
        bench_run_host(c, g, plan, lat, r);
    else if (p == BENCH_HOST_URING)
        bench_run_host_uring(c, g, plan, lat, r);
    else if (p == BENCH_NAIVE)
        bench_run_naive(c, g, plan, lat, r);
    else
        bench_run_engine(c, g, plan, lat, p, r);
    after_path(c, g, p, verify, r);
    if (r->ran && r->bytes > 0)
        percentiles(r, lat, c);
}

/* The path's result over its rounds: the median round (the lower middle one
 * for an even count), every round's GB/s and their range; a round that
 * could not run or failed is the result instead. The data check is the
 * first round's. */
static void combine_rounds(const bench_result *runs, unsigned rounds, bench_result *out)
{
    unsigned n = 0, order[BENCH_MAX_ROUNDS];
    for (unsigned i = 0; i < rounds; i++) {
        if (!runs[i].requested)
            break; /* not repeated: it could not run or failed in round 0 */
        if (!runs[i].ran || runs[i].status != 0) {
            *out = runs[i];
            return;
        }
        order[n++] = i;
    }
    if (n == 0)
        return;
    for (unsigned i = 1; i < n; i++) /* insertion sort by GB/s */
        for (unsigned j = i; j > 0 && bench_gbps(&runs[order[j]]) < bench_gbps(&runs[order[j - 1]]); j--) {
            unsigned t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    *out = runs[order[(n - 1) / 2]];
    out->verified = runs[0].verified;
    if (runs[0].verified == 0)
        snprintf(out->note, sizeof out->note, "%s", runs[0].note);
    out->rounds = n;
    for (unsigned i = 0; i < n; i++)
        out->round_gbps[i] = bench_gbps(&runs[i]);
    out->gbps_min = bench_gbps(&runs[order[0]]);
    out->gbps_max = bench_gbps(&runs[order[n - 1]]);
}

int gdu_cmd_bench(int argc, char **argv)
{
    bench_config c = {.total = 1ull << 30, .io_size = 16u << 20, .workers = gdu_io_default_workers(),
                      .staging = GDU_IO_DEFAULT_STAGING, .rounds = 3,
                      .verify = true, .seed = 1, .paths = (1u << BENCH_NPATHS) - 1};
    char path_buf[4096];
    int rc = parse_args(argc, argv, &c, path_buf, sizeof path_buf);
    if (rc != 0)
        return rc < 0 ? GDU_EXIT_OK : rc;
    if (!c.progress)
        c.progress = isatty(STDERR_FILENO);
    char why[512] = "";
    int s = bench_prepare_file(&c, why, sizeof why);
    if (s != 0) {
        int code = s == -EEXIST ? GDU_EXIT_USAGE
                   : s == -ENOENT || s == -EINVAL || s == -EACCES || s == -EISDIR || s == -ENOTDIR
                       ? GDU_EXIT_NOINPUT
                       : GDU_EXIT_IOERR;
        return gdu_cli_fail("bench", code, NULL, NULL, "%s", why);
    }
    bench_settle(false); /* --create's pages reach the disk before anything is timed */
    bench_gpu g;
    bench_gpu_open(&g, &c);
    bench_plan plan = make_plan(&c);
    bench_result res[BENCH_NPATHS];
    memset(res, 0, sizeof res);
    bench_lat lat = {malloc(plan.n * sizeof(double)), plan.n};
    if (plan.offset == NULL || lat.us == NULL) {
        return gdu_cli_fail("bench", GDU_EXIT_SOFTWARE, NULL, NULL, "out of memory for %zu I/Os",
                            plan.n);
    }
    if (c.write && g.ok && bench_gpu_reset(&g, &c, why, sizeof why) != 0)
        snprintf(g.why, sizeof g.why, "%.250s", why), g.ok = false;
    if (!c.write && !c.cold)
        warm_page_cache(&c);
    /* Ceilings first. Writes truncate the file before each path, so the
     * cuFile paths (which may turn out unable to run) go first there. Odd
     * rounds run the order backwards, so that no path is always the one
     * that runs first (or right after another) and each path's median
     * round is compared with the others'. */
    static const int read_order[] = {BENCH_H2D,    BENCH_HOST,   BENCH_HOST_URING, BENCH_NAIVE,
                                     BENCH_ENGINE, BENCH_DIRECT, BENCH_COMPAT};
    static const int write_order[] = {BENCH_DIRECT, BENCH_COMPAT, BENCH_H2D,   BENCH_HOST,
                                      BENCH_HOST_URING, BENCH_NAIVE, BENCH_ENGINE};
    const int *order = c.write ? write_order : read_order;
    static bench_result runs[BENCH_NPATHS][BENCH_MAX_ROUNDS];
    bool needed_gpu = false;
    for (unsigned round = 0; round < c.rounds; round++) {
        for (size_t k = 0; k < BENCH_NPATHS; k++) {
            int p = order[round % 2 ? BENCH_NPATHS - 1 - k : k];
            res[p].requested = (c.paths >> p) & 1;
            res[p].verified = -1;
            if (!res[p].requested)
                continue;
            if (!bench_is_host(p) && !g.ok) {
                needed_gpu = true;
                res[p].status = -ENODEV;
                snprintf(res[p].note, sizeof res[p].note, "%s", g.why);
                continue;
            }
            /* A path that could not run here or failed says so once. */
            if (round > 0 && (!runs[p][0].ran || runs[p][0].status != 0))
                continue;
            bench_result *r = &runs[p][round];
            memset(r, 0, sizeof *r);
            r->requested = true;
            r->verified = -1;
            run_path(&c, &g, &plan, &lat, p, round == 0 && c.verify, r);
        }
    }
    for (int p = 0; p < BENCH_NPATHS; p++)
        if (res[p].requested && res[p].status != -ENODEV)
            combine_rounds(runs[p], c.rounds, &res[p]);
    if (c.json)
        bench_print_json(&c, &g, res, argc, argv);
    else
        bench_print_table(&c, &g, res);
    rc = GDU_EXIT_OK;
    for (int p = 0; p < BENCH_NPATHS; p++) {
        if (res[p].verified == 0 && rc == GDU_EXIT_OK)
            rc = GDU_EXIT_FAILED;
        if (bench_failed(&res[p]))
            rc = GDU_EXIT_IOERR;
    }
    if (rc == GDU_EXIT_OK && needed_gpu)
        rc = GDU_EXIT_UNAVAILABLE;
    bench_gpu_close(&g);
    free(plan.offset);
    free(lat.us);
    return rc;
}
