#include "cuda/cuda_ctx.h"

#include <stdio.h>

static gdu_CUresult failed(const char *call, gdu_CUresult r, char *why, size_t len)
{
    if (why != NULL && len > 0)
        snprintf(why, len, "%s: %s", call, gdu_cuda_result_name(r));
    return r;
}

gdu_CUresult gdu_cuda_ctx_retain(const gdu_cuda *cu, int ordinal, gdu_cuda_ctx *c, char *why,
                                 size_t len)
{
    c->ctx = NULL;
    gdu_CUresult r = cu->cuDeviceGet(&c->dev, ordinal);
    if (r != GDU_CUDA_SUCCESS)
        return failed("cuDeviceGet", r, why, len);
    gdu_CUcontext ctx;
    r = cu->cuDevicePrimaryCtxRetain(&ctx, c->dev);
    if (r != GDU_CUDA_SUCCESS)
        return failed("cuDevicePrimaryCtxRetain", r, why, len);
    c->ctx = ctx;
    return GDU_CUDA_SUCCESS;
}

void gdu_cuda_ctx_release(const gdu_cuda *cu, gdu_cuda_ctx *c)
{
    if (c->ctx == NULL)
        return;
    cu->cuDevicePrimaryCtxRelease(c->dev);
    c->ctx = NULL;
}

gdu_CUresult gdu_cuda_ctx_make_current(const gdu_cuda *cu, gdu_CUcontext ctx, gdu_CUcontext *saved,
                                       char *why, size_t len)
{
    if (saved != NULL && cu->cuCtxGetCurrent(saved) != GDU_CUDA_SUCCESS)
        *saved = NULL;
    gdu_CUresult r = cu->cuCtxSetCurrent(ctx);
    return r == GDU_CUDA_SUCCESS ? r : failed("cuCtxSetCurrent", r, why, len);
}

void gdu_cuda_ctx_restore(const gdu_cuda *cu, gdu_CUcontext saved) { cu->cuCtxSetCurrent(saved); }

gdu_CUresult gdu_cuda_ctx_enter(const gdu_cuda *cu, int ordinal, gdu_cuda_ctx *c,
                                gdu_CUcontext *saved, char *why, size_t len)
{
    gdu_CUresult r = gdu_cuda_ctx_retain(cu, ordinal, c, why, len);
    if (r != GDU_CUDA_SUCCESS)
        return r;
    r = gdu_cuda_ctx_make_current(cu, c->ctx, saved, why, len);
    if (r != GDU_CUDA_SUCCESS)
        gdu_cuda_ctx_release(cu, c);
    return r;
}

void gdu_cuda_ctx_leave(const gdu_cuda *cu, gdu_cuda_ctx *c, gdu_CUcontext saved)
{
    gdu_cuda_ctx_restore(cu, saved);
    gdu_cuda_ctx_release(cu, c);
}
