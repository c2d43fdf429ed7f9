/* Parsing and printing of sizes and counts given on command lines. */
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

/* Parses a comma-separated list of small non-negative integers ("0,1,3") into
 * out[0..*count). Returns 0 or -EINVAL / -ERANGE (too many, or > max_value). */
int gdu_parse_index_list(const char *text, unsigned max_value, int *out, size_t cap, size_t *count);

/* Formats bytes as "1.50 GiB" into buf. Returns buf. */
const char *gdu_format_bytes(uint64_t bytes, char *buf, size_t len);

#endif
