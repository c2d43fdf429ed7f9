/* libFuzzer target: model.safetensors.index.json parsing. Every shard name
 * it accepts must be relative and free of ".." components. */
#include "gdunlock/safetensors.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char **shards = NULL;
    size_t n = 0, tensors = 0;
    gdu_st_error err;
    if (gdu_st_index_parse(data, size, &shards, &n, &tensors, &err) != GDU_ST_OK) {
        if (shards != NULL)
            abort();
        return 0;
    }
    if (n == 0 || n > tensors || shards[n] != NULL)
        abort();
    for (size_t i = 0; i < n; i++) {
        const char *s = shards[i];
        if (s[0] == '\0' || s[0] == '/' || strcmp(s, "..") == 0 || strncmp(s, "../", 3) == 0 ||
            strstr(s, "/../") != NULL || (strlen(s) >= 3 && strcmp(s + strlen(s) - 3, "/..") == 0))
            abort();
    }
    gdu_st_string_list_free(shards);
    return 0;
}
