/* The engine's GDUNLOCK_IO_* environment parsing: the input is split at
 * newlines into the five variables' values. Either the options come back
 * unchanged with -EINVAL and a message, or every value is in range.
 * The variables are set with putenv on fixed buffers: glibc's setenv keeps
 * every value it was ever given, which made a 10-minute run hit libFuzzer's
 * memory limit (2026-11-30 campaign) without any leak in the engine. */
#include "io/io_internal.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *const vars[] = {"GDUNLOCK_IO_BACKEND", "GDUNLOCK_IO_WORKERS",
                                   "GDUNLOCK_IO_CHUNK", "GDUNLOCK_IO_STAGING",
                                   "GDUNLOCK_IO_DIRECT"};
enum { NVARS = sizeof vars / sizeof vars[0], VALUE_MAX = 4096 };
static char env_buf[NVARS][32 + VALUE_MAX];

/* NAME=VALUE in the variable's own buffer (values cut at VALUE_MAX), which
 * putenv keeps pointing at: no allocation per input. */
static void set_var(size_t i, const char *value)
{
    size_t name = strlen(vars[i]);
    memcpy(env_buf[i], vars[i], name);
    env_buf[i][name] = '=';
    size_t len = strnlen(value, VALUE_MAX - 1);
    memcpy(env_buf[i] + name + 1, value, len);
    env_buf[i][name + 1 + len] = '\0';
    putenv(env_buf[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = strndup((const char *)data, size); /* the parsers read C strings */
    if (text == NULL)
        return 0;
    char *cursor = text;
    for (size_t i = 0; i < NVARS; i++) {
        char *line = strsep(&cursor, "\n");
        if (line != NULL)
            set_var(i, line);
        else
            unsetenv(vars[i]);
    }
    gdu_io_options o = {.workers = 2, .chunk_size = GDU_IO_ALIGN, .staging_per_worker = 1},
                   before = o;
    char why[256] = "";
    int r = gdu_io_options_parse_env(&o, why, sizeof why);
    if (r == 0) {
        if (o.workers < 1 || o.workers > GDU_IO_MAX_WORKERS || o.staging_per_worker < 1 ||
            o.staging_per_worker > GDU_IO_MAX_STAGING || o.chunk_size == 0 ||
            o.chunk_size % GDU_IO_ALIGN || o.chunk_size > GDU_IO_MAX_CHUNK ||
            o.backend == GDU_IO_BACKEND_HOST)
            abort();
    } else if (r != -EINVAL || why[0] == '\0' || memcmp(&o, &before, sizeof o) != 0) {
        abort();
    }
    free(text);
    return 0;
}
