/* shim_gpu_stress cycles N | storm THREADS N | overhead N
 *  cycles:   N cuMemAlloc/cuMemFree of 2 MiB (every 100th a 64 MiB VMM buffer);
 *  storm:    THREADS threads each allocating and freeing N buffers of 2..8 MiB at once;
 *  overhead: N cuMemAlloc/cuMemFree pairs of 2 MiB, timed (prints PAIR_NS).
 * Prints TOTALS before and after (with the shim), ERRORS <count>, DONE. */
#include "shim_gpu_common.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MiB ((size_t)1 << 20)

static gdu_CUcontext g_ctx;

static unsigned cycles(unsigned n)
{
    unsigned errors = 0;
    for (unsigned i = 0; i < n; i++) {
        if (i % 100 == 99) {
            shim_vmm v;
            shim_vmm_alloc(0, 64 * MiB, &v);
            shim_vmm_free(&v);
            continue;
        }
        gdu_CUdeviceptr p;
        errors += cu->cuMemAlloc(&p, 2 * MiB) != GDU_CUDA_SUCCESS;
        errors += cu->cuMemFree(p) != GDU_CUDA_SUCCESS;
    }
    return errors;
}

struct storm_arg {
    unsigned n, seed, errors;
};

static void *storm_thread(void *p)
{
    struct storm_arg *a = p;
    if (cu->cuCtxSetCurrent(g_ctx) != GDU_CUDA_SUCCESS) {
        a->errors++;
        return NULL;
    }
    gdu_CUdeviceptr held[4] = {0};
    for (unsigned i = 0; i < a->n; i++) {
        unsigned slot = i % 4;
        if (held[slot] != 0)
            a->errors += cu->cuMemFree(held[slot]) != GDU_CUDA_SUCCESS;
        held[slot] = 0;
        size_t size = (2 + (a->seed + i) % 7) * MiB;
        a->errors += cu->cuMemAlloc(&held[slot], size) != GDU_CUDA_SUCCESS;
    }
    for (unsigned s = 0; s < 4; s++)
        if (held[s] != 0)
            a->errors += cu->cuMemFree(held[s]) != GDU_CUDA_SUCCESS;
    return NULL;
}

static unsigned storm(unsigned threads, unsigned n)
{
    pthread_t th[64];
    struct storm_arg args[64];
    if (threads > 64)
        threads = 64;
    for (unsigned i = 0; i < threads; i++) {
        args[i] = (struct storm_arg){n, i * 13, 0};
        pthread_create(&th[i], NULL, storm_thread, &args[i]);
    }
    unsigned errors = 0;
    for (unsigned i = 0; i < threads; i++) {
        pthread_join(th[i], NULL);
        errors += args[i].errors;
    }
    return errors;
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static unsigned overhead(unsigned n)
{
    unsigned errors = cycles(500); /* warm up */
    double t0 = now_ns();
    for (unsigned i = 0; i < n; i++) {
        gdu_CUdeviceptr p;
        errors += cu->cuMemAlloc(&p, 2 * MiB) != GDU_CUDA_SUCCESS;
        errors += cu->cuMemFree(p) != GDU_CUDA_SUCCESS;
    }
    printf("PAIR_NS %.0f\n", (now_ns() - t0) / n);
    return errors;
}

int main(int argc, char **argv)
{
    if (argc < 3 || (strcmp(argv[1], "storm") == 0 && argc < 4)) {
        fprintf(stderr, "usage: shim_gpu_stress cycles N | storm THREADS N | overhead N\n");
        return 64;
    }
    g_ctx = shim_gpu_init(0);
    unsigned long long before[9], after[9];
    shim_gpu_totals("before", before);
    unsigned errors;
    if (strcmp(argv[1], "cycles") == 0)
        errors = cycles((unsigned)atoi(argv[2]));
    else if (strcmp(argv[1], "storm") == 0)
        errors = storm((unsigned)atoi(argv[2]), (unsigned)atoi(argv[3]));
    else
        errors = overhead((unsigned)atoi(argv[2]));
    CK(cu->cuCtxSynchronize());
    shim_gpu_totals("after", after);
    printf("ERRORS %u\nDONE\n", errors);
    return errors == 0 ? 0 : 1;
}
