/* Replays an ioctl trace recorded by tools/rm-recorder (JSON lines) through a
 * shim core in front of a fake RM, checking that every call of the traced
 * program gets from the fake, through the shim, the result the real driver
 * gave it. */
#ifndef GDUNLOCK_TESTS_FAKE_RM_TRACE_H
#define GDUNLOCK_TESTS_FAKE_RM_TRACE_H

#include "fake_rm.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    long seq;
    int fd;
    bool uvm;
    unsigned long request;
    unsigned char *args_in, *args_out, *params_in, *params_out;
    size_t n_in, n_out, n_params, n_params_out;
} trace_call;

typedef struct {
    trace_call *calls;
    size_t n;
} trace;

/* Loads path (relative paths: under GDUNLOCK_FIXTURES). Returns 0 or -1. */
int trace_load(const char *path, trace *t);
void trace_free(trace *t);
/* Index of the first call with seq >= seq (t->n if none). */
size_t trace_index_of(const trace *t, long seq);

typedef struct {
    /* Leave out libcuda's NV503C allocations and controls: the program then
     * behaves as libcuda does on a GeForce GPU. */
    bool geforce;
} replay_opts;

typedef struct {
    unsigned calls;      /* replayed */
    unsigned compared;   /* whose result was checked */
    unsigned mismatches; /* results that differ from the recording */
    char first_mismatch[256];
} replay_result;

/* Replays calls [from, to) (to > t->n: to the end). */
void trace_replay(const trace *t, size_t from, size_t to, gdu_shim *s, fake_rm *f,
                  const replay_opts *o, replay_result *r);

#endif
