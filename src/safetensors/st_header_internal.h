/* The parsed header's storage. Names and metadata strings point into the
 * JSON document's strings (st_json.h), kept as long as the header; its tree
 * is dropped once the header is validated. */
#ifndef GDUNLOCK_ST_HEADER_INTERNAL_H
#define GDUNLOCK_ST_HEADER_INTERNAL_H

#include "gdunlock/safetensors.h"

typedef struct st_json_doc st_json_doc;

struct gdu_st_header {
    st_json_doc *doc;
    gdu_st_tensor_info *tensors; /* sorted by (begin, end, name) */
    size_t tensor_count;
    uint64_t *shapes; /* all tensors' dims, back to back */
    struct {
        const char *key, *value;
        size_t key_len, value_len;
    } * metadata;
    size_t metadata_count;
    int has_metadata; /* __metadata__ present and not null */
    uint64_t data_offset, data_size, data_span, hole_bytes, trailing_bytes;
};

#endif
