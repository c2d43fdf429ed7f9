#include "util/units.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int suffix_shift(const char *s, unsigned *shift)
{
    static const char units[] = "KMGTPE";
    if (*s == '\0') {
        *shift = 0;
        return 0;
    }
    const char *u = strchr(units, toupper((unsigned char)*s));
    if (u == NULL) {
        if (strcasecmp(s, "B") == 0) {
            *shift = 0;
            return 0;
        }
        return -EINVAL;
    }
    *shift = 10u * (unsigned)(u - units + 1);
    s++;
    if (*s == '\0' || strcasecmp(s, "B") == 0 || strcasecmp(s, "iB") == 0)
        return 0;
    return -EINVAL;
}

int gdu_parse_size(const char *text, uint64_t *out)
{
    if (text == NULL || !isdigit((unsigned char)text[0]))
        return -EINVAL;
    const char *p = text;
    uint64_t whole = 0;
    while (isdigit((unsigned char)*p)) {
        unsigned d = (unsigned)(*p - '0');
        if (whole > (UINT64_MAX - d) / 10)
            return -ERANGE;
        whole = whole * 10 + d;
        p++;
    }
    double frac = 0.0, scale = 0.1;
    if (*p == '.') {
        p++;
        if (!isdigit((unsigned char)*p))
            return -EINVAL;
        while (isdigit((unsigned char)*p)) {
            frac += (*p - '0') * scale;
            scale /= 10.0;
            p++;
        }
    }
    unsigned shift;
    if (suffix_shift(p, &shift) != 0)
        return -EINVAL;
    if (shift >= 64 || (shift > 0 && whole > (UINT64_MAX >> shift)))
        return -ERANGE;
    uint64_t value = whole << shift;
    if (frac > 0.0) {
        if (shift == 0)
            return -EINVAL; /* fractional bytes make no sense */
        double extra = ldexp(frac, (int)shift);
        if ((double)(UINT64_MAX - value) < extra)
            return -ERANGE;
        value += (uint64_t)extra;
    }
    *out = value;
    return 0;
}

int gdu_parse_uint(const char *text, uint64_t min, uint64_t max, uint64_t *out)
{
    if (text == NULL || !isdigit((unsigned char)text[0]))
        return -EINVAL;
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(text, &end, 10);
    if (*end != '\0')
        return -EINVAL;
    if (errno == ERANGE || v < min || v > max)
        return -ERANGE;
    *out = v;
    return 0;
}

int gdu_parse_bool(const char *text, int *out)
{
    static const char *const words[][2] = {
        {"on", "off"}, {"true", "false"}, {"yes", "no"}, {"1", "0"}};
    if (text == NULL)
        return -EINVAL;
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        for (int v = 0; v < 2; v++)
            if (strcasecmp(text, words[i][v]) == 0) {
                *out = !v;
                return 0;
            }
    return -EINVAL;
}

int gdu_env_bool(const char *name, int unset_value, int *out)
{
    const char *v = getenv(name);
    *out = unset_value;
    if (v == NULL || *v == '\0')
        return 0;
    return gdu_parse_bool(v, out);
}

int gdu_parse_index_list(const char *text, unsigned max_value, int *out, size_t cap, size_t *count)
{
    if (text == NULL || *text == '\0')
        return -EINVAL;
    size_t n = 0;
    const char *p = text;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char item[16];
        if (len == 0 || len >= sizeof item)
            return -EINVAL;
        memcpy(item, p, len);
        item[len] = '\0';
        uint64_t v;
        int rc = gdu_parse_uint(item, 0, max_value, &v);
        if (rc != 0)
            return rc;
        if (n == cap)
            return -ERANGE;
        out[n++] = (int)v;
        if (comma == NULL)
            break;
        p = comma + 1;
    }
    *count = n;
    return 0;
}

const char *gdu_format_bytes(uint64_t bytes, char *buf, size_t len)
{
    static const char *names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = (double)bytes;
    size_t i = 0;
    while (v >= 1024.0 && i + 1 < sizeof names / sizeof names[0]) {
        v /= 1024.0;
        i++;
    }
    if (i == 0)
        snprintf(buf, len, "%llu B", (unsigned long long)bytes);
    else
        snprintf(buf, len, "%.2f %s", v, names[i]);
    return buf;
}
