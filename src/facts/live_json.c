/* gdunlock-live.json: the live answers of a captured machine. */
#include "facts/live.h"

#include "util/pci_addr.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIVE_FORMAT "gdunlock-live/1"

static json_t *pair_to_json(const gdu_live_pair *p)
{
    json_t *o = json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:i}", "a", p->a, "b", p->b,
                          "can_access_peer", p->can_access, "performance_rank", p->performance_rank,
                          "access_supported", p->access_supported, "native_atomics",
                          p->native_atomics, "cuda_array_access", p->cuda_array_access);
    if (o != NULL && p->rm_known) {
        json_t *status = json_array();
        for (unsigned i = 0; i < GDU_P2P_CAPS_INDEX_COUNT; i++)
            json_array_append_new(status, json_integer(p->rm.status[i]));
        json_object_set_new(o, "rm",
                            json_pack("{s:I, s:o, s:[I,I]}", "caps", (json_int_t)p->rm.caps,
                                      "status", status, "optimal_ces",
                                      (json_int_t)p->rm.optimal_read_ces,
                                      (json_int_t)p->rm.optimal_write_ces));
    }
    return o;
}

json_t *gdu_live_to_json(const gdu_live *live)
{
    json_t *gpus = json_array(), *pairs = json_array(), *paths = json_array();
    for (size_t i = 0; i < live->n_gpus; i++) {
        const gdu_live_gpu *g = &live->gpus[i];
        json_t *o = json_pack("{s:i, s:s, s:s, s:I, s:[i,i]}", "ordinal", g->ordinal, "name",
                              g->name, "pci", g->bdf, "total_mem", (json_int_t)g->total_mem, "cc",
                              g->cc_major, g->cc_minor);
        if (o != NULL && g->rm_known)
            json_object_set_new(o, "rm_gpu_id", json_integer(g->rm_gpu_id));
        if (o != NULL && g->rm_bar1_known) {
            json_t *b = json_pack("{s:I, s:I}", "total", (json_int_t)g->rm_bar1_total, "available",
                                  (json_int_t)g->rm_bar1_available);
            if (b != NULL && g->rm_static_known)
                json_object_set_new(b, "static",
                                    json_pack("{s:b, s:b, s:I}", "enabled", g->rm_static_bar1,
                                              "write_combined", g->rm_static_wc, "size",
                                              (json_int_t)g->rm_static_size));
            json_object_set_new(o, "rm_bar1", b);
        } else if (o != NULL)
            json_object_set_new(o, "rm_bar1_why", json_string(g->rm_bar1_why));
        json_array_append_new(gpus, o);
    }
    for (size_t i = 0; i < live->n_pairs; i++)
        json_array_append_new(pairs, pair_to_json(&live->pairs[i]));
    for (size_t i = 0; i < live->n_paths; i++) {
        const gdu_live_path *p = &live->paths[i];
        json_array_append_new(paths, json_pack("{s:s, s:i, s:s, s:I}", "path", p->path, "o_direct",
                                               p->o_direct, "o_direct_error", p->o_direct_error,
                                               "fs_magic", (json_int_t)p->fs_magic));
    }
    json_t *doc =
        json_pack("{s:s, s:i, s:{s:b, s:s, s:i, s:o, s:o, s:s}, s:{s:b, s:s, s:s, s:s, s:s}, s:o}",
                  "format", LIVE_FORMAT, "euid", live->euid, "cuda", "ok", live->cuda_ok, "why",
                  live->cuda_why, "driver_version", live->cuda_version, "gpus", gpus, "pairs",
                  pairs, "rm_why", live->rm_why, "cufile", "found", live->cufile_found, "path",
                  live->cufile_path, "version", live->cufile_version, "why", live->cufile_why,
                  "env_json", live->cufile_env_json, "paths", paths);
    if (doc != NULL)
        json_object_set_new(doc, "kernel",
                            json_pack("{s:i}", "p2pdma_pgmap_ops", live->kernel_p2pdma));
    return doc;
}

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a number with a fraction";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    default:
        return "null";
    }
}

/* The capture file holds what gdu_live_to_json writes, every field with its
 * type; anything else is not read as a guess (a string "0" for an integer, a
 * missing "found" read as false would each give a verdict on evidence that is
 * not there). kind: 'o' object, 'a' array, 's' string, 'i' integer, 'b'
 * boolean; an upper-case kind is optional. */
typedef struct {
    const char *key;
    char kind;
} live_field;

static bool check_fields(const json_t *obj, const char *where, const live_field *fields, char *why,
                         size_t why_len)
{
    if (!json_is_object(obj)) {
        snprintf(why, why_len, "%s is %s, expected an object", where, type_name(obj));
        return false;
    }
    for (const live_field *f = fields; f->key != NULL; f++) {
        const json_t *v = json_object_get(obj, f->key);
        char kind = (char)(f->kind | 0x20);
        if (v == NULL) {
            if (f->kind == kind) {
                snprintf(why, why_len, "%s%s%s is missing", where, where[0] ? "." : "", f->key);
                return false;
            }
            continue;
        }
        bool ok = kind == 'o'   ? json_is_object(v)
                  : kind == 'a' ? json_is_array(v)
                  : kind == 's' ? json_is_string(v)
                  : kind == 'i' ? json_is_integer(v)
                                : json_is_boolean(v);
        if (!ok) {
            const char *expected = kind == 'o'   ? "an object"
                                   : kind == 'a' ? "an array"
                                   : kind == 's' ? "a string"
                                   : kind == 'i' ? "an integer"
                                                 : "a boolean";
            snprintf(why, why_len, "%s%s%s is %s, expected %s", where, where[0] ? "." : "", f->key,
                     type_name(v), expected);
            return false;
        }
    }
    return true;
}

/* Every element of obj[key] (an array, already checked) is an object with fields. */
static bool check_elements(const json_t *obj, const char *where, const char *key,
                           const live_field *fields, char *why, size_t why_len)
{
    size_t i;
    const json_t *v;
    json_array_foreach(json_object_get(obj, key), i, v)
    {
        char at[96];
        snprintf(at, sizeof at, "%s%s%s[%zu]", where, where[0] ? "." : "", key, i);
        if (!check_fields(v, at, fields, why, why_len))
            return false;
    }
    return true;
}

static bool check_integers(const json_t *array, const char *where, char *why, size_t why_len)
{
    size_t i;
    const json_t *v;
    json_array_foreach(array, i, v) if (!json_is_integer(v))
    {
        snprintf(why, why_len, "%s[%zu] is %s, expected an integer", where, i, type_name(v));
        return false;
    }
    return true;
}

static bool check_live(const json_t *root, char *why, size_t why_len)
{
    static const live_field top[] = {{"euid", 'i'},  {"cuda", 'o'},   {"cufile", 'o'},
                                     {"paths", 'a'}, {"kernel", 'O'}, {0}};
    static const live_field cuda[] = {
        {"ok", 'b'},     {"why", 's'}, {"driver_version", 'i'}, {"gpus", 'a'}, {"pairs", 'a'},
        {"rm_why", 's'}, {0}};
    /* Captures made before the one collector lack the fields marked optional. */
    static const live_field gpu[] = {{"ordinal", 'i'},   {"name", 's'},        {"pci", 's'},
                                     {"total_mem", 'i'}, {"cc", 'a'},          {"rm_gpu_id", 'I'},
                                     {"rm_bar1", 'O'},   {"rm_bar1_why", 'S'}, {0}};
    static const live_field bar1[] = {{"total", 'i'}, {"available", 'i'}, {"static", 'O'}, {0}};
    static const live_field static_bar1[] = {
        {"enabled", 'b'}, {"write_combined", 'b'}, {"size", 'i'}, {0}};
    static const live_field kernel[] = {{"p2pdma_pgmap_ops", 'i'}, {0}};
    static const live_field pair[] = {{"a", 'i'},
                                      {"b", 'i'},
                                      {"can_access_peer", 'i'},
                                      {"performance_rank", 'I'},
                                      {"access_supported", 'I'},
                                      {"native_atomics", 'i'},
                                      {"cuda_array_access", 'I'},
                                      {"rm", 'O'},
                                      {0}};
    static const live_field rm[] = {{"caps", 'i'}, {"status", 'a'}, {"optimal_ces", 'A'}, {0}};
    static const live_field cufile[] = {{"found", 'b'}, {"path", 's'},     {"version", 's'},
                                        {"why", 's'},   {"env_json", 's'}, {0}};
    static const live_field path[] = {
        {"path", 's'}, {"o_direct", 'i'}, {"o_direct_error", 's'}, {"fs_magic", 'i'}, {0}};
    const json_t *c = json_object_get(root, "cuda");
    if (!check_fields(root, "", top, why, why_len) ||
        !check_fields(c, "cuda", cuda, why, why_len) ||
        !check_elements(c, "cuda", "gpus", gpu, why, why_len) ||
        !check_elements(c, "cuda", "pairs", pair, why, why_len) ||
        !check_fields(json_object_get(root, "cufile"), "cufile", cufile, why, why_len) ||
        !check_elements(root, "", "paths", path, why, why_len))
        return false;
    const json_t *k = json_object_get(root, "kernel");
    if (k != NULL && !check_fields(k, "kernel", kernel, why, why_len))
        return false;
    size_t i;
    const json_t *v;
    char at[64];
    json_array_foreach(json_object_get(c, "gpus"), i, v)
    {
        snprintf(at, sizeof at, "cuda.gpus[%zu].cc", i);
        if (!check_integers(json_object_get(v, "cc"), at, why, why_len))
            return false;
        const json_t *b = json_object_get(v, "rm_bar1");
        snprintf(at, sizeof at, "cuda.gpus[%zu].rm_bar1", i);
        if (b != NULL && !check_fields(b, at, bar1, why, why_len))
            return false;
        const json_t *st = json_object_get(b, "static");
        snprintf(at, sizeof at, "cuda.gpus[%zu].rm_bar1.static", i);
        if (st != NULL && !check_fields(st, at, static_bar1, why, why_len))
            return false;
    }
    json_array_foreach(json_object_get(c, "pairs"), i, v)
    {
        const json_t *r = json_object_get(v, "rm");
        snprintf(at, sizeof at, "cuda.pairs[%zu].rm", i);
        if (r != NULL && !check_fields(r, at, rm, why, why_len))
            return false;
        snprintf(at, sizeof at, "cuda.pairs[%zu].rm.status", i);
        if (r != NULL && !check_integers(json_object_get(r, "status"), at, why, why_len))
            return false;
        snprintf(at, sizeof at, "cuda.pairs[%zu].rm.optimal_ces", i);
        const json_t *ces = json_object_get(r, "optimal_ces");
        if (ces != NULL && !check_integers(ces, at, why, why_len))
            return false;
    }
    return true;
}

static void copy_string(const json_t *obj, const char *key, char *out, size_t len)
{
    const json_t *v = json_object_get(obj, key);
    if (json_is_string(v))
        snprintf(out, len, "%s", json_string_value(v));
}

static long long get_int(const json_t *obj, const char *key, long long fallback)
{
    const json_t *v = json_object_get(obj, key);
    return json_is_integer(v) ? (long long)json_integer_value(v) : fallback;
}

static int clamp_tri(long long v) { return v < -1 ? -1 : v > 1 ? 1 : (int)v; }

static void pair_from_json(const json_t *o, gdu_live_pair *p)
{
    memset(p, 0, sizeof *p);
    p->a = (int)get_int(o, "a", -1);
    p->b = (int)get_int(o, "b", -1);
    p->can_access = clamp_tri(get_int(o, "can_access_peer", -1));
    p->performance_rank = (int)get_int(o, "performance_rank", -1);
    p->access_supported = clamp_tri(get_int(o, "access_supported", -1));
    p->native_atomics = clamp_tri(get_int(o, "native_atomics", -1));
    p->cuda_array_access = clamp_tri(get_int(o, "cuda_array_access", -1));
    const json_t *rm = json_object_get(o, "rm");
    const json_t *status = json_object_get(rm, "status");
    if (json_is_object(rm) && json_is_integer(json_object_get(rm, "caps"))) {
        p->rm_known = true;
        p->rm.caps = (uint32_t)get_int(rm, "caps", 0);
        const json_t *ces = json_object_get(rm, "optimal_ces");
        p->rm.optimal_read_ces = (uint32_t)json_integer_value(json_array_get(ces, 0));
        p->rm.optimal_write_ces = (uint32_t)json_integer_value(json_array_get(ces, 1));
        for (unsigned i = 0; i < GDU_P2P_CAPS_INDEX_COUNT; i++) {
            const json_t *s = json_array_get(status, i);
            /* A capability the capture lacks reads as not supported. */
            p->rm.status[i] = json_is_integer(s) ? (uint8_t)json_integer_value(s)
                                                 : GDU_P2P_CAPS_STATUS_NOT_SUPPORTED;
        }
    }
}

int gdu_live_from_json(const json_t *root, gdu_live *out, char *why, size_t why_len)
{
    memset(out, 0, sizeof *out);
    const json_t *format = json_object_get(root, "format");
    if (!json_is_string(format) || strcmp(json_string_value(format), LIVE_FORMAT) != 0) {
        snprintf(why, why_len, "not a %s capture file (\"format\" missing or different)",
                 LIVE_FORMAT);
        return -EINVAL;
    }
    if (!check_live(root, why, why_len))
        return -EINVAL;
    out->origin = GDU_LIVE_CAPTURED;
    out->euid = (int)get_int(root, "euid", -1);
    out->kernel_p2pdma =
        clamp_tri(get_int(json_object_get(root, "kernel"), "p2pdma_pgmap_ops", -1));
    const json_t *cuda = json_object_get(root, "cuda");
    out->cuda_ok = json_is_true(json_object_get(cuda, "ok"));
    copy_string(cuda, "why", out->cuda_why, sizeof out->cuda_why);
    out->cuda_version = (int)get_int(cuda, "driver_version", 0);
    copy_string(cuda, "rm_why", out->rm_why, sizeof out->rm_why);
    size_t i;
    const json_t *v;
    json_array_foreach(json_object_get(cuda, "gpus"), i, v)
    {
        if (out->n_gpus >= GDU_LIVE_MAX_GPUS)
            break;
        gdu_live_gpu *g = &out->gpus[out->n_gpus++];
        char bdf[32] = "";
        g->ordinal = (int)get_int(v, "ordinal", (long long)i);
        copy_string(v, "name", g->name, sizeof g->name);
        copy_string(v, "pci", bdf, sizeof bdf);
        if (gdu_pci_addr_normalize(bdf, g->bdf, sizeof g->bdf) != 0)
            g->bdf[0] = '\0';
        long long mem = get_int(v, "total_mem", 0);
        g->total_mem = mem > 0 ? (uint64_t)mem : 0;
        const json_t *cc = json_object_get(v, "cc");
        g->cc_major = json_is_integer(json_array_get(cc, 0))
                          ? (int)json_integer_value(json_array_get(cc, 0))
                          : 0;
        g->cc_minor = json_is_integer(json_array_get(cc, 1))
                          ? (int)json_integer_value(json_array_get(cc, 1))
                          : 0;
        const json_t *id = json_object_get(v, "rm_gpu_id");
        g->rm_known = json_is_integer(id);
        g->rm_gpu_id = g->rm_known ? (uint32_t)json_integer_value(id) : 0;
        const json_t *bar1 = json_object_get(v, "rm_bar1");
        long long total = get_int(bar1, "total", 0), available = get_int(bar1, "available", 0);
        g->rm_bar1_known = bar1 != NULL && total > 0 && available >= 0;
        g->rm_bar1_total = g->rm_bar1_known ? (uint64_t)total : 0;
        g->rm_bar1_available = g->rm_bar1_known ? (uint64_t)available : 0;
        const json_t *st = json_object_get(bar1, "static");
        g->rm_static_known = json_is_object(st);
        g->rm_static_bar1 = json_is_true(json_object_get(st, "enabled"));
        g->rm_static_wc = json_is_true(json_object_get(st, "write_combined"));
        long long size = get_int(st, "size", 0);
        g->rm_static_size = size > 0 ? (uint64_t)size : 0;
        copy_string(v, "rm_bar1_why", g->rm_bar1_why, sizeof g->rm_bar1_why);
    }
    json_array_foreach(json_object_get(cuda, "pairs"), i, v)
    {
        if (out->n_pairs >= GDU_LIVE_MAX_PAIRS)
            break;
        pair_from_json(v, &out->pairs[out->n_pairs++]);
    }
    const json_t *cf = json_object_get(root, "cufile");
    out->cufile_found = json_is_true(json_object_get(cf, "found"));
    copy_string(cf, "path", out->cufile_path, sizeof out->cufile_path);
    copy_string(cf, "version", out->cufile_version, sizeof out->cufile_version);
    copy_string(cf, "why", out->cufile_why, sizeof out->cufile_why);
    copy_string(cf, "env_json", out->cufile_env_json, sizeof out->cufile_env_json);
    json_array_foreach(json_object_get(root, "paths"), i, v)
    {
        if (out->n_paths >= GDU_LIVE_MAX_PATHS)
            break;
        gdu_live_path *p = &out->paths[out->n_paths++];
        copy_string(v, "path", p->path, sizeof p->path);
        p->o_direct = clamp_tri(get_int(v, "o_direct", -1));
        copy_string(v, "o_direct_error", p->o_direct_error, sizeof p->o_direct_error);
        long long magic = get_int(v, "fs_magic", 0);
        p->fs_magic = magic > 0 ? (unsigned long long)magic : 0;
    }
    return 0;
}

int gdu_live_load(gdu_sysroot *sr, gdu_live *out, char *why, size_t why_len)
{
    memset(out, 0, sizeof *out);
    out->euid = out->kernel_p2pdma = -1;
    char *text;
    long n = gdu_sysroot_read(sr, "/" GDU_LIVE_FILE, &text);
    if (n == -ENOENT)
        return 0; /* no capture file: the live answers stay unknown */
    if (n < 0) {
        snprintf(why, why_len, "%s: %s", GDU_LIVE_FILE,
                 n == -EINVAL ? "not a regular file" : strerror((int)-n));
        return -EINVAL;
    }
    json_error_t err;
    json_t *root = json_loadb(text, (size_t)n, JSON_REJECT_DUPLICATES, &err);
    free(text);
    if (root == NULL) {
        snprintf(why, why_len, "%s: line %d: %s", GDU_LIVE_FILE, err.line, err.text);
        return -EINVAL;
    }
    char inner[200] = "";
    int rc = gdu_live_from_json(root, out, inner, sizeof inner);
    if (rc != 0) {
        memset(out, 0, sizeof *out);
        out->euid = out->kernel_p2pdma = -1;
        snprintf(why, why_len, "%s: %s", GDU_LIVE_FILE, inner);
    }
    json_decref(root);
    return rc;
}
