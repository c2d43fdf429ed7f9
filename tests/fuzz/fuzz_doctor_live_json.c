/* Fuzzes the reader of gdunlock-live.json, the capture file --sysroot trusts. */
#include "facts/live.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t err;
    json_t *root = json_loadb((const char *)data, size, 0, &err);
    if (root == NULL)
        return 0;
    static gdu_live live;
    char why[256];
    if (gdu_live_from_json(root, &live, why, sizeof why) == 0) {
        json_t *back = gdu_live_to_json(&live);
        json_decref(back);
    }
    json_decref(root);
    return 0;
}
