#include "safetensors/st_error.h"
#include "util/text.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const status_names[GDU_ST_STATUS_COUNT] = {
    [GDU_ST_OK] = "GDU_ST_OK",
    [GDU_ST_ERR_INVALID_ARGUMENT] = "GDU_ST_ERR_INVALID_ARGUMENT",
    [GDU_ST_ERR_NOMEM] = "GDU_ST_ERR_NOMEM",
    [GDU_ST_ERR_OPEN] = "GDU_ST_ERR_OPEN",
    [GDU_ST_ERR_IO] = "GDU_ST_ERR_IO",
    [GDU_ST_ERR_TOO_SMALL] = "GDU_ST_ERR_TOO_SMALL",
    [GDU_ST_ERR_HEADER_LENGTH] = "GDU_ST_ERR_HEADER_LENGTH",
    [GDU_ST_ERR_HEADER_JSON] = "GDU_ST_ERR_HEADER_JSON",
    [GDU_ST_ERR_HEADER_NOT_OBJECT] = "GDU_ST_ERR_HEADER_NOT_OBJECT",
    [GDU_ST_ERR_TENSOR_ENTRY] = "GDU_ST_ERR_TENSOR_ENTRY",
    [GDU_ST_ERR_DTYPE] = "GDU_ST_ERR_DTYPE",
    [GDU_ST_ERR_SHAPE] = "GDU_ST_ERR_SHAPE",
    [GDU_ST_ERR_OVERFLOW] = "GDU_ST_ERR_OVERFLOW",
    [GDU_ST_ERR_OFFSETS] = "GDU_ST_ERR_OFFSETS",
    [GDU_ST_ERR_SIZE_MISMATCH] = "GDU_ST_ERR_SIZE_MISMATCH",
    [GDU_ST_ERR_OUT_OF_RANGE] = "GDU_ST_ERR_OUT_OF_RANGE",
    [GDU_ST_ERR_OVERLAP] = "GDU_ST_ERR_OVERLAP",
    [GDU_ST_ERR_METADATA] = "GDU_ST_ERR_METADATA",
    [GDU_ST_ERR_INDEX] = "GDU_ST_ERR_INDEX",
    [GDU_ST_ERR_PATH_ESCAPE] = "GDU_ST_ERR_PATH_ESCAPE",
    [GDU_ST_ERR_DUPLICATE_TENSOR] = "GDU_ST_ERR_DUPLICATE_TENSOR",
    [GDU_ST_ERR_NO_CUDA] = "GDU_ST_ERR_NO_CUDA",
    [GDU_ST_ERR_DEVICE_MEMORY] = "GDU_ST_ERR_DEVICE_MEMORY",
    [GDU_ST_ERR_ENGINE] = "GDU_ST_ERR_ENGINE",
    [GDU_ST_ERR_VERIFY_MISMATCH] = "GDU_ST_ERR_VERIFY_MISMATCH",
    [GDU_ST_ERR_HOLE] = "GDU_ST_ERR_HOLE",
    [GDU_ST_ERR_TRAILING] = "GDU_ST_ERR_TRAILING",
    [GDU_ST_ERR_SETTINGS] = "GDU_ST_ERR_SETTINGS",
    [GDU_ST_ERR_BUSY] = "GDU_ST_ERR_BUSY",
    [GDU_ST_ERR_CHANGED] = "GDU_ST_ERR_CHANGED",
    [GDU_ST_ERR_TOO_MANY_FILES] = "GDU_ST_ERR_TOO_MANY_FILES",
};

const char *gdu_st_status_name(gdu_st_status status)
{
    if ((unsigned)status >= GDU_ST_STATUS_COUNT || status_names[status] == NULL)
        return "unknown";
    return status_names[status];
}

gdu_st_status st_fail(gdu_st_error *err, gdu_st_status code, const char *fmt, ...)
{
    if (err != NULL) {
        err->code = code;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return code;
}

gdu_st_status st_ok(gdu_st_error *err)
{
    if (err != NULL) {
        err->code = GDU_ST_OK;
        err->message[0] = '\0';
    }
    return GDU_ST_OK;
}

void st_prefix(gdu_st_error *err, const char *prefix)
{
    if (err == NULL)
        return;
    char msg[sizeof err->message], shown[sizeof msg / 2];
    /* A long path keeps its start and its file's name; the message that
     * follows keeps the rest of the room. */
    gdu_text_shorten(prefix, sizeof shown - 1, shown, sizeof shown);
    size_t p = strlen(shown);
    size_t m = strnlen(err->message, sizeof msg - p - 3);
    memcpy(msg, shown, p);
    memcpy(msg + p, ": ", 2);
    memcpy(msg + p + 2, err->message, m);
    msg[p + 2 + m] = '\0';
    memcpy(err->message, msg, sizeof msg);
}

gdu_st_status st_unknown_flags(gdu_st_error *err, unsigned flags)
{
    return st_fail(err, GDU_ST_ERR_INVALID_ARGUMENT,
                   "unknown flags 0x%x (GDU_ST_LENIENT; GDU_ST_FOLDER for gdu_st_open_flags)",
                   flags & ~GDU_ST_LENIENT);
}
