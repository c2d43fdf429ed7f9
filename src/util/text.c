#include "util/text.h"
#include "util/utf8.h"

#include <locale.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

static locale_t utf8_locale;
static pthread_once_t utf8_once = PTHREAD_ONCE_INIT;

static void open_utf8_locale(void) { utf8_locale = newlocale(LC_CTYPE_MASK, "C.UTF-8", 0); }

/* Terminal columns of a printable code point: the C library's table in a
 * UTF-8 locale of our own (the process's locale is left alone), 1 where
 * there is none. */
static size_t columns(uint32_t cp)
{
    if (cp < 0x80)
        return 1;
    pthread_once(&utf8_once, open_utf8_locale);
    if (utf8_locale == 0)
        return 1;
    locale_t old = uselocale(utf8_locale);
    int w = wcwidth((wchar_t)cp);
    uselocale(old);
    return w < 0 ? 1 : (size_t)w;
}

static bool bidi_control(uint32_t cp)
{
    return (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

size_t gdu_text_escape(FILE *out, const char *s, size_t n)
{
    size_t cols = 0;
    for (size_t i = 0, k; i < n; i += k) {
        uint32_t cp = 0;
        char esc[16];
        k = gdu_utf8_seq(s + i, n - i, &cp);
        if (k == 0 || cp < 0x20 || cp == 0x7f) {
            k = 1;
            snprintf(esc, sizeof esc, "\\x%02x", (unsigned char)s[i]);
        } else if ((cp >= 0x80 && cp <= 0x9f) || bidi_control(cp)) {
            snprintf(esc, sizeof esc, "\\u%04x", (unsigned)cp);
        } else if (cp == '\\') {
            snprintf(esc, sizeof esc, "\\\\");
        } else {
            if (out != NULL)
                fwrite(s + i, 1, k, out);
            cols += columns(cp);
            continue;
        }
        if (out != NULL)
            fputs(esc, out);
        cols += strlen(esc);
    }
    return cols;
}

void gdu_text_put(FILE *out, const char *s)
{
    if (s != NULL)
        gdu_text_escape(out, s, strlen(s));
}

void gdu_text_pad(FILE *out, const char *s, size_t n, size_t width)
{
    for (size_t used = gdu_text_escape(out, s, n); used < width; used++)
        fputc(' ', out);
}

char *gdu_text_escaped(const char *s, size_t n)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (m == NULL)
        return NULL;
    gdu_text_escape(m, s, n);
    if (fclose(m) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* How many of s's first n bytes end on a UTF-8 sequence boundary. */
static size_t whole_head(const char *s, size_t n)
{
    while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
        n--;
    return n;
}

/* Where in s[0..n) a tail of at most keep bytes starts on a boundary. */
static size_t whole_tail(const char *s, size_t n, size_t keep)
{
    size_t at = n - keep;
    while (at < n && ((unsigned char)s[at] & 0xc0) == 0x80)
        at++;
    return at;
}

char *gdu_text_shorten(const char *s, size_t max, char *out, size_t len)
{
    static const char gap[] = "...";
    if (len == 0)
        return out;
    if (max > len - 1)
        max = len - 1;
    size_t n = strlen(s);
    if (n <= max || max < sizeof gap - 1 + 2) {
        snprintf(out, len, "%.*s", (int)(n <= max ? n : whole_head(s, max)), s);
        return out;
    }
    size_t room = max - (sizeof gap - 1);
    size_t head = whole_head(s, room / 3);
    size_t tail = whole_tail(s, n, room - room / 3);
    snprintf(out, len, "%.*s%s%s", (int)head, s, gap, s + tail);
    return out;
}
