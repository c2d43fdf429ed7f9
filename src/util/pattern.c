#include "util/pattern.h"

#include <string.h>

#define GOLDEN 0x9e3779b97f4a7c15ull
#define MIX1 0xbf58476d1ce4e5b9ull
#define MIX2 0x94d049bb133111ebull

uint64_t gdu_pattern_word(uint64_t seed, uint64_t index)
{
    uint64_t z = seed + (index + 1) * GOLDEN;
    z = (z ^ (z >> 30)) * MIX1;
    z = (z ^ (z >> 27)) * MIX2;
    return z ^ (z >> 31);
}

/* The inverse of x ^= x >> shift. */
static uint64_t unshift(uint64_t x, unsigned shift)
{
    uint64_t y = x;
    for (unsigned done = shift; done < 64; done += shift)
        y = x ^ (y >> shift);
    return y;
}

/* The inverse of an odd number modulo 2^64 (Newton's iteration doubles the
 * correct low bits each step: 3, 6, 12, 24, 48, 96). */
static uint64_t inverse(uint64_t a)
{
    uint64_t x = a;
    for (int i = 0; i < 5; i++)
        x *= 2 - a * x;
    return x;
}

uint64_t gdu_pattern_seed_of(uint64_t first_word)
{
    uint64_t z = unshift(first_word, 31);
    z = unshift(z * inverse(MIX2), 27);
    z = unshift(z * inverse(MIX1), 30);
    return z - GOLDEN;
}

static uint8_t byte_at(uint64_t offset, uint64_t seed)
{
    uint64_t w = gdu_pattern_word(seed, offset / 8);
    uint8_t b[8];
    memcpy(b, &w, 8);
    return b[offset % 8];
}

void gdu_pattern_fill(void *buf, uint64_t offset, size_t n, uint64_t seed)
{
    uint8_t *b = buf;
    size_t i = 0;
    for (; i < n && (offset + i) % 8 != 0; i++)
        b[i] = byte_at(offset + i, seed);
    for (; i + 8 <= n; i += 8) {
        uint64_t w = gdu_pattern_word(seed, (offset + i) / 8);
        memcpy(b + i, &w, 8);
    }
    for (; i < n; i++)
        b[i] = byte_at(offset + i, seed);
}

uint64_t gdu_pattern_check(const void *buf, uint64_t offset, size_t n, uint64_t seed)
{
    const uint8_t *b = buf;
    size_t i = 0;
    for (; i < n && (offset + i) % 8 != 0; i++)
        if (b[i] != byte_at(offset + i, seed))
            return offset + i;
    for (; i + 8 <= n; i += 8) {
        uint64_t w = gdu_pattern_word(seed, (offset + i) / 8);
        if (memcmp(b + i, &w, 8) != 0)
            for (size_t k = 0;; k++)
                if (b[i + k] != byte_at(offset + i + k, seed))
                    return offset + i + k;
    }
    for (; i < n; i++)
        if (b[i] != byte_at(offset + i, seed))
            return offset + i;
    return UINT64_MAX;
}
