/* A bench run's report, both ways: the table for people and the JSON
 * document (which gdunlock bench puts in its envelope). */
#include "bench/bench.h"
#include "util/json_text.h"
#include "util/text.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

static const char *label(const bench_config *c, int path)
{
    return c->write && path == BENCH_H2D ? "d2h" : bench_path_names[path];
}

static bool use_color(FILE *out)
{
    const char *nc = getenv("NO_COLOR");
    return isatty(fileno(out)) && (nc == NULL || nc[0] == '\0');
}

typedef struct {
    const char *bold, *red, *green, *off;
} paint;

/* The first line: what was measured, where, how. The file, the GPU's name
 * and the notes (errors with paths) are outside text: escaped. */
static void print_heading(FILE *out, const bench_config *c, const bench_gpu *g, const paint *k)
{
    fprintf(out, "%s%s ", k->bold, c->write ? "write" : "read");
    gdu_text_put(out, c->file);
    fprintf(out, ", %.2f GiB in %llu KiB I/Os, %u workers, %s, %s, GPU %d ",
            (double)c->total / (1u << 30), (unsigned long long)(c->io_size >> 10), c->workers,
            c->random ? "random" : "sequential", c->cold ? "cold (O_DIRECT)" : "warm page cache",
            c->device);
    gdu_text_put(out, g->ok ? g->name : "(none)");
    if (c->seconds > 0)
        fprintf(out, ", each path %u s a round", c->seconds);
    fprintf(out, "%s\n", k->off);
}

/* The row of path p, which did not run or failed: true when that was for
 * want of the GPU (why is said once, below the table). */
static bool print_failed_row(FILE *out, const bench_config *c, const bench_gpu *g,
                             const bench_result *x, int p, const paint *k)
{
    bool without_gpu = x->status == -ENODEV && !g->ok && !bench_is_host(p);
    fprintf(out, "%s%-14s %8s %13s %8s %6s %9s %9s %-8s ", bench_failed(x) ? k->red : "",
            label(c, p), "-", "-", "-", "-", "-", "-", "-");
    if (without_gpu)
        fprintf(out, "no GPU %d: see below", c->device);
    else
        gdu_text_put(out, x->note);
    fprintf(out, "%s\n", k->off);
    return without_gpu;
}

/* The row of path p, which ran: its median, range, share of the ceiling,
 * CPU, latencies and whether its data came back right. */
static void print_row(FILE *out, const bench_config *c, const bench_result *x, int p, double ceil,
                      const paint *k)
{
    double v = bench_gbps(x);
    char ratio[16] = "-";
    if (ceil > 0)
        snprintf(ratio, sizeof ratio, "%.2f", v / ceil);
    const char *data = x->verified == 1 ? "ok" : x->verified == 0 ? "WRONG" : "-";
    char range[32];
    snprintf(range, sizeof range, "%.2f-%.2f", x->gbps_min, x->gbps_max);
    fprintf(out, "%-14s %8.2f %13s %8s %6.0f %9.3f %9.3f %s%-8s%s ", label(c, p), v, range, ratio,
            x->seconds > 0 ? 100.0 * x->cpu_seconds / x->seconds : 0, x->p50_us / 1e3,
            x->p99_us / 1e3,
            x->verified == 0   ? k->red
            : x->verified == 1 ? k->green
                               : "",
            data, k->off);
    gdu_text_put(out, x->note);
    fputc('\n', out);
}

void bench_print_table(FILE *out, const bench_config *c, const bench_gpu *g, const bench_result *r)
{
    bool color = use_color(out);
    paint k = {color ? "\033[1m" : "", color ? "\033[31m" : "", color ? "\033[32m" : "",
               color ? "\033[0m" : ""};
    print_heading(out, c, g, &k);
    double ceil = bench_ceiling(r);
    fprintf(out, "%s%-14s %8s %13s %8s %6s %9s %9s %-8s %s%s\n", k.bold, "path", "GB/s", "range",
            "x ceil", "CPU%", "p50 ms", "p99 ms", "data", "note", k.off);
    bool without_gpu = false;
    for (int p = 0; p < BENCH_NPATHS; p++) {
        const bench_result *x = &r[p];
        if (!x->requested)
            continue;
        if (!x->ran || x->status != 0)
            without_gpu |= print_failed_row(out, c, g, x, p, &k);
        else
            print_row(out, c, x, p, ceil, &k);
    }
    if (ceil > 0)
        fprintf(out,
                "ceiling: %.2f GB/s = min(host, %s) of this run; GB/s is each path's median of %u "
                "rounds, range its slowest-fastest\n",
                ceil, c->write ? "d2h" : "h2d", c->rounds);
    if (without_gpu) {
        gdu_text_put(out, g->why);
        fputc('\n', out);
    }
}

static json_t *machine(const bench_gpu *g)
{
    struct utsname u;
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    json_t *m = json_pack("{s:o, s:i}", "hostname", gdu_json_text(host), "cpus",
                          (int)sysconf(_SC_NPROCESSORS_ONLN));
    if (uname(&u) == 0)
        json_object_set_new(m, "kernel", gdu_json_text(u.release));
    json_object_set_new(m, "gpu", g->ok ? gdu_json_text(g->name) : json_null());
    return m;
}

json_t *bench_to_json(const bench_config *c, const bench_gpu *g, const bench_result *r)
{
    /* The file as the user named it (exact in file_escaped when not UTF-8). */
    json_t *params = json_object();
    gdu_json_set_text(params, "file", c->file);
    json_object_update_new(
        params,
        json_pack("{s:I, s:I, s:i, s:I, s:i, s:s, s:s, s:b, s:i, s:s}", "total_bytes",
                  (json_int_t)c->total, "io_bytes", (json_int_t)c->io_size, "workers",
                  (int)c->workers, "chunk_bytes", (json_int_t)c->chunk, "staging", (int)c->staging,
                  "op", c->write ? "write" : "read", "order", c->random ? "rand" : "seq", "cold",
                  c->cold, "device", c->device, "mem", c->vmm ? "vmm" : "cudamalloc"));
    json_object_set_new(params, "rounds", json_integer(c->rounds));
    json_object_set_new(params, "seconds", json_integer(c->seconds));
    json_object_set_new(params, "verify", json_boolean(c->verify));
    json_object_set_new(params, "file_note",
                        c->file_note ? gdu_json_text(c->file_note) : json_null());
    json_t *paths = json_array();
    for (int p = 0; p < BENCH_NPATHS; p++) {
        const bench_result *x = &r[p];
        if (!x->requested)
            continue;
        bool ok = x->ran && x->status == 0;
        json_t *o = json_pack("{s:s, s:b, s:o}", "path", label(c, p), "ran", ok, "note",
                              gdu_json_text(x->note));
        if (ok) {
            json_object_set_new(o, "gbps", json_real(bench_gbps(x)));
            json_t *all = json_array();
            for (unsigned i = 0; i < x->rounds; i++)
                json_array_append_new(all, json_real(x->round_gbps[i]));
            json_object_set_new(o, "gbps_rounds", all);
            json_object_set_new(o, "gbps_min", json_real(x->gbps_min));
            json_object_set_new(o, "gbps_max", json_real(x->gbps_max));
            json_object_set_new(
                o, "spread",
                json_real(bench_gbps(x) > 0 ? (x->gbps_max - x->gbps_min) / bench_gbps(x) : 0));
            json_object_set_new(o, "bytes", json_integer((json_int_t)x->bytes));
            json_object_set_new(o, "passes", json_integer(x->passes));
            json_object_set_new(o, "seconds", json_real(x->seconds));
            json_object_set_new(
                o, "cpu_percent",
                json_real(x->seconds > 0 ? 100.0 * x->cpu_seconds / x->seconds : 0));
            json_object_set_new(o, "p50_us", json_real(x->p50_us));
            json_object_set_new(o, "p99_us", json_real(x->p99_us));
            double ceil = bench_ceiling(r);
            json_object_set_new(o, "ratio_to_ceiling",
                                ceil > 0 ? json_real(bench_gbps(x) / ceil) : json_null());
            json_object_set_new(o, "verified",
                                x->verified < 0 ? json_null() : json_boolean(x->verified));
        } else if (x->status != 0) {
            json_object_set_new(o, "errno", json_integer(-x->status));
        }
        json_array_append_new(paths, o);
    }
    return json_pack("{s:o, s:o, s:o, s:f}", "machine", machine(g), "params", params, "paths",
                     paths, "ceiling_gbps", bench_ceiling(r));
}
