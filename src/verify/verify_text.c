/* verify's document as text for people: the verdict, then each step of
 * the run, what nvidia-fs counted, and why the path is not DIRECT. The
 * document's outside text (paths, library messages) is the caller's to
 * escape first (gdu_json_escaped_copy). */
#include "verify/verify_text.h"

#include "util/units.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct style {
    const char *on, *off;
};

bool gdu_verify_want_color(FILE *out) { return isatty(fileno(out)) && !getenv("NO_COLOR"); }

static struct style verdict_style(const char *verdict, bool color)
{
    if (!color)
        return (struct style){"", ""};
    if (strcmp(verdict, "DIRECT") == 0)
        return (struct style){"\033[1;32m", "\033[0m"};
    if (strcmp(verdict, "COMPAT") == 0)
        return (struct style){"\033[1;33m", "\033[0m"};
    return (struct style){"\033[1;31m", "\033[0m"};
}

static const char *str(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

static void print_call(FILE *out, const char *label, const json_t *call)
{
    if (json_is_true(json_object_get(call, "ran")))
        fprintf(out, "  %-14s %s %s\n", label,
                json_is_true(json_object_get(call, "ok")) ? "ok  " : "FAIL", str(call, "text"));
}

static void print_nvfs(FILE *out, const json_t *nv)
{
    if (!json_is_true(json_object_get(nv, "before")) ||
        !json_is_true(json_object_get(nv, "after"))) {
        fprintf(out, "  %-14s %s\n", "nvidia-fs", str(nv, "error"));
        return;
    }
    fprintf(out, "  %-14s driver %s, stats ver %lld%s\n", "nvidia-fs", str(nv, "driver_version"),
            json_integer_value(json_object_get(nv, "stats_version")),
            json_is_true(json_object_get(nv, "counters_reset"))
                ? " (counters were reset during the run)"
                : "");
    static const char *const shown[] = {"bar1_map.n",          "bar1_map.ok",        "bar1_map.err",
                                        "reads.err",           "reads.io_state_err", "writes.err",
                                        "writes.io_state_err", "shadow_buffer_mib"};
    const json_t *delta = json_object_get(nv, "delta");
    fprintf(out, "  %-14s", "  deltas");
    for (size_t i = 0; i < sizeof shown / sizeof shown[0]; i++) {
        const json_t *v = json_object_get(delta, shown[i]);
        if (v)
            fprintf(out, " %s %+lld", shown[i], json_integer_value(v));
    }
    fprintf(out, "\n");
    size_t i;
    const json_t *g;
    json_array_foreach(json_object_get(nv, "gpus"), i, g)
        fprintf(out, "  %-14s GPU %s Registered_MiB %+lld (now %lld), Cache_MiB %+lld\n", "",
                str(g, "pci"), json_integer_value(json_object_get(g, "registered_mib_delta")),
                json_integer_value(json_object_get(g, "registered_mib_after")),
                json_integer_value(json_object_get(g, "cache_mib_delta")));
}

static void print_shim(FILE *out, const json_t *shim)
{
    if (!json_is_true(json_object_get(shim, "active"))) {
        fprintf(out, "  %-14s not active: %s\n", "shim", str(shim, "why_inactive"));
        return;
    }
    fprintf(out, "  %-14s active%s%s%s%s", "shim", *str(shim, "mode") ? ", mode " : "",
            str(shim, "mode"), *str(shim, "reason") ? ": " : "", str(shim, "reason"));
    if (json_object_get(shim, "registered"))
        fprintf(out, " (allocations registered %lld, unregistered %lld)",
                json_integer_value(json_object_get(shim, "registered")),
                json_integer_value(json_object_get(shim, "unregistered")));
    fprintf(out, "\n");
    const json_t *k = json_object_get(shim, "kernel_lookup");
    if (k != NULL)
        fprintf(out,
                "  %-14s %lld of %lld cuFile buffers found by nvidia-fs's lookup (model)%s%s\n",
                "kernel lookup", json_integer_value(json_object_get(k, "found")),
                json_integer_value(json_object_get(k, "cufile_buffers")),
                *str(k, "first_refusal") ? ": " : "", str(k, "first_refusal"));
}

/* cuFile's steps before any buffer: the library, the driver, the handle. */
static void print_cufile(FILE *out, const json_t *cf)
{
    print_call(out, "libcufile", json_object_get(cf, "load"));
    print_call(out, "driver open", json_object_get(cf, "driver_open"));
    if (*str(cf, "nvfs_version"))
        fprintf(out, "  %-14s nvfs %s%s\n", "properties", str(cf, "nvfs_version"),
                json_is_true(json_object_get(cf, "compat_allowed")) ? ", compat mode allowed" : "");
    print_call(out, "handle", json_object_get(cf, "handle_register"));
    if (*str(cf, "log"))
        fprintf(out, "  %-14s %s\n", "cuFile log", str(cf, "log"));
}

/* Each kind of GPU buffer: allocated, registered, written, read, compared. */
static void print_buffers(FILE *out, const json_t *buffers)
{
    size_t i;
    const json_t *b;
    json_array_foreach(buffers, i, b)
    {
        const char *kind = str(b, "kind");
        if (*str(b, "skipped")) {
            fprintf(out, "  %-14s skipped: %s\n", kind, str(b, "skipped"));
            continue;
        }
        print_call(out, kind, json_object_get(b, "alloc"));
        print_call(out, "  register", json_object_get(b, "buf_register"));
        print_call(out, "  write", json_object_get(b, "write"));
        print_call(out, "  read", json_object_get(b, "read"));
        if (json_is_true(json_object_get(b, "compared")))
            fprintf(out, "  %-14s %s\n", "  compare",
                    json_is_true(json_object_get(b, "integrity_ok")) ? "identical" : "DIFFERENT");
    }
}

/* "title:" and its items' text and id, when there are any. */
static void print_items(FILE *out, const char *title, const json_t *items)
{
    if (json_array_size(items) == 0)
        return;
    fprintf(out, "\n%s:\n", title);
    size_t i;
    const json_t *x;
    json_array_foreach(items, i, x) fprintf(out, "  - %s [%s]\n", str(x, "text"), str(x, "id"));
}

void gdu_verify_print(FILE *out, const json_t *doc, bool color)
{
    const char *verdict = str(doc, "verdict");
    struct style st = verdict_style(verdict, color);
    const json_t *file = json_object_get(doc, "file"), *gpu = json_object_get(doc, "gpu");
    fprintf(out, "gdunlock verify: %s%s%s\n\n", st.on, verdict, st.off);
    char size[32];
    gdu_format_bytes((uint64_t)json_integer_value(json_object_get(file, "size")), size,
                     sizeof size);
    fprintf(out, "  %-14s %s, %s per transfer\n", "file", str(file, "path"), size);
    fprintf(out, "  %-14s %lld %s (%s)\n", "GPU", json_integer_value(json_object_get(gpu, "index")),
            str(gpu, "name"), str(gpu, "pci"));
    print_shim(out, json_object_get(doc, "shim"));
    print_call(out, "file open", json_object_get(file, "open"));
    print_cufile(out, json_object_get(doc, "cufile"));
    print_buffers(out, json_object_get(doc, "buffers"));
    print_nvfs(out, json_object_get(doc, "nvidia_fs"));
    const json_t *engine = json_object_get(doc, "engine");
    if (json_is_true(json_object_get(json_object_get(engine, "check"), "ran"))) {
        print_call(out, "engine check", json_object_get(engine, "check"));
        fprintf(out, "  %-14s %s\n", "", str(engine, "reason"));
    }
    const json_t *doctor = json_object_get(doc, "doctor");
    if (doctor)
        fprintf(out, "  %-14s GPUDirect Storage for %s: %s\n", "doctor", str(doctor, "target"),
                str(doctor, "gds_verdict"));
    print_items(out, strcmp(verdict, "FAILED") == 0 ? "what failed" : "why not DIRECT",
                json_object_get(doc, "reasons"));
    print_items(out, "notes", json_object_get(doc, "notes"));
}
