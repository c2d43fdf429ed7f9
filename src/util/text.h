/* Text from outside (paths, command lines, names inside a file, the files of
 * a captured machine, a child's report) on a terminal: every character that
 * could drive the terminal is written as an escape, and every escape can be
 * undone, so the bytes are never lost:
 *   \\      a backslash
 *   \xNN    a C0 control character (below 0x20, ESC included), DEL, or a
 *           byte that is not part of valid UTF-8
 *   \uNNNN  a C1 control character (U+0080..U+009F) or a bidirectional
 *           formatting character (U+202A..U+202E, U+2066..U+2069)
 * Everything else is written as it is. The one home of this escape: every
 * command's human output and messages use it, and JSON documents use it for
 * the exact form of text that is not UTF-8 (docs/cli-json.md). */
#ifndef GDUNLOCK_UTIL_TEXT_H
#define GDUNLOCK_UTIL_TEXT_H

#include <stddef.h>
#include <stdio.h>

/* Writes the n bytes of s escaped to out (NULL: writes nothing); returns the
 * terminal columns that takes (a wide character counts 2). */
size_t gdu_text_escape(FILE *out, const char *s, size_t n);

/* gdu_text_escape of a NUL-terminated string; NULL writes nothing. */
void gdu_text_put(FILE *out, const char *s);

/* The n bytes of s escaped, then spaces up to width columns: table cells. */
void gdu_text_pad(FILE *out, const char *s, size_t n, size_t width);

/* The escaped form as a new NUL-terminated string (caller frees); NULL
 * without memory. */
char *gdu_text_escaped(const char *s, size_t n);

/* s shortened in its middle to at most max bytes, as "head...tail", into
 * out (len bytes, NUL-terminated): the start of a path names where it lies
 * and its end what it is (a file's name, the kernel's " (deleted)"), so a
 * reason never loses either to a long folder. Never splits a UTF-8
 * sequence. Returns out. */
char *gdu_text_shorten(const char *s, size_t max, char *out, size_t len);

#endif
