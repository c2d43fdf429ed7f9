#include "safetensors/st_engines.h"
#include "safetensors/st_error.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

/* Slot 0 serves host memory, slot 1 + d GPU d. */
#define ENGINE_SLOTS (1 + 1024)

static gdu_io_engine *engines[ENGINE_SLOTS];
/* Leases out per engine (loads running, readers open): release waits for
 * none of them, it refuses, since a destroyed engine under a running load
 * would leave its requests unserved forever. Counted per engine, so that a
 * return of an engine with no lease out (twice, or one never leased) is
 * refused instead of cancelling a lease on another engine. */
static size_t leases[ENGINE_SLOTS];
static pthread_mutex_t engines_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t fork_handlers = PTHREAD_ONCE_INIT;

/* A child of fork() has none of its parent's worker threads: the engines it
 * inherits cannot serve it (a read would wait for ever) and cannot be
 * destroyed (their threads cannot be joined). The child forgets them (their
 * memory stays, as the rest of the parent's does) and makes its own at its
 * first load. The lock is held across fork() so that the child's copy of
 * the table is whole. */
static void lock_for_fork(void) { pthread_mutex_lock(&engines_lock); }
static void unlock_after_fork(void) { pthread_mutex_unlock(&engines_lock); }

static void forget_in_child(void)
{
    memset(engines, 0, sizeof engines);
    memset(leases, 0, sizeof leases);
    pthread_mutex_unlock(&engines_lock);
}

static void install_fork_handlers(void)
{
    pthread_atfork(lock_for_fork, unlock_after_fork, forget_in_child);
}

static gdu_st_status create(int host, int device, gdu_io_engine **out, gdu_st_error *err)
{
    gdu_io_options o;
    char why[256] = "";
    if (gdu_io_options_default(&o, why, sizeof why) != 0)
        return st_fail(err, GDU_ST_ERR_SETTINGS, "I/O engine settings: %s", why);
    o.device = host ? 0 : device;
    if (host)
        o.backend = GDU_IO_BACKEND_HOST;
    int rc = gdu_io_engine_create(&o, out, why, sizeof why);
    if (rc == 0)
        return GDU_ST_OK;
    /* staging too large for the machine, or memory short for it; no CUDA
     * or no such GPU is the caller's target, not a failed engine (the
     * status a load's allocation gives) */
    gdu_st_status s = rc == -EINVAL            ? GDU_ST_ERR_SETTINGS
                      : rc == -ENOMEM          ? GDU_ST_ERR_NOMEM
                      : rc == -ENODEV && !host ? GDU_ST_ERR_NO_CUDA
                                               : GDU_ST_ERR_ENGINE;
    if (host)
        return st_fail(err, s, "I/O engine for host memory: %s", why);
    return st_fail(err, s, "I/O engine for GPU %d: %s", device, why);
}

gdu_st_status st_engine_get(int host, int device, gdu_io_engine **out, gdu_st_error *err)
{
    *out = NULL;
    if (!host && (device < 0 || device >= ENGINE_SLOTS - 1))
        return st_fail(err, GDU_ST_ERR_NO_CUDA, "GPU %d: no such GPU ordinal", device);
    size_t slot = host ? 0 : 1 + (size_t)device;
    pthread_once(&fork_handlers, install_fork_handlers);
    pthread_mutex_lock(&engines_lock);
    gdu_st_status s = GDU_ST_OK;
    if (engines[slot] == NULL)
        s = create(host, device, &engines[slot], err);
    if (s == GDU_ST_OK) {
        *out = engines[slot];
        leases[slot]++;
    }
    pthread_mutex_unlock(&engines_lock);
    return s;
}

gdu_st_status gdu_st_engine_acquire(int host, int device, gdu_io_engine **out, gdu_st_error *err)
{
    if (out == NULL)
        return st_fail(err, GDU_ST_ERR_INVALID_ARGUMENT, "NULL argument");
    gdu_st_status s = st_engine_get(host != 0, device, out, err);
    return s == GDU_ST_OK ? st_ok(err) : s;
}

gdu_st_status gdu_st_engine_return(gdu_io_engine *engine)
{
    if (engine == NULL)
        return GDU_ST_OK;
    pthread_mutex_lock(&engines_lock);
    size_t slot = 0;
    while (slot < ENGINE_SLOTS && engines[slot] != engine)
        slot++;
    int leased = slot < ENGINE_SLOTS && leases[slot] > 0;
    if (leased)
        leases[slot]--;
    pthread_mutex_unlock(&engines_lock);
    return leased ? GDU_ST_OK : GDU_ST_ERR_INVALID_ARGUMENT;
}

gdu_st_status gdu_st_engines_release(gdu_st_error *err)
{
    pthread_mutex_lock(&engines_lock);
    size_t busy = 0;
    for (size_t i = 0; i < ENGINE_SLOTS; i++)
        busy += leases[i];
    for (size_t i = 0; busy == 0 && i < ENGINE_SLOTS; i++) {
        gdu_io_engine_destroy(engines[i]);
        engines[i] = NULL;
    }
    pthread_mutex_unlock(&engines_lock);
    if (busy != 0)
        return st_fail(err, GDU_ST_ERR_BUSY,
                       "%zu load(s) or open reader(s) still use the I/O engines: release them "
                       "after those finish (close every safe_open)",
                       busy);
    return st_ok(err);
}
