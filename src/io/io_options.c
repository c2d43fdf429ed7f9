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

/* The settings, each as an environment variable and as the name
 * gdu_io_defaults_set takes. */
enum { SET_BACKEND, SET_WORKERS, SET_CHUNK, SET_STAGING, SET_DIRECT, SET_COUNT };
static const struct {
    const char *name, *var;
} settings[SET_COUNT] = {
    {"backend", "GDUNLOCK_IO_BACKEND"}, {"workers", "GDUNLOCK_IO_WORKERS"},
    {"chunk", "GDUNLOCK_IO_CHUNK"},     {"staging", "GDUNLOCK_IO_STAGING"},
    {"direct", "GDUNLOCK_IO_DIRECT"},
};

/* Sets setting i of o from its text v (the environment's form). */
static int parse_setting(gdu_io_options *o, int i, const char *v, char *why, size_t why_len)
{
    const char *var = settings[i].var;
    uint64_t x;
    switch (i) {
    case SET_BACKEND: {
        gdu_io_backend b;
        if (gdu_io_backend_parse(v, &b) != 0)
            return bad(why, why_len, var, v, "auto, cufile, pipeline or host");
        /* HOST takes host pointers, the others device pointers: which one
         * is the caller's to say, by the memory it passes. */
        if (b == GDU_IO_BACKEND_HOST)
            return bad(why, why_len, var, v,
                       "auto, cufile or pipeline (host memory is the caller's choice, not a "
                       "setting)");
        o->backend = b;
        break;
    }
    case SET_WORKERS:
        if (gdu_parse_uint(v, 1, GDU_IO_MAX_WORKERS, &x) != 0)
            return bad(why, why_len, var, v, "an integer in 1..256");
        o->workers = (unsigned)x;
        break;
    case SET_CHUNK:
        if (gdu_parse_size(v, &x) != 0 || x == 0 || x % GDU_IO_ALIGN != 0 || x > GDU_IO_MAX_CHUNK)
            return bad(why, why_len, var, v,
                       "a size that is a multiple of 4 KiB, at most 1 GiB (e.g. 4M)");
        o->chunk_size = (size_t)x;
        break;
    case SET_STAGING:
        if (gdu_parse_uint(v, 1, GDU_IO_MAX_STAGING, &x) != 0)
            return bad(why, why_len, var, v, "an integer in 1..16");
        o->staging_per_worker = (unsigned)x;
        break;
    case SET_DIRECT:
        if (parse_direct(v, &o->direct) != 0)
            return bad(why, why_len, var, v, "auto or a boolean: " GDU_BOOL_WORDS);
        break;
    }
    return 0;
}

int gdu_io_options_parse_env(gdu_io_options *o, char *why, size_t why_len)
{
    gdu_io_options n = *o;
    for (int i = 0; i < SET_COUNT; i++) {
        const char *v = getenv(settings[i].var);
        if (v != NULL && *v && parse_setting(&n, i, v, why, why_len) != 0)
            return -EINVAL;
    }
    *o = n;
    return 0;
}

static struct {
    pthread_once_t once;
    pthread_mutex_t lock; /* options and chunk_given, after the first read */
    gdu_io_options options;
    int chunk_given; /* the chunk was set, not O_DIRECT's default */
    int status;
    char why[GDU_IO_WHY];
} process_defaults = {.once = PTHREAD_ONCE_INIT, .lock = PTHREAD_MUTEX_INITIALIZER};

/* O_DIRECT's own default chunk where direct is ON and no chunk was set. */
static void direct_chunk(gdu_io_options *o, int chunk_given)
{
    if (!chunk_given)
        o->chunk_size =
            o->direct == GDU_IO_DIRECT_ON ? GDU_IO_DEFAULT_DIRECT_CHUNK : GDU_IO_DEFAULT_CHUNK;
}

static void read_process_defaults(void)
{
    gdu_io_options o;
    builtin_defaults(&o);
    process_defaults.status =
        gdu_io_options_parse_env(&o, process_defaults.why, sizeof process_defaults.why);
    const char *chunk = getenv("GDUNLOCK_IO_CHUNK");
    process_defaults.chunk_given = chunk != NULL && *chunk;
    if (process_defaults.status == 0) {
        direct_chunk(&o, process_defaults.chunk_given);
        process_defaults.options = o;
    } else {
        builtin_defaults(&process_defaults.options);
        process_defaults.chunk_given = 0;
    }
}

int gdu_io_defaults_set(const char *name, const char *value, char *why, size_t why_len)
{
    if (name == NULL || value == NULL)
        return -EINVAL;
    int i = 0;
    while (i < SET_COUNT && strcasecmp(name, settings[i].name) != 0 &&
           strcasecmp(name, settings[i].var) != 0)
        i++;
    if (i == SET_COUNT) {
        if (why != NULL && why_len > 0)
            snprintf(why, why_len,
                     "no setting named '%s': backend, workers, chunk, staging or direct", name);
        return -EINVAL;
    }
    pthread_once(&process_defaults.once, read_process_defaults);
    pthread_mutex_lock(&process_defaults.lock);
    gdu_io_options o = process_defaults.options;
    int rc = parse_setting(&o, i, value, why, why_len);
    if (rc == 0) {
        if (i == SET_CHUNK)
            process_defaults.chunk_given = 1;
        direct_chunk(&o, process_defaults.chunk_given);
        process_defaults.options = o;
    }
    pthread_mutex_unlock(&process_defaults.lock);
    return rc;
}

int gdu_io_options_default(gdu_io_options *o, char *why, size_t why_len)
{
    if (o == NULL)
        return -EINVAL;
    pthread_once(&process_defaults.once, read_process_defaults);
    pthread_mutex_lock(&process_defaults.lock);
    *o = process_defaults.options;
    pthread_mutex_unlock(&process_defaults.lock);
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
