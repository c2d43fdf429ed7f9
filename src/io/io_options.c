/* Engine tunables: defaults, names, and the GDUNLOCK_IO_* environment overrides. */
#include "gdunlock/io.h"
#include "util/units.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const backend_names[] = {"auto", "cufile", "pipeline", "host"};

unsigned gdu_io_default_workers(void)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    long n = cpus > 0 ? cpus / 2 : 2;
    if (n < 2)
        n = 2;
    return n > (long)GDU_IO_MAX_DEFAULT_WORKERS ? GDU_IO_MAX_DEFAULT_WORKERS : (unsigned)n;
}

void gdu_io_options_default(gdu_io_options *o)
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
    for (unsigned i = 0; i < sizeof backend_names / sizeof backend_names[0]; i++)
        if (strcmp(name, backend_names[i]) == 0) {
            *out = (gdu_io_backend)i;
            return 0;
        }
    return -EINVAL;
}

static int parse_direct(const char *text, gdu_io_direct *out)
{
    if (strcmp(text, "auto") == 0)
        *out = GDU_IO_DIRECT_AUTO;
    else if (strcmp(text, "on") == 0 || strcmp(text, "1") == 0)
        *out = GDU_IO_DIRECT_ON;
    else if (strcmp(text, "off") == 0 || strcmp(text, "0") == 0)
        *out = GDU_IO_DIRECT_OFF;
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

int gdu_io_options_from_env(gdu_io_options *o, char *why, size_t why_len)
{
    gdu_io_options n = *o;
    const char *v;
    if ((v = getenv("GDUNLOCK_IO_BACKEND")) != NULL && *v) {
        gdu_io_backend b;
        if (gdu_io_backend_parse(v, &b) != 0)
            return bad(why, why_len, "GDUNLOCK_IO_BACKEND", v, "auto, cufile, pipeline or host");
        /* HOST takes host pointers, the others device pointers: switching
         * between them would misread every address the caller passes. */
        if ((b == GDU_IO_BACKEND_HOST) != (o->backend == GDU_IO_BACKEND_HOST))
            return bad(why, why_len, "GDUNLOCK_IO_BACKEND", v,
                       o->backend == GDU_IO_BACKEND_HOST
                           ? "host (this caller passes host memory)"
                           : "auto, cufile or pipeline (this caller passes device memory)");
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
            return bad(why, why_len, "GDUNLOCK_IO_DIRECT", v, "auto, on or off");
    }
    *o = n;
    return 0;
}
