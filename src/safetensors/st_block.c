#include "safetensors/st_block.h"
#include "safetensors/st_error.h"
#include "cuda/cuda_api.h"

#include <stdlib.h>

const char *st_mem_kind_name(st_mem_kind kind)
{
    switch (kind) {
    case ST_MEM_DEVICE: return "device";
    case ST_MEM_PINNED: return "pinned host";
    case ST_MEM_HOST: return "host";
    }
    return "unknown";
}

/* Makes the GPU's primary context current, remembering the caller's. */
static gdu_st_status enter_primary(const gdu_cuda *cu, int ordinal, gdu_CUcontext *prev,
                                   gdu_st_error *err)
{
    gdu_CUdevice dev;
    gdu_CUcontext ctx;
    gdu_CUresult r = cu->cuDeviceGet(&dev, ordinal);
    if (r == GDU_CUDA_SUCCESS)
        r = cu->cuDevicePrimaryCtxRetain(&ctx, dev);
    if (r != GDU_CUDA_SUCCESS)
        return st_fail(err, GDU_ST_ERR_NO_CUDA, "GPU %d: %s (is there such a GPU?)", ordinal,
                       gdu_cuda_result_name(r));
    cu->cuCtxGetCurrent(prev);
    cu->cuCtxSetCurrent(ctx);
    return GDU_ST_OK;
}

/* Restores the caller's context and drops the retain of enter_primary,
 * unless keep is set (a live block keeps its context retained). */
static void leave_primary(const gdu_cuda *cu, int ordinal, gdu_CUcontext prev, int keep)
{
    cu->cuCtxSetCurrent(prev);
    if (!keep) {
        gdu_CUdevice dev;
        if (cu->cuDeviceGet(&dev, ordinal) == GDU_CUDA_SUCCESS)
            cu->cuDevicePrimaryCtxRelease(dev);
    }
}

gdu_st_status st_block_alloc(st_mem_kind kind, int device, uint64_t size, st_block **out,
                             gdu_st_error *err)
{
    *out = NULL;
    st_block *b = calloc(1, sizeof *b);
    if (b == NULL)
        return st_fail(err, GDU_ST_ERR_NOMEM, "out of memory");
    atomic_init(&b->refs, 1);
    b->kind = kind;
    b->device = device;
    b->size = size ? size : 1;
    char why[256] = "";
    const gdu_cuda *cu = kind == ST_MEM_HOST ? NULL : gdu_cuda_load(why, sizeof why);
    if (cu == NULL && kind == ST_MEM_DEVICE) {
        free(b);
        return st_fail(err, GDU_ST_ERR_NO_CUDA, "%s", why);
    }
    if (cu == NULL) {
        /* Page-aligned, so that O_DIRECT reads can land straight in it. */
        void *p = NULL;
        b->kind = ST_MEM_HOST;
        b->device = -1;
        if (posix_memalign(&p, 4096, (size_t)b->size) != 0) {
            free(b);
            return st_fail(err, GDU_ST_ERR_DEVICE_MEMORY, "out of host memory for %llu bytes",
                           (unsigned long long)size);
        }
        b->address = (uint64_t)(uintptr_t)p;
        *out = b;
        return GDU_ST_OK;
    }
    gdu_CUcontext prev;
    gdu_st_status s = enter_primary(cu, device, &prev, err);
    if (s != GDU_ST_OK) {
        free(b);
        return s;
    }
    gdu_CUresult r;
    if (kind == ST_MEM_DEVICE) {
        gdu_CUdeviceptr p = 0;
        r = cu->cuMemAlloc(&p, (size_t)b->size);
        b->address = p;
    } else {
        void *p = NULL;
        r = cu->cuMemHostAlloc(&p, (size_t)b->size, GDU_CU_MEMHOSTALLOC_PORTABLE);
        b->address = (uint64_t)(uintptr_t)p;
    }
    leave_primary(cu, device, prev, r == GDU_CUDA_SUCCESS);
    if (r != GDU_CUDA_SUCCESS) {
        free(b);
        return st_fail(err, GDU_ST_ERR_DEVICE_MEMORY, "%s allocation of %llu bytes on GPU %d: %s",
                       st_mem_kind_name(kind), (unsigned long long)size, device,
                       gdu_cuda_result_name(r));
    }
    *out = b;
    return GDU_ST_OK;
}

void st_block_retain(st_block *b)
{
    atomic_fetch_add(&b->refs, 1);
}

void st_block_release(st_block *b)
{
    if (b == NULL || atomic_fetch_sub(&b->refs, 1) != 1)
        return;
    if (b->kind == ST_MEM_HOST) {
        free((void *)(uintptr_t)b->address);
    } else {
        const gdu_cuda *cu = gdu_cuda_load(NULL, 0);
        gdu_CUcontext prev;
        if (cu != NULL && enter_primary(cu, b->device, &prev, NULL) == GDU_ST_OK) {
            if (b->kind == ST_MEM_DEVICE)
                cu->cuMemFree(b->address);
            else
                cu->cuMemFreeHost((void *)(uintptr_t)b->address);
            /* Drops both this call's retain and the one the block held. */
            leave_primary(cu, b->device, prev, 0);
            gdu_CUdevice dev;
            if (cu->cuDeviceGet(&dev, b->device) == GDU_CUDA_SUCCESS)
                cu->cuDevicePrimaryCtxRelease(dev);
        }
    }
    free(b);
}
