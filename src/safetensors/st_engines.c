#include "safetensors/st_engines.h"
#include "safetensors/st_error.h"

#include <pthread.h>

/* Slot 0 serves host memory, slot 1 + d GPU d. */
#define ENGINE_SLOTS (1 + 1024)

static gdu_io_engine *engines[ENGINE_SLOTS];
static pthread_mutex_t engines_lock = PTHREAD_MUTEX_INITIALIZER;

static gdu_st_status create(int host, int device, gdu_io_engine **out, gdu_st_error *err)
{
    gdu_io_options o;
    gdu_io_options_default(&o);
    o.device = host ? 0 : device;
    o.backend = host ? GDU_IO_BACKEND_HOST : GDU_IO_BACKEND_AUTO;
    char why[256] = "";
    if (gdu_io_options_from_env(&o, why, sizeof why) != 0)
        return st_fail(err, GDU_ST_ERR_INVALID_ARGUMENT, "I/O engine settings: %s", why);
    if (gdu_io_engine_create(&o, out, why, sizeof why) == 0)
        return GDU_ST_OK;
    if (host)
        return st_fail(err, GDU_ST_ERR_ENGINE, "I/O engine for host memory: %s", why);
    return st_fail(err, GDU_ST_ERR_ENGINE, "I/O engine for GPU %d: %s", device, why);
}

gdu_st_status st_engine_get(int host, int device, gdu_io_engine **out, gdu_st_error *err)
{
    if (!host && (device < 0 || device >= ENGINE_SLOTS - 1))
        return st_fail(err, GDU_ST_ERR_NO_CUDA, "GPU %d: no such GPU ordinal", device);
    size_t slot = host ? 0 : 1 + (size_t)device;
    pthread_mutex_lock(&engines_lock);
    gdu_st_status s = GDU_ST_OK;
    if (engines[slot] == NULL)
        s = create(host, device, &engines[slot], err);
    *out = engines[slot];
    pthread_mutex_unlock(&engines_lock);
    return s;
}

void gdu_st_engines_release(void)
{
    pthread_mutex_lock(&engines_lock);
    for (size_t i = 0; i < ENGINE_SLOTS; i++) {
        gdu_io_engine_destroy(engines[i]);
        engines[i] = NULL;
    }
    pthread_mutex_unlock(&engines_lock);
}
