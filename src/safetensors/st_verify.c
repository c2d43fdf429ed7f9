/* --verify: reads every loaded block back to the host and compares it with
 * the file whose header was validated (through the descriptor it was read
 * from: st_file_descriptor), chunk by chunk, naming the first tensor that
 * differs. */
#include "cuda/cuda_ctx.h"
#include "safetensors/st_error.h"
#include "safetensors/st_model_internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define VERIFY_CHUNK ((size_t)64 << 20)

/* Copies n loaded bytes at address to host memory. */
static gdu_st_status fetch(const st_block *b, uint64_t address, void *dst, size_t n,
                           gdu_st_error *err)
{
    if (b->kind != ST_MEM_DEVICE) {
        memcpy(dst, (const void *)(uintptr_t)address, n);
        return GDU_ST_OK;
    }
    const gdu_cuda *cu = gdu_cuda_load(NULL, 0);
    gdu_cuda_ctx primary;
    gdu_CUcontext prev = NULL;
    gdu_CUresult r = gdu_cuda_ctx_enter(cu, b->device, &primary, &prev, NULL, 0);
    if (r != GDU_CUDA_SUCCESS)
        return st_fail(err, GDU_ST_ERR_NO_CUDA, "GPU %d: %s", b->device, gdu_cuda_result_name(r));
    r = cu->cuMemcpyDtoH(dst, address, n);
    gdu_cuda_ctx_leave(cu, &primary, prev);
    if (r != GDU_CUDA_SUCCESS)
        return st_fail(err, GDU_ST_ERR_ENGINE, "reading GPU %d memory back: %s", b->device,
                       gdu_cuda_result_name(r));
    return GDU_ST_OK;
}

/* The tensor holding data-section byte pos of file f, for the report. */
static const char *tensor_at(const gdu_st_model *m, size_t f, uint64_t pos)
{
    const gdu_st_header *h = m->files[f].header;
    for (size_t i = 0; i < gdu_st_header_tensor_count(h); i++) {
        const gdu_st_tensor_info *t = gdu_st_header_tensor(h, i);
        if (pos >= t->begin && pos < t->end)
            return t->name;
    }
    return "(no tensor: a hole)";
}

static gdu_st_status verify_file(const gdu_st_model *m, size_t f, char *loaded, char *expected,
                                 gdu_st_error *err)
{
    const st_file *file = &m->files[f];
    uint64_t span = gdu_st_header_data_span(file->header);
    uint64_t base = gdu_st_header_data_offset(file->header);
    int fd = -1;
    gdu_st_status s = st_file_descriptor(m, f, &fd, err);
    for (uint64_t pos = 0, n = 0; s == GDU_ST_OK && pos < span; pos += n) {
        /* Up to a chunk, within one of the block's segments. */
        uint64_t contiguous = 0;
        uint64_t address = st_block_address(file->block, pos, &contiguous);
        n = span - pos < VERIFY_CHUNK ? span - pos : VERIFY_CHUNK;
        n = contiguous < n ? contiguous : n;
        if (n == 0) {
            s = st_fail(err, GDU_ST_ERR_INVALID_ARGUMENT,
                        "%s: byte %llu of the data section "
                        "was never allocated",
                        file->path, (unsigned long long)pos);
            break;
        }
        int rc = st_pread_full(fd, expected, (size_t)n, base + pos);
        if (rc != 0) {
            s = st_fail(err, GDU_ST_ERR_IO, "%s: %s", file->path, strerror(-rc));
            break;
        }
        s = fetch(file->block, address, loaded, (size_t)n, err);
        if (s == GDU_ST_OK && memcmp(loaded, expected, n) != 0) {
            size_t i = 0;
            while (loaded[i] == expected[i])
                i++;
            s = st_fail(err, GDU_ST_ERR_VERIFY_MISMATCH,
                        "%s: loaded byte %llu of the data section differs from the file "
                        "(tensor '%.80s')",
                        file->path, (unsigned long long)(pos + i), tensor_at(m, f, pos + i));
        }
    }
    if (fd >= 0)
        st_file_descriptor_done(m, f, fd);
    return s;
}

gdu_st_status gdu_st_verify(const gdu_st_model *m, gdu_st_error *err)
{
    if (m == NULL)
        return st_fail(err, GDU_ST_ERR_INVALID_ARGUMENT, "NULL model");
    if (m->pending != NULL)
        return st_fail(err, GDU_ST_ERR_INVALID_ARGUMENT,
                       "the load is still running (gdu_st_load_finish first)");
    for (size_t f = 0; f < m->file_count; f++)
        if (m->files[f].block == NULL)
            return st_fail(err, GDU_ST_ERR_INVALID_ARGUMENT, "the model is not loaded");
    char *loaded = malloc(VERIFY_CHUNK), *expected = malloc(VERIFY_CHUNK);
    gdu_st_status s =
        loaded && expected ? GDU_ST_OK : st_fail(err, GDU_ST_ERR_NOMEM, "out of memory");
    for (size_t f = 0; s == GDU_ST_OK && f < m->file_count; f++)
        s = verify_file(m, f, loaded, expected, err);
    free(loaded);
    free(expected);
    return s == GDU_ST_OK ? st_ok(err) : s;
}
