/* Parsing and printing of sizes, counts and booleans given on command lines
 * and in the environment. */
#ifndef GDUNLOCK_UTIL_UNITS_H
#define GDUNLOCK_UTIL_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* Parses "4096", "64K", "16MiB", "8G", "1.5GiB" (binary multiples, case
 * insensitive, optional "B"/"iB"). Rejects negatives, junk, empty strings and
 * values that overflow uint64. Returns 0 or -EINVAL / -ERANGE. */
int gdu_parse_size(const char *text, uint64_t *out);

/* Parses a non-negative decimal integer in [min, max]. Returns 0 or -EINVAL / -ERANGE. */
int gdu_parse_uint(const char *text, uint64_t min, uint64_t max, uint64_t *out);

/* Parses a boolean setting as kvikio reads its own: ON/OFF, TRUE/FALSE,
 * YES/NO, 1/0, in any case. Returns 0 and sets *out (1 or 0), or -EINVAL. */
int gdu_parse_bool(const char *text, int *out);

/* The boolean environment variable name: 0 and *out set (unset_value where
 * it is unset or empty), or -EINVAL where its value is not a boolean (*out
 * then unset_value too). */
int gdu_env_bool(const char *name, int unset_value, int *out);

/* What gdu_parse_bool accepts, for error messages. */
#define GDU_BOOL_WORDS "ON/OFF, TRUE/FALSE, YES/NO or 1/0 (any case)"

/* Parses a comma-separated list of small non-negative integers ("0,1,3") into
 * out[0..*count). Returns 0 or -EINVAL / -ERANGE (too many, or > max_value). */
int gdu_parse_index_list(const char *text, unsigned max_value, int *out, size_t cap, size_t *count);

/* Formats bytes as "1.50 GiB" into buf. Returns buf. */
const char *gdu_format_bytes(uint64_t bytes, char *buf, size_t len);

#endif
