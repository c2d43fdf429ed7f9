/* The command-line number parsers every subcommand uses (sizes like "1.5G",
 * counts, GPU index lists): any text either parses to a value that prints
 * back within range, or is refused with -EINVAL / -ERANGE and no output. */
#include "util/units.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = strndup((const char *)data, size); /* the parsers read C strings */
    if (text == NULL)
        return 0;

    uint64_t v = 12345;
    int rc = gdu_parse_size(text, &v);
    if (rc != 0 && (v != 12345 || (rc != -EINVAL && rc != -ERANGE)))
        abort();
    char buf[32];
    gdu_format_bytes(v, buf, sizeof buf);
    if (strlen(buf) >= sizeof buf)
        abort();

    v = 777;
    rc = gdu_parse_uint(text, 1, 4096, &v);
    if (rc == 0 && (v < 1 || v > 4096))
        abort();
    if (rc != 0 && v != 777)
        abort();

    int idx[8];
    size_t n = 99;
    rc = gdu_parse_index_list(text, 63, idx, 8, &n);
    if (rc == 0) {
        if (n == 0 || n > 8)
            abort();
        for (size_t i = 0; i < n; i++)
            if (idx[i] < 0 || idx[i] > 63)
                abort();
    } else if (n != 99) {
        abort();
    }
    free(text);
    return 0;
}
