/* Text from outside (paths, command lines, library messages, a captured
 * machine's files) in documents built with jansson, which refuses bytes that
 * are not UTF-8: every document stays valid JSON whatever the bytes, and
 * the bytes are never lost (docs/cli-json.md, "Text"). A library of its own
 * (gdu_util_json), so that what links util alone (the shim) needs no jansson. */
#ifndef GDUNLOCK_UTIL_JSON_TEXT_H
#define GDUNLOCK_UTIL_JSON_TEXT_H

#include <jansson.h>
#include <stddef.h>

/* A JSON string of the n bytes of s: valid UTF-8 as it is, bytes that are
 * not replaced by U+FFFD as decoders do (gdu_utf8_invalid_len). NULL only
 * without memory. */
json_t *gdu_json_textn(const char *s, size_t n);

/* gdu_json_textn of a NUL-terminated string; NULL gives JSON null. */
json_t *gdu_json_text(const char *s);

/* Sets obj[key] to gdu_json_text(s) and, when s is not valid UTF-8, also
 * obj[key "_escaped"] to its exact bytes in the escaped form of util/text.h
 * (for text the user named: a path, a command line). Returns 0, or -1
 * without memory. */
int gdu_json_set_text(json_t *obj, const char *key, const char *s);

/* A deep copy of doc with every string, object keys included, in the
 * escaped form of util/text.h: what a human renderer may print as it is.
 * NULL without memory. */
json_t *gdu_json_escaped_copy(const json_t *doc);

#endif
