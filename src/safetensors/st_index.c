/* Parsing of a sharded checkpoint's index JSON. */
#include "safetensors/st_index.h"
#include "safetensors/st_error.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

int st_index_name_is_safe(const char *name)
{
    if (name[0] == '\0' || name[0] == '/')
        return -1;
    for (const char *p = name; *p != '\0';) {
        size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return -1;
        p += n;
        if (*p == '/')
            p++;
    }
    return 0;
}

void st_index_free(st_index *index)
{
    gdu_st_string_list_free(index->shards);
    json_decref(index->root);
    memset(index, 0, sizeof *index);
}

void gdu_st_string_list_free(char **list)
{
    if (list == NULL)
        return;
    for (char **p = list; *p != NULL; p++)
        free(*p);
    free(list);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

gdu_st_status st_index_parse(const void *json, size_t len, st_index *index, gdu_st_error *err)
{
    memset(index, 0, sizeof *index);
    json_error_t jerr;
    index->root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (index->root == NULL)
        return st_fail(err, GDU_ST_ERR_INDEX, "index JSON, byte %d: %s", jerr.position, jerr.text);
    index->weight_map = json_object_get(index->root, "weight_map");
    if (!json_is_object(index->weight_map)) {
        st_index_free(index);
        return st_fail(err, GDU_ST_ERR_INDEX, "index has no \"weight_map\" object");
    }
    /* Distinct shard names, kept as keys of a JSON object used as a set. */
    json_t *seen = json_object();
    index->shards = calloc(json_object_size(index->weight_map) + 1, sizeof *index->shards);
    gdu_st_status s =
        seen && index->shards ? GDU_ST_OK : st_fail(err, GDU_ST_ERR_NOMEM, "out of memory");
    const char *tensor;
    json_t *shard;
    json_object_foreach(index->weight_map, tensor, shard)
    {
        if (s != GDU_ST_OK)
            break;
        const char *name = json_string_value(shard);
        if (name == NULL)
            s = st_fail(err, GDU_ST_ERR_INDEX, "weight_map entry '%.80s' is not a string", tensor);
        else if (st_index_name_is_safe(name) != 0)
            s = st_fail(err, GDU_ST_ERR_PATH_ESCAPE,
                        "shard name '%.120s' is absolute or contains \"..\": shards must lie "
                        "under the index's folder",
                        name);
        else if (json_object_get(seen, name) == NULL) {
            char *copy = strdup(name);
            if (copy == NULL || json_object_set_new(seen, name, json_true()) != 0) {
                free(copy);
                s = st_fail(err, GDU_ST_ERR_NOMEM, "out of memory");
            } else {
                index->shards[index->shard_count++] = copy;
            }
        }
    }
    json_decref(seen);
    if (s == GDU_ST_OK)
        qsort(index->shards, index->shard_count, sizeof *index->shards, by_name);
    if (s == GDU_ST_OK && index->shard_count == 0)
        s = st_fail(err, GDU_ST_ERR_INDEX, "weight_map names no shard");
    if (s != GDU_ST_OK)
        st_index_free(index);
    return s;
}

gdu_st_status gdu_st_index_parse(const void *json, size_t len, char ***shards, size_t *shard_count,
                                 size_t *tensor_count, gdu_st_error *err)
{
    if (json == NULL || shards == NULL || shard_count == NULL || tensor_count == NULL)
        return st_fail(err, GDU_ST_ERR_INVALID_ARGUMENT, "NULL argument");
    st_index index;
    gdu_st_status s = st_index_parse(json, len, &index, err);
    if (s != GDU_ST_OK)
        return s;
    *shards = index.shards;
    *shard_count = index.shard_count;
    *tensor_count = json_object_size(index.weight_map);
    index.shards = NULL;
    st_index_free(&index);
    return st_ok(err);
}
