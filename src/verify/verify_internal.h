/* Helpers shared by the verify run's files; not part of the verify API. */
#ifndef GDUNLOCK_VERIFY_INTERNAL_H
#define GDUNLOCK_VERIFY_INTERNAL_H

#include "cuda/cuda_api.h"
#include "verify/verify.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* One device buffer of either kind, aligned to GDU_VERIFY_ALIGN. */
typedef struct gdu_verify_devbuf {
    gdu_verify_mem kind;
    gdu_CUdeviceptr ptr; /* aligned address handed to cuFile */
    size_t size;
    gdu_CUdeviceptr base; /* cuMemAlloc: the allocation; VMM: the reserved range */
    size_t base_size;
    gdu_CUmemGenericAllocationHandle handle; /* VMM only */
    bool mapped;                             /* VMM only */
} gdu_verify_devbuf;

/* Allocates size bytes of kind on dev in the current context. Returns 0 or
 * the failing CUresult with the call named in why (a VMM-less device gives
 * -ENOTSUP). */
int gdu_verify_devbuf_alloc(const gdu_cuda *cu, gdu_CUdevice dev, gdu_verify_mem kind, size_t size,
                            gdu_verify_devbuf *out, char *why, size_t why_len);
void gdu_verify_devbuf_free(const gdu_cuda *cu, gdu_verify_devbuf *b);

/* Writes and reads back size bytes of PATH through the I/O engine (pipeline
 * backend, device memory src -> file -> dst), compares on the host, and
 * records the outcome in ev->engine*. */
void gdu_verify_engine_check(const gdu_verify_options *opts, const gdu_cuda *cu,
                             gdu_CUdeviceptr src, gdu_CUdeviceptr dst, void *host,
                             gdu_verify_evidence *ev);

/* libcufile's log for the duration of a run (see verify_cufile_log.c). */
typedef struct gdu_verify_cufile_log {
    char path[4096];
    off_t start; /* bytes already in a log the user named */
    bool ours;   /* a temporary file we created and remove */
} gdu_verify_cufile_log;

/* Before libcufile is loaded. */
void gdu_verify_cufile_log_begin(gdu_verify_cufile_log *log);
/* After the last cuFile call: its last lines since begin into out. */
void gdu_verify_cufile_log_end(gdu_verify_cufile_log *log, char *out, size_t len);

/* Records a call's outcome. */
void gdu_verify_call_set(gdu_verify_call *c, bool ok, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
