/* shim_gpu_lifecycle fork | noexit | xthread | ctxloop N: process and
 * context life cycles that must end the same with and without the shim.
 * Prints RESULT <mode> <checksum or facts>, then DONE. */
#include "shim_gpu_common.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)

static gdu_CUcontext g_ctx;

/* cuInit and a buffer in the parent; the child (which must not use CUDA)
 * exits with 7; the parent then keeps working. */
static int do_fork(void)
{
    gdu_CUdeviceptr a, b;
    CK(cu->cuMemAlloc(&a, 8 * MiB));
    uint64_t s1 = shim_gpu_fill_and_sum(a, 8 * MiB, 1);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
        _exit(7);
    int st = 0;
    waitpid(pid, &st, 0);
    CK(cu->cuMemAlloc(&b, 8 * MiB));
    uint64_t s2 = shim_gpu_fill_and_sum(b, 8 * MiB, 2);
    CK(cu->cuMemFree(a));
    CK(cu->cuMemFree(b));
    printf("RESULT fork child=%d %016llx\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1,
           (unsigned long long)(s1 ^ s2));
    return 0;
}

/* Buffers never freed: the process ends with them (and the shim's registrations). */
static int do_noexit(void)
{
    gdu_CUdeviceptr p[3];
    uint64_t s = 0;
    for (int i = 0; i < 3; i++) {
        CK(cu->cuMemAlloc(&p[i], (size_t)(i + 1) * 16 * MiB));
        s ^= shim_gpu_fill_and_sum(p[i], (size_t)(i + 1) * 16 * MiB, (unsigned)i);
    }
    shim_vmm v;
    shim_vmm_alloc(0, 32 * MiB, &v);
    s ^= shim_gpu_fill_and_sum(v.ptr, v.size, 5);
    printf("RESULT noexit %016llx\nDONE\n", (unsigned long long)s);
    fflush(stdout);
    exit(0);
}

static void *free_in_thread(void *p)
{
    static int rc;
    rc = cu->cuCtxSetCurrent(g_ctx) == GDU_CUDA_SUCCESS &&
         cu->cuMemFree(*(gdu_CUdeviceptr *)p) == GDU_CUDA_SUCCESS;
    return &rc;
}

/* Allocated here, freed by another thread. */
static int do_xthread(void)
{
    uint64_t s = 0;
    int ok = 1;
    for (int i = 0; i < 20; i++) {
        gdu_CUdeviceptr p;
        CK(cu->cuMemAlloc(&p, 4 * MiB));
        s ^= shim_gpu_fill_and_sum(p, 4 * MiB, (unsigned)i);
        pthread_t th;
        void *res;
        pthread_create(&th, NULL, free_in_thread, &p);
        pthread_join(th, &res);
        ok &= *(int *)res;
    }
    printf("RESULT xthread freed=%s %016llx\n", ok ? "ok" : "FAILED", (unsigned long long)s);
    return ok ? 0 : 1;
}

/* Contexts created and destroyed in a loop, each with a buffer. */
static int do_ctxloop(int n)
{
    uint64_t s = 0;
    gdu_CUdevice dev;
    CK(cu->cuDeviceGet(&dev, 0));
    for (int i = 0; i < n; i++) {
        gdu_CUcontext c;
        gdu_CUdeviceptr p;
        CK(cu->cuCtxCreate(&c, 0, dev));
        CK(cu->cuMemAlloc(&p, 4 * MiB));
        s ^= shim_gpu_fill_and_sum(p, 4 * MiB, (unsigned)i);
        CK(cu->cuMemFree(p));
        CK(cu->cuCtxDestroy(c));
    }
    CK(cu->cuCtxSetCurrent(g_ctx));
    printf("RESULT ctxloop %d %016llx\n", n, (unsigned long long)s);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: shim_gpu_lifecycle fork | noexit | xthread | ctxloop N\n");
        return 64;
    }
    g_ctx = shim_gpu_init(0);
    int rc;
    if (strcmp(argv[1], "fork") == 0)
        rc = do_fork();
    else if (strcmp(argv[1], "noexit") == 0)
        rc = do_noexit();
    else if (strcmp(argv[1], "xthread") == 0)
        rc = do_xthread();
    else
        rc = do_ctxloop(argc > 2 ? atoi(argv[2]) : 20);
    unsigned long long t[9];
    shim_gpu_totals("end", t);
    printf("DONE\n");
    return rc;
}
