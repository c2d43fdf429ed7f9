/* The model: the files of a checkpoint, their headers, the merged tensor
 * table, and once loaded one memory block per file. */
#ifndef GDUNLOCK_ST_MODEL_INTERNAL_H
#define GDUNLOCK_ST_MODEL_INTERNAL_H

#include "gdunlock/safetensors.h"
#include "safetensors/st_block.h"

typedef struct json_t json_t;
typedef struct st_pending_load st_pending_load;

typedef struct st_file {
    char *path;
    gdu_st_header *header;
    st_block *block; /* NULL before loading */
} st_file;

struct gdu_st_model {
    st_file *files;
    size_t file_count;
    gdu_st_tensor *tensors; /* file by file, each file's in offset order */
    size_t tensor_count;
    json_t *by_name; /* name -> index into tensors */
    gdu_st_load_stats stats;
    st_pending_load *pending; /* between gdu_st_load_start and _finish */
};

#endif
