#include "util/jsonw.h"
#include "util/utf8.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gdu_jsonw_init(gdu_jsonw *w)
{
    memset(w, 0, sizeof *w);
    w->first[0] = true;
}

static void put(gdu_jsonw *w, const char *s, size_t n)
{
    if (w->failed)
        return;
    if (w->len + n + 2 > w->cap) {
        size_t cap = w->cap ? w->cap : 1024;
        while (w->len + n + 2 > cap)
            cap *= 2;
        char *b = realloc(w->buf, cap);
        if (b == NULL) {
            w->failed = true;
            return;
        }
        w->buf = b;
        w->cap = cap;
    }
    memcpy(w->buf + w->len, s, n);
    w->len += n;
    w->buf[w->len] = '\0';
}

static void puts_(gdu_jsonw *w, const char *s) { put(w, s, strlen(s)); }

/* A JSON string of any bytes: valid UTF-8 is copied, '"', '\\' and bytes
 * below 0x20 are escaped, and bytes that are not valid UTF-8 become U+FFFD
 * (gdu_utf8_invalid_len), so that the document always parses. */
static void quoted(gdu_jsonw *w, const char *s)
{
    put(w, "\"", 1);
    size_t n = strlen(s), run = 0, i = 0;
    while (i < n) {
        uint32_t cp;
        size_t k = gdu_utf8_seq(s + i, n - i, &cp);
        if (k > 0 && cp >= 0x20 && cp != '"' && cp != '\\') {
            i += k;
            continue;
        }
        put(w, s + run, i - run);
        char esc[8];
        if (k == 0)
            snprintf(esc, sizeof esc, "\\ufffd");
        else if (cp == '"' || cp == '\\')
            snprintf(esc, sizeof esc, "\\%c", (char)cp);
        else if (cp == '\n')
            snprintf(esc, sizeof esc, "\\n");
        else
            snprintf(esc, sizeof esc, "\\u%04x", (unsigned)cp);
        puts_(w, esc);
        i += k > 0 ? k : gdu_utf8_invalid_len(s + i, n - i);
        run = i;
    }
    put(w, s + run, i - run);
    put(w, "\"", 1);
}

/* The separator, indentation and key before a member. */
static void member(gdu_jsonw *w, const char *key)
{
    if (!w->first[w->depth])
        put(w, ",", 1);
    w->first[w->depth] = false;
    if (w->depth > 0) {
        put(w, "\n", 1);
        for (unsigned i = 0; i < w->depth; i++)
            put(w, "  ", 2);
    }
    if (key != NULL) {
        quoted(w, key);
        put(w, ": ", 2);
    }
}

static void open_(gdu_jsonw *w, const char *key, const char *bracket)
{
    member(w, key);
    puts_(w, bracket);
    if (w->depth == GDU_JSONW_MAX_DEPTH) {
        w->failed = true;
        return;
    }
    w->first[++w->depth] = true;
}

static void close_(gdu_jsonw *w, const char *bracket)
{
    if (w->depth == 0) {
        w->failed = true;
        return;
    }
    bool empty = w->first[w->depth];
    w->depth--;
    if (!empty) {
        put(w, "\n", 1);
        for (unsigned i = 0; i < w->depth; i++)
            put(w, "  ", 2);
    }
    puts_(w, bracket);
}

void gdu_jsonw_object_begin(gdu_jsonw *w, const char *key) { open_(w, key, "{"); }

void gdu_jsonw_object_end(gdu_jsonw *w) { close_(w, "}"); }

void gdu_jsonw_array_begin(gdu_jsonw *w, const char *key) { open_(w, key, "["); }

void gdu_jsonw_array_end(gdu_jsonw *w) { close_(w, "]"); }

void gdu_jsonw_string(gdu_jsonw *w, const char *key, const char *value)
{
    member(w, key);
    if (value == NULL)
        puts_(w, "null");
    else
        quoted(w, value);
}

void gdu_jsonw_uint(gdu_jsonw *w, const char *key, uint64_t value)
{
    char b[24];
    snprintf(b, sizeof b, "%" PRIu64, value);
    member(w, key);
    puts_(w, b);
}

void gdu_jsonw_int(gdu_jsonw *w, const char *key, int64_t value)
{
    char b[24];
    snprintf(b, sizeof b, "%" PRId64, value);
    member(w, key);
    puts_(w, b);
}

void gdu_jsonw_bool(gdu_jsonw *w, const char *key, bool value)
{
    member(w, key);
    puts_(w, value ? "true" : "false");
}

void gdu_jsonw_null(gdu_jsonw *w, const char *key)
{
    member(w, key);
    puts_(w, "null");
}

char *gdu_jsonw_finish(gdu_jsonw *w)
{
    put(w, "\n", 1);
    if (w->failed || w->depth != 0) {
        free(w->buf);
        w->buf = NULL;
        return NULL;
    }
    char *b = w->buf;
    w->buf = NULL;
    return b;
}
