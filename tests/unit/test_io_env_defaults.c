/* The GDUNLOCK_IO_* defaults as a process that starts with them set sees
 * them (each case is its own process: the defaults are read once). Run as
 * test_io_env_defaults CASE with the case's variables set by ctest:
 *   direct-chunk   GDUNLOCK_IO_DIRECT=on: the default chunk is O_DIRECT's
 *                  16 MiB, and a chunk the caller sets wins;
 *   direct-and-chunk  GDUNLOCK_IO_DIRECT=on GDUNLOCK_IO_CHUNK=1M: 1 MiB;
 *   invalid        GDUNLOCK_IO_WORKERS=many: gdu_io_options_default and an
 *                  engine with a zero field fail naming it; a load is a
 *                  settings error (GDU_ST_ERR_SETTINGS), not an internal one. */
#include "gdunlock/io.h"
#include "gdunlock/safetensors.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c);                                \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static size_t engine_chunk(gdu_io_options o)
{
    o.backend = GDU_IO_BACKEND_HOST;
    gdu_io_engine *e = NULL;
    if (gdu_io_engine_create(&o, &e, NULL, 0) != 0)
        return 0;
    size_t chunk = gdu_io_engine_options(e)->chunk_size;
    gdu_io_engine_destroy(e);
    return chunk;
}

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "";
    gdu_io_options o;
    char why[256] = "";
    if (strcmp(which, "direct-chunk") == 0) {
        CHECK(gdu_io_options_default(&o, why, sizeof why) == 0);
        CHECK(o.direct == GDU_IO_DIRECT_ON);
        CHECK(engine_chunk(o) == GDU_IO_DEFAULT_DIRECT_CHUNK);
        o.chunk_size = 64 << 10;
        CHECK(engine_chunk(o) == 64 << 10);
        return 0;
    }
    if (strcmp(which, "direct-and-chunk") == 0) {
        CHECK(gdu_io_options_default(&o, why, sizeof why) == 0);
        CHECK(engine_chunk(o) == 1u << 20);
        return 0;
    }
    if (strcmp(which, "invalid") == 0) {
        CHECK(gdu_io_options_default(&o, why, sizeof why) == -EINVAL);
        CHECK(strstr(why, "GDUNLOCK_IO_WORKERS=many") != NULL);
        o.backend = GDU_IO_BACKEND_HOST;
        o.workers = 0;
        gdu_io_engine *e = NULL;
        CHECK(gdu_io_engine_create(&o, &e, why, sizeof why) == -EINVAL && e == NULL);
        gdu_st_model *m = NULL;
        gdu_st_error err;
        CHECK(gdu_st_open(GDUNLOCK_FIXTURES "/safetensors/small.safetensors", &m, &err) ==
              GDU_ST_OK);
        const gdu_st_load_options host = {.target = GDU_ST_TARGET_HOST};
        CHECK(gdu_st_load(m, &host, &err) == GDU_ST_ERR_SETTINGS);
        CHECK(strstr(err.message, "GDUNLOCK_IO_WORKERS=many") != NULL);
        gdu_st_model_free(m);
        return 0;
    }
    fprintf(stderr, "usage: test_io_env_defaults direct-chunk|direct-and-chunk|invalid\n");
    return 2;
}
