/* A small JSON writer into a growing buffer: for output that must not pull
 * in a JSON library (the shim's report is written inside every preloaded
 * process). Keys are NULL inside arrays. Out of memory makes
 * gdu_jsonw_finish return NULL; every other call just does nothing then. */
#ifndef GDUNLOCK_UTIL_JSONW_H
#define GDUNLOCK_UTIL_JSONW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GDU_JSONW_MAX_DEPTH 16

typedef struct {
    char *buf;
    size_t len, cap;
    bool failed;
    unsigned depth;
    bool first[GDU_JSONW_MAX_DEPTH + 1]; /* no member written yet at this depth */
} gdu_jsonw;

void gdu_jsonw_init(gdu_jsonw *w);
void gdu_jsonw_object_begin(gdu_jsonw *w, const char *key);
void gdu_jsonw_object_end(gdu_jsonw *w);
void gdu_jsonw_array_begin(gdu_jsonw *w, const char *key);
void gdu_jsonw_array_end(gdu_jsonw *w);
/* value NULL writes null. Bytes below 0x20, '"' and '\\' are escaped, valid
 * UTF-8 is copied, and bytes that are not valid UTF-8 become U+FFFD (one
 * for each gdu_utf8_invalid_len): the document parses whatever bytes the
 * caller passes. */
void gdu_jsonw_string(gdu_jsonw *w, const char *key, const char *value);
void gdu_jsonw_uint(gdu_jsonw *w, const char *key, uint64_t value);
void gdu_jsonw_int(gdu_jsonw *w, const char *key, int64_t value);
void gdu_jsonw_bool(gdu_jsonw *w, const char *key, bool value);
void gdu_jsonw_null(gdu_jsonw *w, const char *key);
/* The document (NUL-terminated, newline at the end; caller frees), or NULL
 * when memory ran out or the nesting is unbalanced. */
char *gdu_jsonw_finish(gdu_jsonw *w);

#endif
