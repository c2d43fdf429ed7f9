/* One bench run: the order of the I/Os, each path's untimed preparation and
 * check around its timed run, the rounds (paths alternating, the order
 * reversed every other round) and each path's median round; the paths'
 * names, their GB/s and the machine's ceiling they are compared with. */
#include "bench/bench.h"
#include "gdunlock/io.h"
#include "util/open_regular.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *const bench_path_names[BENCH_NPATHS] = {"direct", "cufile-compat", "engine",    "naive",
                                                    "host",   "h2d",           "host-uring"};

double bench_gbps(const bench_result *r)
{
    return r->ran && r->status == 0 && r->seconds > 0 ? (double)r->bytes / r->seconds / 1e9 : 0;
}

double bench_ceiling(const bench_result *r)
{
    double host = bench_gbps(&r[BENCH_HOST]), copy = bench_gbps(&r[BENCH_H2D]);
    if (host > 0 && copy > 0)
        return host < copy ? host : copy;
    return host > 0 ? host : copy;
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

/* Untimed preparation before one path, on fd (closed here): reads start
 * from a clean device buffer and (cold) an empty page cache; writes from an
 * empty file; cold reads and writes from a storage with no writeback in
 * progress. */
static int before_path(const bench_config *c, bench_gpu *g, int path, int fd, char *why, size_t len)
{
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
        char why[256];
        int fd = gdu_open_regular(c->file, O_WRONLY | O_CLOEXEC, 0, why, sizeof why);
        if (fd >= 0) {
            fdatasync(fd);
            close(fd);
        }
    }
    if (!verify || bench_is_host(path) || path == BENCH_H2D || r->status != 0 || !r->ran)
        return;
    char why[256] = "";
    int ok =
        c->write ? bench_file_verify(c, why, sizeof why) : bench_gpu_verify(g, c, why, sizeof why);
    r->verified = ok == 1;
    if (ok != 1) {
        size_t used = strlen(r->note);
        snprintf(r->note + used, sizeof r->note - used, "%sVERIFY: %s", used ? "; " : "", why);
    }
}

/* Warm runs read a page-cache-resident file: read it once, untimed. */
static void warm_page_cache(const bench_config *c)
{
    char why[256];
    int fd = gdu_open_regular(c->file, O_RDONLY | O_CLOEXEC, 0, why, sizeof why);
    if (fd < 0)
        return; /* the path's own open says why */
    size_t n = 16u << 20;
    char *buf = malloc(n);
    for (uint64_t off = 0; buf != NULL && off < c->total; off += n)
        if (pread(fd, buf, n, (off_t)off) <= 0)
            break;
    free(buf);
    close(fd);
}

static void run_pass(const bench_config *c, bench_gpu *g, const bench_plan *plan, bench_lat *lat,
                     int p, bench_result *r)
{
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
}

/* One pass over the file, or (-T, gdsio's duration) passes until c->seconds
 * have passed: bytes, time and CPU time add up, the first pass's note
 * stays, a failing pass ends it with its error; the latencies are the last
 * whole pass's. */
static void run_passes(const bench_config *c, bench_gpu *g, const bench_plan *plan, bench_lat *lat,
                       int p, bench_result *r)
{
    double end = gdu_now_seconds() + c->seconds;
    run_pass(c, g, plan, lat, p, r);
    r->passes = 1;
    while (c->seconds > 0 && r->ran && r->status == 0 && gdu_now_seconds() < end) {
        bench_result more = {.requested = true, .verified = -1};
        run_pass(c, g, plan, lat, p, &more);
        r->passes++;
        r->bytes += more.bytes;
        r->seconds += more.seconds;
        r->cpu_seconds += more.cpu_seconds;
        if (!more.ran || more.status != 0) {
            r->status = more.status ? more.status : -EIO;
            snprintf(r->note, sizeof r->note, "pass %u: %.300s", r->passes, more.note);
        }
    }
}

/* One timed run of one path, with its untimed preparation and check. 0, or
 * where the file is gone or no longer a regular file (replaced since it was
 * prepared: the run cannot go on) the error with why. */
static int run_path(const bench_config *c, bench_gpu *g, const bench_plan *plan, bench_lat *lat,
                    int p, bool verify, bench_result *r, char *file_why, size_t file_why_len)
{
    int fd = gdu_open_regular(c->file, (c->write ? O_WRONLY : O_RDONLY) | O_CLOEXEC, 0, file_why,
                              file_why_len);
    if (fd < 0)
        return fd;
    char why[512] = "";
    int s = before_path(c, g, p, fd, why, sizeof why);
    if (s != 0) {
        r->status = s;
        snprintf(r->note, sizeof r->note, "%.300s", why);
        return 0;
    }
    memset(lat->us, 0, plan->n * sizeof(double));
    run_passes(c, g, plan, lat, p, r);
    after_path(c, g, p, verify, r);
    if (r->ran && r->bytes > 0)
        percentiles(r, lat, c);
    return 0;
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
        for (unsigned j = i; j > 0 && bench_gbps(&runs[order[j]]) < bench_gbps(&runs[order[j - 1]]);
             j--) {
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

/* One round of every requested path, in order (backwards in odd rounds),
 * into runs[path][round]; a path without the GPU, or that could not run or
 * failed in round 0, is not run again. Returns 0, or run_path's error when
 * the file went away. */
static int run_round(const bench_config *c, bench_run *run, const bench_plan *plan, bench_lat *lat,
                     const int *order, unsigned round, bench_result runs[][BENCH_MAX_ROUNDS],
                     char *why, size_t len)
{
    bench_result *res = run->res;
    for (size_t k = 0; k < BENCH_NPATHS; k++) {
        int p = order[round % 2 ? BENCH_NPATHS - 1 - k : k];
        res[p].requested = (c->paths >> p) & 1;
        res[p].verified = -1;
        if (!res[p].requested)
            continue;
        if (!bench_is_host(p) && !run->gpu.ok) {
            run->needed_gpu = true;
            res[p].status = -ENODEV;
            snprintf(res[p].note, sizeof res[p].note, "%s", run->gpu.why);
            continue;
        }
        /* A path that could not run here or failed says so once. */
        if (round > 0 && (!runs[p][0].ran || runs[p][0].status != 0))
            continue;
        bench_result *r = &runs[p][round];
        memset(r, 0, sizeof *r);
        r->requested = true;
        r->verified = -1;
        int gone = run_path(c, &run->gpu, plan, lat, p, round == 0 && c->verify, r, why, len);
        if (gone != 0)
            return gone;
    }
    return 0;
}

int bench_run_paths(const bench_config *c, bench_run *run, char *why, size_t len)
{
    bench_settle(false); /* --create's pages reach the disk before anything is timed */
    memset(run, 0, sizeof *run);
    bench_gpu *g = &run->gpu;
    bench_gpu_open(g, c);
    bench_plan plan = make_plan(c);
    bench_result *res = run->res;
    bench_lat lat = {malloc(plan.n * sizeof(double)), plan.n};
    if (plan.offset == NULL || lat.us == NULL) {
        snprintf(why, len, "out of memory for %zu I/Os", plan.n);
        free(plan.offset);
        free(lat.us);
        bench_gpu_close(g);
        return -ENOMEM;
    }
    if (c->write && g->ok && bench_gpu_reset(g, c, why, len) != 0)
        snprintf(g->why, sizeof g->why, "%.250s", why), g->ok = false;
    if (!c->write && !c->cold)
        warm_page_cache(c);
    /* Ceilings first. Writes truncate the file before each path, so the
     * cuFile paths (which may turn out unable to run) go first there. Odd
     * rounds run the order backwards, so that no path is always the one
     * that runs first (or right after another) and each path's median
     * round is compared with the others'. */
    static const int read_order[] = {BENCH_H2D,    BENCH_HOST,   BENCH_HOST_URING, BENCH_NAIVE,
                                     BENCH_ENGINE, BENCH_DIRECT, BENCH_COMPAT};
    static const int write_order[] = {BENCH_DIRECT,     BENCH_COMPAT, BENCH_H2D,   BENCH_HOST,
                                      BENCH_HOST_URING, BENCH_NAIVE,  BENCH_ENGINE};
    const int *order = c->write ? write_order : read_order;
    static bench_result runs[BENCH_NPATHS][BENCH_MAX_ROUNDS];
    int gone = 0;
    for (unsigned round = 0; round < c->rounds && gone == 0; round++)
        gone = run_round(c, run, &plan, &lat, order, round, runs, why, len);
    if (gone != 0) {
        free(plan.offset);
        free(lat.us);
        bench_gpu_close(g);
        return gone;
    }
    for (int p = 0; p < BENCH_NPATHS; p++)
        if (res[p].requested && res[p].status != -ENODEV)
            combine_rounds(runs[p], c->rounds, &res[p]);
    free(plan.offset);
    free(lat.us);
    return 0;
}

void bench_run_free(bench_run *run) { bench_gpu_close(&run->gpu); }

int bench_config_fill(bench_config *c, char *why, size_t len)
{
    gdu_io_options d;
    if (gdu_io_options_default(&d, why, len) != 0)
        return -EINVAL;
    if (c->workers == 0)
        c->workers = d.workers;
    if (c->staging == 0)
        c->staging = d.staging_per_worker;
    c->default_chunk = d.chunk_size;
    if (c->io_size > c->total)
        c->io_size = c->total;
    if (c->chunk == 0) /* the engine's own default for this mode */
        c->chunk = c->cold ? GDU_IO_DEFAULT_DIRECT_CHUNK : c->default_chunk;
    return 0;
}
