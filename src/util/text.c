#include "util/text.h"
#include "util/utf8.h"

#include <locale.h>
#include <pthread.h>
#include <stdint.h>
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
