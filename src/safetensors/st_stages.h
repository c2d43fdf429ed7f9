/* Where the time of one `gdunlock load` process goes before and around the
 * loader's own stages: process start to main, loading libcuda (cuInit), and
 * creating each target GPU's primary context, which the load command does up
 * front so that the loader's allocation time is the allocation alone. */
#ifndef GDUNLOCK_SAFETENSORS_ST_STAGES_H
#define GDUNLOCK_SAFETENSORS_ST_STAGES_H

#include "cuda/cuda_ctx.h"
#include "util/clock.h"

#include <stddef.h>

typedef struct st_stages {
    double process_start_seconds; /* process start to this command (10 ms resolution; <0 unknown) */
    double cuda_init_seconds;     /* dlopen libcuda + cuInit (0 for --to host) */
    double context_seconds;       /* primary contexts of the target GPUs */
    int contexts;                 /* how many were retained (released by st_stages_end) */
    gdu_cuda_ctx held[64];
} st_stages;

/* Measures process age, then (for GPU targets) loads libcuda and retains the
 * primary context of each GPU. Failures are left for the loader to report. */
void st_stages_begin(st_stages *st, int gpu_target, const int *gpus, size_t gpu_count);
/* Releases the contexts st_stages_begin retained. */
void st_stages_end(st_stages *st);

#endif
