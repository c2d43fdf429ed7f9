/* The verify data pattern: splitmix64 of (seed, word index). */
#include "verify/verify_internal.h"

#include <string.h>

static uint64_t pattern_word(uint64_t seed, uint64_t index)
{
    uint64_t z = seed + (index + 1) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void gdu_verify_pattern_fill(void *buf, size_t len, uint64_t seed)
{
    unsigned char *p = buf;
    for (size_t off = 0; off < len; off += 8) {
        uint64_t w = pattern_word(seed, off / 8);
        size_t n = len - off < 8 ? len - off : 8;
        memcpy(p + off, &w, n);
    }
}

bool gdu_verify_pattern_check(const void *buf, size_t len, uint64_t seed, uint64_t *first_bad)
{
    const unsigned char *p = buf;
    for (size_t off = 0; off < len; off += 8) {
        uint64_t w = pattern_word(seed, off / 8);
        size_t n = len - off < 8 ? len - off : 8;
        if (memcmp(p + off, &w, n) != 0) {
            const unsigned char *want = (const unsigned char *)&w;
            size_t i = 0;
            while (i < n && p[off + i] == want[i])
                i++;
            *first_bad = off + i;
            return false;
        }
    }
    return true;
}
