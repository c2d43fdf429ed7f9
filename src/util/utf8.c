#include "util/utf8.h"

size_t gdu_utf8_seq(const char *s, size_t n, uint32_t *cp)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t len;
    uint32_t c, min;
    if (p[0] < 0x80) {
        *cp = p[0];
        return 1;
    }
    if (p[0] >= 0xc2 && p[0] <= 0xdf) {
        len = 2, c = p[0] & 0x1fu, min = 0x80;
    } else if (p[0] >= 0xe0 && p[0] <= 0xef) {
        len = 3, c = p[0] & 0x0fu, min = 0x800;
    } else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
        len = 4, c = p[0] & 0x07u, min = 0x10000;
    } else {
        return 0; /* a continuation byte, or 0xc0, 0xc1, 0xf5..0xff: never a first byte */
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        c = c << 6 | (p[i] & 0x3fu);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return 0; /* overlong, beyond Unicode, or a UTF-16 surrogate */
    *cp = c;
    return len;
}

size_t gdu_utf8_invalid_len(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t len = p[0] >= 0xc2 && p[0] <= 0xdf   ? 2
                 : p[0] >= 0xe0 && p[0] <= 0xef ? 3
                 : p[0] >= 0xf0 && p[0] <= 0xf4 ? 4
                                                : 1;
    /* The second byte's range excludes overlong forms, surrogates and
     * code points above U+10FFFF. */
    unsigned char lo = p[0] == 0xe0 ? 0xa0 : p[0] == 0xf0 ? 0x90 : 0x80;
    unsigned char hi = p[0] == 0xed ? 0x9f : p[0] == 0xf4 ? 0x8f : 0xbf;
    size_t i = 1;
    if (len > 1 && i < n && p[i] >= lo && p[i] <= hi)
        for (i++; i < len && i < n && (p[i] & 0xc0) == 0x80; i++)
            ;
    return i;
}

bool gdu_utf8_valid(const char *s, size_t n)
{
    uint32_t cp;
    for (size_t i = 0, k; i < n; i += k)
        if ((k = gdu_utf8_seq(s + i, n - i, &cp)) == 0)
            return false;
    return true;
}
