/* libFuzzer target: the input is a whole safetensors file image, parsed
 * strictly and leniently. Parsing must never crash or read out of bounds,
 * whatever either accepts must satisfy the invariants the loader relies on,
 * strict must accept only what lenient accepts, and strict must never leave
 * holes or trailing bytes. */
#include "gdunlock/safetensors.h"

#include <stdlib.h>
#include <string.h>

/* Checks an accepted header; returns 0, aborts on a broken invariant. */
static void check(const gdu_st_header *h, size_t size, int strict)
{
    uint64_t data_size = size - gdu_st_header_data_offset(h);
    uint64_t span = gdu_st_header_data_span(h), covered = 0, last_end = 0;
    for (size_t i = 0; i < gdu_st_header_tensor_count(h); i++) {
        const gdu_st_tensor_info *t = gdu_st_header_tensor(h, i);
        uint64_t elements = 1;
        for (uint32_t d = 0; d < t->ndim; d++)
            elements *= t->shape[d];
        if (t->begin > t->end || t->end > span || span > data_size || t->ndim > size ||
            elements * gdu_st_dtype_bits(t->dtype) / 8 != t->end - t->begin || t->name_len > size ||
            strlen(t->name) > t->name_len)
            abort();
        if (strict && t->begin != last_end) /* back to back from 0 */
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
    if (strict && (gdu_st_header_hole_bytes(h) != 0 || gdu_st_header_trailing_bytes(h) != 0))
        abort();
    const char *key, *value;
    size_t key_len, len;
    for (size_t i = 0; i < gdu_st_header_metadata_count(h); i++)
        if (gdu_st_header_metadata(h, i, &key, &key_len, &value, &len) != 0 ||
            key_len + len > size || strlen(key) > key_len || strlen(value) > len)
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gdu_st_status got[2];
    for (int lenient = 0; lenient < 2; lenient++) {
        gdu_st_header *h = NULL;
        gdu_st_error err;
        gdu_st_status s =
            gdu_st_header_parse_flags(data, size, size, lenient ? GDU_ST_LENIENT : 0, &h, &err);
        got[lenient] = s;
        if (s != GDU_ST_OK) {
            if (h != NULL || err.code != s || memchr(err.message, '\0', sizeof err.message) == NULL)
                abort();
            continue;
        }
        check(h, size, !lenient);
        gdu_st_header_free(h);
    }
    if (got[0] == GDU_ST_OK && got[1] != GDU_ST_OK)
        abort();
    return 0;
}
