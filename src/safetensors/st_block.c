#include "safetensors/st_block.h"
#include "safetensors/st_error.h"
#include "cuda/cuda_api.h"
#include "cuda/cuda_ctx.h"

#include <stdlib.h>

const char *st_mem_kind_name(st_mem_kind kind)
{
    switch (kind) {
    case ST_MEM_DEVICE:
        return "device";
    case ST_MEM_PINNED:
        return "pinned host";
    case ST_MEM_HOST:
        return "host";
    }
    return "unknown";
}

/* Makes the GPU's primary context current (retained), remembering the caller's. */
static gdu_st_status enter_primary(const gdu_cuda *cu, int ordinal, gdu_cuda_ctx *c,
                                   gdu_CUcontext *prev, gdu_st_error *err)
{
    gdu_CUresult r = gdu_cuda_ctx_enter(cu, ordinal, c, prev, NULL, 0);
    if (r != GDU_CUDA_SUCCESS)
        return st_fail(err, GDU_ST_ERR_NO_CUDA, "GPU %d: %s (is there such a GPU?)", ordinal,
                       gdu_cuda_result_name(r));
    return GDU_ST_OK;
}

gdu_st_status st_block_create(st_mem_kind kind, int device, uint64_t size, st_block **out,
                              gdu_st_error *err)
{
    *out = NULL;
    char why[256] = "";
    const gdu_cuda *cu = kind == ST_MEM_HOST ? NULL : gdu_cuda_load(why, sizeof why);
    if (cu == NULL && kind == ST_MEM_DEVICE)
        return st_fail(err, GDU_ST_ERR_NO_CUDA, "%s", why);
    st_block *b = calloc(1, sizeof *b);
    if (b == NULL)
        return st_fail(err, GDU_ST_ERR_NOMEM, "out of memory");
    atomic_init(&b->refs, 1);
    b->kind = cu == NULL ? ST_MEM_HOST : kind;
    b->device = cu == NULL ? -1 : device;
    b->size = size;
    *out = b;
    return GDU_ST_OK;
}

/* Allocates n bytes of the block's kind at *base; a CUDA result or -1. */
static gdu_CUresult allocate(st_block *b, const gdu_cuda *cu, uint64_t n, uint64_t *base)
{
    if (cu == NULL) {
        /* Page-aligned, so that O_DIRECT reads can land straight in it. */
        void *p = NULL;
        if (posix_memalign(&p, 4096, (size_t)n) != 0)
            return GDU_CUDA_ERROR_OUT_OF_MEMORY;
        *base = (uint64_t)(uintptr_t)p;
        return GDU_CUDA_SUCCESS;
    }
    if (b->kind == ST_MEM_DEVICE) {
        gdu_CUdeviceptr p = 0;
        gdu_CUresult r = cu->cuMemAlloc(&p, (size_t)n);
        *base = p;
        return r;
    }
    void *p = NULL;
    gdu_CUresult r = cu->cuMemHostAlloc(&p, (size_t)n, GDU_CU_MEMHOSTALLOC_PORTABLE);
    *base = (uint64_t)(uintptr_t)p;
    return r;
}

gdu_st_status st_block_add_segment(st_block *b, uint64_t end, gdu_st_error *err)
{
    uint64_t start = b->n_segments ? b->segments[b->n_segments - 1].end : 0;
    if (end <= start && !(end == 0 && b->n_segments == 0))
        return st_fail(err, GDU_ST_ERR_INVALID_ARGUMENT, "empty memory segment");
    if (b->n_segments == b->cap_segments) {
        size_t cap = b->cap_segments ? 2 * b->cap_segments : 8;
        st_segment *grown = realloc(b->segments, cap * sizeof *grown);
        if (grown == NULL)
            return st_fail(err, GDU_ST_ERR_NOMEM, "out of memory");
        b->segments = grown;
        b->cap_segments = cap;
    }
    /* Room for the offset that keeps start's alignment, and at least 1 byte. */
    uint64_t skew = start % ST_BLOCK_ALIGN, n = end - start + skew;
    n = n ? n : 1;
    const gdu_cuda *cu = b->kind == ST_MEM_HOST ? NULL : gdu_cuda_load(NULL, 0);
    gdu_CUcontext prev = NULL;
    gdu_cuda_ctx primary;
    if (cu != NULL) {
        gdu_st_status s = enter_primary(cu, b->device, &primary, &prev, err);
        if (s != GDU_ST_OK)
            return s;
    }
    uint64_t base = 0;
    gdu_CUresult r = allocate(b, cu, n, &base);
    /* The block keeps one retain of the context from its first segment on. */
    if (cu != NULL && r == GDU_CUDA_SUCCESS && b->cuda == NULL)
        gdu_cuda_ctx_restore(cu, prev);
    else if (cu != NULL)
        gdu_cuda_ctx_leave(cu, &primary, prev);
    if (r != GDU_CUDA_SUCCESS && cu == NULL)
        return st_fail(err, GDU_ST_ERR_DEVICE_MEMORY, "out of host memory for %llu bytes",
                       (unsigned long long)n);
    if (r != GDU_CUDA_SUCCESS)
        return st_fail(err, GDU_ST_ERR_DEVICE_MEMORY, "%s allocation of %llu bytes on GPU %d: %s",
                       st_mem_kind_name(b->kind), (unsigned long long)n, b->device,
                       gdu_cuda_result_name(r));
    if (cu != NULL)
        b->cuda = cu;
    b->segments[b->n_segments++] = (st_segment){start, end, base + skew, base};
    return GDU_ST_OK;
}

uint64_t st_block_address(const st_block *b, uint64_t pos, uint64_t *contiguous)
{
    size_t lo = 0, hi = b->n_segments;
    while (lo < hi) { /* the first segment ending after pos */
        size_t mid = lo + (hi - lo) / 2;
        if (b->segments[mid].end <= pos)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (contiguous != NULL)
        *contiguous = 0;
    if (lo == b->n_segments) {
        /* The end of the data (where an empty tensor may sit), or nothing. */
        const st_segment *last = b->n_segments ? &b->segments[b->n_segments - 1] : NULL;
        return last != NULL && pos == last->end ? last->address + (pos - last->start) : 0;
    }
    if (pos < b->segments[lo].start)
        return 0;
    const st_segment *g = &b->segments[lo];
    if (contiguous != NULL)
        *contiguous = g->end - pos;
    return g->address + (pos - g->start);
}

void st_block_retain(st_block *b) { atomic_fetch_add(&b->refs, 1); }

void st_block_release(st_block *b)
{
    if (b == NULL || atomic_fetch_sub(&b->refs, 1) != 1)
        return;
    const gdu_cuda *cu = b->cuda;
    gdu_CUcontext prev;
    gdu_cuda_ctx primary;
    if (cu == NULL) {
        for (size_t i = 0; i < b->n_segments; i++)
            free((void *)(uintptr_t)b->segments[i].base);
    } else if (enter_primary(cu, b->device, &primary, &prev, NULL) == GDU_ST_OK) {
        for (size_t i = 0; i < b->n_segments; i++) {
            if (b->kind == ST_MEM_DEVICE)
                cu->cuMemFree(b->segments[i].base);
            else
                cu->cuMemFreeHost((void *)(uintptr_t)b->segments[i].base);
        }
        /* Drops both this call's retain and the one the block held. */
        gdu_cuda_ctx held = primary;
        gdu_cuda_ctx_leave(cu, &primary, prev);
        gdu_cuda_ctx_release(cu, &held);
    }
    free(b->segments);
    free(b);
}
