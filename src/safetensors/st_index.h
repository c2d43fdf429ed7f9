/* model.safetensors.index.json: the shard list and the tensor -> shard map. */
#ifndef GDUNLOCK_ST_INDEX_H
#define GDUNLOCK_ST_INDEX_H

#include "gdunlock/safetensors.h"

typedef struct json_t json_t;

typedef struct st_index {
    json_t *root;
    json_t *weight_map; /* borrowed from root: tensor name -> shard name */
    char **shards;      /* distinct shard names, sorted, NULL-terminated */
    size_t shard_count;
} st_index;

gdu_st_status st_index_parse(const void *json, size_t len, st_index *index, gdu_st_error *err);
void st_index_free(st_index *index);

/* 0 when name is a safe relative shard path: not empty, not absolute, no ".."
 * component (symlinks are allowed: the Hugging Face cache uses them). */
int st_index_name_is_safe(const char *name);

#endif
