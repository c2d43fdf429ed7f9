/* Engine tunables: built-in defaults, the GDUNLOCK_IO_* environment as the
 * process's defaults (read once, as kvikio reads its settings), names. */
#include "io/io_internal.h"
#include "util/units.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static const char *const backend_names[] = {"auto", "cufile", "pipeline", "host"};

unsigned gdu_io_workers_for_cpus(long cpus)
{
    /* A quarter of the CPUs stays with the thread that submits and the
     * process around it: with one worker per CPU they starved the caller's
     * thread, which a rank's slices are bound by (docs/io-api.md). */
    long n = cpus - cpus / 4;
    if (n < 2)
        n = 2;
    return n > (long)GDU_IO_MAX_DEFAULT_WORKERS ? GDU_IO_MAX_DEFAULT_WORKERS : (unsigned)n;
}

unsigned gdu_io_default_workers(void)
{
    return gdu_io_workers_for_cpus(sysconf(_SC_NPROCESSORS_ONLN));
}

static void builtin_defaults(gdu_io_options *o)
{
    memset(o, 0, sizeof *o);
    o->backend = GDU_IO_BACKEND_AUTO;
    o->direct = GDU_IO_DIRECT_AUTO;
    o->workers = gdu_io_default_workers();
    o->chunk_size = GDU_IO_DEFAULT_CHUNK;
    o->staging_per_worker = GDU_IO_DEFAULT_STAGING;
}

const char *gdu_io_backend_name(gdu_io_backend b)
{
    if ((unsigned)b < sizeof backend_names / sizeof backend_names[0])
        return backend_names[b];
    return "unknown";
}

int gdu_io_backend_parse(const char *name, gdu_io_backend *out)
{
    if (name == NULL || out == NULL)
        return -EINVAL;
    for (unsigned i = 0; i < sizeof backend_names / sizeof backend_names[0]; i++)
        if (strcmp(name, backend_names[i]) == 0) {
            *out = (gdu_io_backend)i;
            return 0;
        }
    return -EINVAL;
}

static int parse_direct(const char *text, gdu_io_direct *out)
{
    int on;
    if (strcasecmp(text, "auto") == 0)
        *out = GDU_IO_DIRECT_AUTO;
    else if (gdu_parse_bool(text, &on) == 0)
        *out = on ? GDU_IO_DIRECT_ON : GDU_IO_DIRECT_OFF;
    else
        return -EINVAL;
    return 0;
}

static int bad(char *why, size_t len, const char *var, const char *value, const char *expect)
{
    if (why != NULL && len > 0)
        snprintf(why, len, "%s=%s is invalid: expected %s", var, value, expect);
    return -EINVAL;
}

int gdu_io_options_parse_env(gdu_io_options *o, char *why, size_t why_len)
{
    gdu_io_options n = *o;
    const char *v;
    if ((v = getenv("GDUNLOCK_IO_BACKEND")) != NULL && *v) {
        gdu_io_backend b;
        if (gdu_io_backend_parse(v, &b) != 0)
            return bad(why, why_len, "GDUNLOCK_IO_BACKEND", v, "auto, cufile, pipeline or host");
        /* HOST takes host pointers, the others device pointers: which one
         * is the caller's to say, by the memory it passes. */
        if (b == GDU_IO_BACKEND_HOST)
            return bad(why, why_len, "GDUNLOCK_IO_BACKEND", v,
                       "auto, cufile or pipeline (host memory is the caller's choice, not a "
                       "setting)");
        n.backend = b;
    }
    uint64_t x;
    if ((v = getenv("GDUNLOCK_IO_WORKERS")) != NULL && *v) {
        if (gdu_parse_uint(v, 1, GDU_IO_MAX_WORKERS, &x) != 0)
            return bad(why, why_len, "GDUNLOCK_IO_WORKERS", v, "an integer in 1..256");
        n.workers = (unsigned)x;
    }
    if ((v = getenv("GDUNLOCK_IO_CHUNK")) != NULL && *v) {
        if (gdu_parse_size(v, &x) != 0 || x == 0 || x % GDU_IO_ALIGN != 0 || x > GDU_IO_MAX_CHUNK)
            return bad(why, why_len, "GDUNLOCK_IO_CHUNK", v,
                       "a size that is a multiple of 4 KiB, at most 1 GiB (e.g. 4M)");
        n.chunk_size = (size_t)x;
    }
    if ((v = getenv("GDUNLOCK_IO_STAGING")) != NULL && *v) {
        if (gdu_parse_uint(v, 1, GDU_IO_MAX_STAGING, &x) != 0)
            return bad(why, why_len, "GDUNLOCK_IO_STAGING", v, "an integer in 1..16");
        n.staging_per_worker = (unsigned)x;
    }
    if ((v = getenv("GDUNLOCK_IO_DIRECT")) != NULL && *v) {
        if (parse_direct(v, &n.direct) != 0)
            return bad(why, why_len, "GDUNLOCK_IO_DIRECT", v, "auto or a boolean: " GDU_BOOL_WORDS);
    }
    *o = n;
    return 0;
}

static struct {
    pthread_once_t once;
    gdu_io_options options;
    int status;
    char why[GDU_IO_WHY];
} process_defaults = {PTHREAD_ONCE_INIT};

static void read_process_defaults(void)
{
    gdu_io_options o;
    builtin_defaults(&o);
    process_defaults.status =
        gdu_io_options_parse_env(&o, process_defaults.why, sizeof process_defaults.why);
    const char *chunk = getenv("GDUNLOCK_IO_CHUNK");
    if (process_defaults.status == 0 && o.direct == GDU_IO_DIRECT_ON && (chunk == NULL || !*chunk))
        o.chunk_size = GDU_IO_DEFAULT_DIRECT_CHUNK; /* O_DIRECT's own default chunk */
    if (process_defaults.status == 0)
        process_defaults.options = o;
    else
        builtin_defaults(&process_defaults.options);
}

int gdu_io_options_default(gdu_io_options *o, char *why, size_t why_len)
{
    if (o == NULL)
        return -EINVAL;
    pthread_once(&process_defaults.once, read_process_defaults);
    *o = process_defaults.options;
    if (process_defaults.status != 0 && why != NULL && why_len > 0)
        snprintf(why, why_len, "%s", process_defaults.why);
    return process_defaults.status;
}

/* "NAME (value)" where the variable is set, else "the engine's <what>". */
static void setting_name(char *buf, size_t len, const char *var, const char *what)
{
    const char *v = getenv(var);
    if (v != NULL && *v)
        snprintf(buf, len, "%s (%s)", var, v);
    else
        snprintf(buf, len, "%s", what);
}

int gdu_io_options_bound_staging(gdu_io_options *o, uint64_t memory, char *why, size_t len)
{
    uint64_t limit = memory / GDU_IO_STAGING_MEMORY_SHARE;
    uint64_t bytes = (uint64_t)o->workers * o->staging_per_worker * o->chunk_size;
    if (memory == 0 || bytes <= limit)
        return 0;
    bool builtin =
        o->staging_per_worker == GDU_IO_DEFAULT_STAGING && o->workers == gdu_io_default_workers() &&
        (o->chunk_size == GDU_IO_DEFAULT_CHUNK || o->chunk_size == GDU_IO_DEFAULT_DIRECT_CHUNK);
    if (builtin) { /* a small machine: fewer slots, then fewer workers */
        while (bytes > limit && o->staging_per_worker > 1)
            bytes = (uint64_t)o->workers * --o->staging_per_worker * o->chunk_size;
        while (bytes > limit && o->workers > 1)
            bytes = (uint64_t)--o->workers * o->staging_per_worker * o->chunk_size;
        if (bytes <= limit)
            return 0;
    }
    char chunk[64], staging[64], workers[64], have[32], need[32], mem[32];
    setting_name(chunk, sizeof chunk, "GDUNLOCK_IO_CHUNK", "chunk_size");
    setting_name(staging, sizeof staging, "GDUNLOCK_IO_STAGING", "staging_per_worker");
    setting_name(workers, sizeof workers, "GDUNLOCK_IO_WORKERS", "workers");
    gdu_format_bytes(bytes, need, sizeof need);
    gdu_format_bytes(o->chunk_size, have, sizeof have);
    gdu_format_bytes(memory, mem, sizeof mem);
    snprintf(why, len,
             "staging of %u workers x %u slots x %s chunks is %s, more than a quarter of this "
             "machine's %s of memory: lower %s, %s or %s",
             o->workers, o->staging_per_worker, have, need, mem, chunk, staging, workers);
    return -EINVAL;
}
