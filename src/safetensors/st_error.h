/* Internal helpers for filling a gdu_st_error. */
#ifndef GDUNLOCK_ST_ERROR_H
#define GDUNLOCK_ST_ERROR_H

#include "gdunlock/safetensors.h"

/* Sets err (when not NULL) to code and a printf-formatted message; returns code. */
gdu_st_status st_fail(gdu_st_error *err, gdu_st_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Puts "prefix: " before err's message (when err is not NULL), truncating. */
void st_prefix(gdu_st_error *err, const char *prefix);

/* GDU_ST_ERR_INVALID_ARGUMENT for flags with bits other than GDU_ST_LENIENT. */
gdu_st_status st_unknown_flags(gdu_st_error *err, unsigned flags);

/* Clears err to GDU_ST_OK; returns GDU_ST_OK. */
gdu_st_status st_ok(gdu_st_error *err);

#endif
