/* The one data pattern of gdunlock's checks: bench files, verify's buffers
 * and p2p's copies. The 8-byte (host order) word at byte offset 8*i of a
 * pattern stream is gdu_pattern_word(seed, i): splitmix64's output for the
 * state seed + (i + 1) * golden ratio, so any word is made alone, a shifted,
 * stale or zeroed copy never passes, and the first word gives back its seed
 * (splitmix64's output function is a bijection). */
#ifndef GDUNLOCK_UTIL_PATTERN_H
#define GDUNLOCK_UTIL_PATTERN_H

#include <stddef.h>
#include <stdint.h>

uint64_t gdu_pattern_word(uint64_t seed, uint64_t index);

/* The seed whose pattern starts with first_word. */
uint64_t gdu_pattern_seed_of(uint64_t first_word);

/* Writes bytes [offset, offset + n) of the seed's stream into buf. */
void gdu_pattern_fill(void *buf, uint64_t offset, size_t n, uint64_t seed);

/* The stream offset of the first byte of buf (holding [offset, offset + n))
 * that differs from the seed's stream, or UINT64_MAX when all match. */
uint64_t gdu_pattern_check(const void *buf, uint64_t offset, size_t n, uint64_t seed);

#endif
