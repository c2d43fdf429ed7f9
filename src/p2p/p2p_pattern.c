#include "p2p/p2p_pattern.h"

#include <string.h>

/* splitmix64 of the word index: any word can be generated on its own. */
static uint64_t word_at(uint64_t seed, uint64_t index)
{
    uint64_t z = seed * 0x9e3779b97f4a7c15ull + index + 1;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void gdu_p2p_pattern_fill(void *buf, size_t bytes, uint64_t seed)
{
    unsigned char *p = buf;
    size_t words = bytes / 8;
    for (size_t i = 0; i < words; i++) {
        uint64_t w = word_at(seed, i);
        memcpy(p + i * 8, &w, 8);
    }
    uint64_t tail = word_at(seed, words);
    memcpy(p + words * 8, &tail, bytes % 8);
}

size_t gdu_p2p_pattern_check(const void *buf, size_t bytes, uint64_t seed)
{
    const unsigned char *p = buf;
    size_t words = bytes / 8;
    for (size_t i = 0; i < words; i++) {
        uint64_t w = word_at(seed, i);
        if (memcmp(p + i * 8, &w, 8) != 0) {
            const unsigned char *e = (const unsigned char *)&w;
            size_t k = 0;
            while (p[i * 8 + k] == e[k])
                k++;
            return i * 8 + k;
        }
    }
    uint64_t tail = word_at(seed, words);
    const unsigned char *e = (const unsigned char *)&tail;
    for (size_t k = 0; k < bytes % 8; k++)
        if (p[words * 8 + k] != e[k])
            return words * 8 + k;
    return SIZE_MAX;
}
