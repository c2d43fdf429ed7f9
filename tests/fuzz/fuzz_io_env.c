/* The engine's GDUNLOCK_IO_* environment parsing: the input is split at
 * newlines into the five variables' values. Either the options come back
 * unchanged with -EINVAL and a message, or every value is in range. */
#include "gdunlock/io.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *const vars[] = {"GDUNLOCK_IO_BACKEND", "GDUNLOCK_IO_WORKERS", "GDUNLOCK_IO_CHUNK",
                                   "GDUNLOCK_IO_STAGING", "GDUNLOCK_IO_DIRECT"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    char *cursor = text;
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        char *line = strsep(&cursor, "\n");
        if (line != NULL)
            setenv(vars[i], line, 1);
        else
            unsetenv(vars[i]);
    }
    gdu_io_options o, before;
    gdu_io_options_default(&o);
    o.backend = size % 2 ? GDU_IO_BACKEND_HOST : GDU_IO_BACKEND_AUTO;
    before = o;
    char why[256] = "";
    int r = gdu_io_options_from_env(&o, why, sizeof why);
    if (r == 0) {
        if (o.workers < 1 || o.workers > GDU_IO_MAX_WORKERS || o.staging_per_worker < 1 ||
            o.staging_per_worker > GDU_IO_MAX_STAGING || o.chunk_size == 0 ||
            o.chunk_size % GDU_IO_ALIGN || o.chunk_size > GDU_IO_MAX_CHUNK ||
            (o.backend == GDU_IO_BACKEND_HOST) != (before.backend == GDU_IO_BACKEND_HOST))
            abort();
    } else if (r != -EINVAL || why[0] == '\0' || memcmp(&o, &before, sizeof o) != 0) {
        abort();
    }
    free(text);
    return 0;
}
