/* libFuzzer target: the input is a whole safetensors file image. Parsing
 * must never crash or read out of bounds, and whatever it accepts must
 * satisfy the invariants the loader relies on. */
#include "gdunlock/safetensors.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gdu_st_header *h = NULL;
    gdu_st_error err;
    gdu_st_status s = gdu_st_header_parse(data, size, size, &h, &err);
    if (s != GDU_ST_OK) {
        if (h != NULL || err.code != s || memchr(err.message, '\0', sizeof err.message) == NULL)
            abort();
        return 0;
    }
    uint64_t data_size = size - gdu_st_header_data_offset(h);
    uint64_t span = gdu_st_header_data_span(h), covered = 0, last_end = 0;
    for (size_t i = 0; i < gdu_st_header_tensor_count(h); i++) {
        const gdu_st_tensor_info *t = gdu_st_header_tensor(h, i);
        uint64_t elements = 1;
        for (uint32_t d = 0; d < t->ndim; d++)
            elements *= t->shape[d];
        if (t->begin > t->end || t->end > span || span > data_size || t->ndim > GDU_ST_MAX_DIMS ||
            elements * gdu_st_dtype_bits(t->dtype) / 8 != t->end - t->begin ||
            strlen(t->name) > size)
            abort();
        if (t->begin != t->end) {
            if (t->begin < last_end) /* sorted and not overlapping */
                abort();
            last_end = t->end;
            covered += t->end - t->begin;
        }
    }
    if (covered + gdu_st_header_hole_bytes(h) != span ||
        span + gdu_st_header_trailing_bytes(h) != data_size)
        abort();
    const char *key, *value;
    for (size_t i = 0; i < gdu_st_header_metadata_count(h); i++)
        if (gdu_st_header_metadata(h, i, &key, &value) != 0 || strlen(key) + strlen(value) > size)
            abort();
    gdu_st_header_free(h);
    return 0;
}
