/* UTF-8 sequences, byte by byte: for writers that must turn any bytes from
 * outside (paths, command lines, file contents) into valid UTF-8 or escape
 * them. No allocation (the shim's report writer uses it). */
#ifndef GDUNLOCK_UTIL_UTF8_H
#define GDUNLOCK_UTIL_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The length (1..4) of the valid UTF-8 sequence at s[0..n), with its code
 * point in *cp; 0 when s[0] begins none (a stray continuation byte, an
 * overlong form, a surrogate, a code point above U+10FFFF or a sequence cut
 * short). A NUL byte is a valid sequence of length 1. n must be > 0. */
size_t gdu_utf8_seq(const char *s, size_t n, uint32_t *cp);

/* Where s[0] begins no valid sequence: how many bytes one U+FFFD stands for,
 * the longest start of a valid sequence there (at least 1), as Python's
 * decode(errors="replace") and the WHATWG decoder count them. */
size_t gdu_utf8_invalid_len(const char *s, size_t n);

/* Whether all n bytes of s are valid UTF-8. */
bool gdu_utf8_valid(const char *s, size_t n);

/* U+FFFD, the replacement character, in UTF-8. */
#define GDU_UTF8_REPLACEMENT "\xef\xbf\xbd"

#endif
