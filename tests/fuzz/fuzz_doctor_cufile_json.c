/* Fuzzes the cufile.json reader (comments stripped, then jansson). */
#include "probe/cufile_config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = strndup((const char *)data, size); /* the parsers read C strings */
    if (text == NULL)
        return 0;
    gdu_cufile_config c;
    gdu_cufile_config_parse(text, &c);
    free(text);
    return 0;
}
