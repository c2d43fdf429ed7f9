/* The "Device Minor:" line of the driver's per-GPU information file, which
 * the shim reads to open a GPU's device file: any text gives a minor from
 * 0 to 254 or -1, never reads past its end. */
#include "util/nv_device_file.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = strndup((const char *)data, size);
    if (text == NULL)
        return 0;
    int minor = gdu_nv_device_minor_parse(text);
    if (minor < -1 || minor > 254)
        abort();
    free(text);
    return 0;
}
