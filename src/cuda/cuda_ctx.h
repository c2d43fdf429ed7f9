/* The one helper for a GPU's primary context: held (retained) for as long
 * as a user needs it, and made current around a piece of work with the
 * caller's own context put back afterwards. Each call that fails says which
 * CUDA call failed in why ("cuDevicePrimaryCtxRetain: CUDA_ERROR_..."; why
 * may be NULL) and leaves nothing held. */
#ifndef GDUNLOCK_CUDA_CUDA_CTX_H
#define GDUNLOCK_CUDA_CUDA_CTX_H

#include "cuda/cuda_api.h"

#include <stddef.h>

typedef struct gdu_cuda_ctx {
    gdu_CUdevice dev;
    gdu_CUcontext ctx; /* the retained primary context; NULL while none is held */
} gdu_cuda_ctx;

/* Retains the primary context of the GPU with CUDA ordinal `ordinal`. */
gdu_CUresult gdu_cuda_ctx_retain(const gdu_cuda *cu, int ordinal, gdu_cuda_ctx *c, char *why,
                                 size_t len);
/* Releases what gdu_cuda_ctx_retain held; nothing when nothing is held. */
void gdu_cuda_ctx_release(const gdu_cuda *cu, gdu_cuda_ctx *c);

/* Makes ctx current on this thread; *saved (saved may be NULL) gets the
 * context that was current, for gdu_cuda_ctx_restore. */
gdu_CUresult gdu_cuda_ctx_make_current(const gdu_cuda *cu, gdu_CUcontext ctx, gdu_CUcontext *saved,
                                       char *why, size_t len);
/* Makes saved (NULL: none) current again. */
void gdu_cuda_ctx_restore(const gdu_cuda *cu, gdu_CUcontext saved);

/* Both at once: retains the GPU's primary context and makes it current,
 * remembering the caller's in *saved (may be NULL) ... */
gdu_CUresult gdu_cuda_ctx_enter(const gdu_cuda *cu, int ordinal, gdu_cuda_ctx *c,
                                gdu_CUcontext *saved, char *why, size_t len);
/* ... and puts the caller's back and releases it. */
void gdu_cuda_ctx_leave(const gdu_cuda *cu, gdu_cuda_ctx *c, gdu_CUcontext saved);

#endif
