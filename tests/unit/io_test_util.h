/* Helpers shared by the I/O engine's unit tests: a verifiable byte pattern,
 * scratch files on a chosen file system, and a small host-backend engine. */
#ifndef GDUNLOCK_IO_TEST_UTIL_H
#define GDUNLOCK_IO_TEST_UTIL_H

#include "gdunlock/io.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The byte stored at file offset x in a pattern file. */
static inline uint8_t io_test_byte(uint64_t x, uint32_t seed)
{
    uint64_t h = (x + seed) * 0x9E3779B97F4A7C15ull;
    return (uint8_t)(h >> 56);
}

/* Creates dir/name of size bytes holding the pattern; returns a malloc'd path. */
static inline char *io_test_file(const char *dir, const char *name, uint64_t size, uint32_t seed)
{
    size_t len = strlen(dir) + strlen(name) + 2;
    char *path = malloc(len);
    snprintf(path, len, "%s/%s", dir, name);
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) {
        free(path);
        return NULL;
    }
    uint8_t buf[65536];
    for (uint64_t off = 0; off < size;) {
        size_t n = size - off < sizeof buf ? (size_t)(size - off) : sizeof buf;
        for (size_t i = 0; i < n; i++)
            buf[i] = io_test_byte(off + i, seed);
        if (write(fd, buf, n) != (ssize_t)n) {
            close(fd);
            free(path);
            return NULL;
        }
        off += n;
    }
    close(fd);
    return path;
}

/* A scratch folder made from dir (a mkdtemp template, rewritten in place)
 * holding data.bin: size bytes of the pattern. Returns the file's
 * malloc'd path, or NULL. */
static inline char *io_test_scratch(char *dir, uint64_t size, uint32_t seed)
{
    return mkdtemp(dir) != NULL ? io_test_file(dir, "data.bin", size, seed) : NULL;
}

/* Removes a test's scratch folder: its pattern file (path, freed here) and
 * the out.bin some tests write. */
static inline void io_test_remove_dir(const char *dir, char *path)
{
    char out[512];
    snprintf(out, sizeof out, "%s/out.bin", dir);
    unlink(out);
    if (path != NULL)
        unlink(path);
    rmdir(dir);
    free(path);
}

/* Options of a host-backend engine with small chunks, so that tests cross
 * many chunk boundaries. */
static inline gdu_io_options io_test_options(unsigned workers, size_t chunk, unsigned staging,
                                             gdu_io_direct direct)
{
    gdu_io_options o;
    gdu_io_options_default(&o, NULL, 0);
    o.backend = GDU_IO_BACKEND_HOST;
    o.workers = workers;
    o.chunk_size = chunk;
    o.staging_per_worker = staging;
    o.direct = direct;
    return o;
}

/* An engine with those options. */
static inline gdu_io_engine *io_test_engine(unsigned workers, size_t chunk, unsigned staging,
                                            gdu_io_direct direct)
{
    gdu_io_options o = io_test_options(workers, chunk, staging, direct);
    gdu_io_engine *e = NULL;
    char why[256];
    if (gdu_io_engine_create(&o, &e, why, sizeof why) != 0) {
        fprintf(stderr, "engine: %s\n", why);
        return NULL;
    }
    return e;
}

#ifdef GDUNLOCK_IO_INTERNAL_H /* for the tests that include the engine's internals first */
/* An engine of host-backend options (io_test_options, buffered) moving
 * through mover, with sys's system calls and read pieces of chunk bytes;
 * NULL (the cause on stderr) if it cannot be made. */
static inline gdu_io_engine *io_test_engine_moving(const gdu_io_mover *mover, const gdu_io_sys *sys,
                                                   unsigned workers, size_t chunk, unsigned staging)
{
    gdu_io_options o = io_test_options(workers, chunk, staging, GDU_IO_DIRECT_OFF);
    gdu_io_engine *e = NULL;
    char why[256];
    if (gdu_io_engine_create_moving(&o, mover, &e, why, sizeof why) != 0) {
        fprintf(stderr, "engine: %s\n", why);
        return NULL;
    }
    gdu_io_engine_set_sys(e, sys);
    gdu_io_engine_set_read_piece(e, chunk);
    return e;
}
#endif

/* Deterministic pseudo-random numbers for reproducible test cases. */
static inline uint64_t io_test_rand(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

#endif
