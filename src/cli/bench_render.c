/* gdunlock bench output: the human table and the --json document. */
#include "cli/bench_render.h"

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

static bool use_color(void)
{
    const char *nc = getenv("NO_COLOR");
    return isatty(STDOUT_FILENO) && (nc == NULL || nc[0] == '\0');
}

void bench_print_table(const bench_config *c, const bench_gpu *g, const bench_result *r)
{
    bool color = use_color();
    const char *bold = color ? "\033[1m" : "", *red = color ? "\033[31m" : "",
               *green = color ? "\033[32m" : "", *off = color ? "\033[0m" : "";
    /* The file, the GPU's name and the notes (errors with paths) are
     * outside text: escaped. */
    printf("%s%s ", bold, c->write ? "write" : "read");
    gdu_text_put(stdout, c->file);
    printf(", %.2f GiB in %llu KiB I/Os, %u workers, %s, %s, GPU %d ",
           (double)c->total / (1u << 30), (unsigned long long)(c->io_size >> 10), c->workers,
           c->random ? "random" : "sequential", c->cold ? "cold (O_DIRECT)" : "warm page cache",
           c->device);
    gdu_text_put(stdout, g->ok ? g->name : "(none)");
    if (c->seconds > 0)
        printf(", each path %u s a round", c->seconds);
    printf("%s\n", off);
    double ceil = bench_ceiling(r);
    printf("%s%-14s %8s %13s %8s %6s %9s %9s %-8s %s%s\n", bold, "path", "GB/s", "range", "x ceil",
           "CPU%", "p50 ms", "p99 ms", "data", "note", off);
    bool without_gpu = false; /* rows that say so; why, once below the table */
    for (int p = 0; p < BENCH_NPATHS; p++) {
        const bench_result *x = &r[p];
        if (!x->requested)
            continue;
        if (!x->ran || x->status != 0) {
            printf("%s%-14s %8s %13s %8s %6s %9s %9s %-8s ", bench_failed(x) ? red : "",
                   label(c, p), "-", "-", "-", "-", "-", "-", "-");
            if (x->status == -ENODEV && !g->ok && !bench_is_host(p)) {
                printf("no GPU %d: see below", c->device);
                without_gpu = true;
            } else {
                gdu_text_put(stdout, x->note);
            }
            printf("%s\n", off);
            continue;
        }
        double v = bench_gbps(x);
        char ratio[16] = "-";
        if (ceil > 0)
            snprintf(ratio, sizeof ratio, "%.2f", v / ceil);
        const char *data = x->verified == 1 ? "ok" : x->verified == 0 ? "WRONG" : "-";
        char range[32];
        snprintf(range, sizeof range, "%.2f-%.2f", x->gbps_min, x->gbps_max);
        printf("%-14s %8.2f %13s %8s %6.0f %9.3f %9.3f %s%-8s%s ", label(c, p), v, range, ratio,
               x->seconds > 0 ? 100.0 * x->cpu_seconds / x->seconds : 0, x->p50_us / 1e3,
               x->p99_us / 1e3,
               x->verified == 0   ? red
               : x->verified == 1 ? green
                                  : "",
               data, off);
        gdu_text_put(stdout, x->note);
        putchar('\n');
    }
    if (ceil > 0)
        printf("ceiling: %.2f GB/s = min(host, %s) of this run; GB/s is each path's median of %u "
               "rounds, range its slowest-fastest\n",
               ceil, c->write ? "d2h" : "h2d", c->rounds);
    if (without_gpu) {
        gdu_text_put(stdout, g->why);
        putchar('\n');
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
