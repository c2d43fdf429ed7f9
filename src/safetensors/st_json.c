/* A strict JSON parser for safetensors headers, reading what serde_json
 * reads (see st_json.h). Recursive descent, depth-bounded. A container's
 * items are gathered on one stack shared by the whole parse and copied,
 * once complete, into the document's node arena at their exact count;
 * strings go to its text arena. (A node and a string each malloc'd, and
 * item arrays doubled from 8, took 2 KB per tensor entry: 2.1 GB for a
 * header of a million tensors, three times Python's json.loads.) */
#include "safetensors/st_json.h"

#include <math.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bump allocation in blocks that double from ARENA_FIRST to ARENA_BLOCK
 * bytes; a larger request gets a block of its own. A document kept per
 * shard (an index's every header) held a block of ARENA_BLOCK for a header
 * of a few hundred bytes: the pages it touched, two a document, grew with
 * the shards. */
#define ARENA_FIRST ((size_t)1 << 10)
#define ARENA_BLOCK ((size_t)1 << 20)

typedef struct arena_block {
    struct arena_block *next;
    size_t used, size;
    _Alignas(max_align_t) unsigned char bytes[];
} arena_block;

static void *arena_alloc(arena_block **arena, size_t n)
{
    n = (n + _Alignof(max_align_t) - 1) & ~(_Alignof(max_align_t) - 1);
    arena_block *b = *arena;
    if (b == NULL || b->size - b->used < n) {
        size_t step = b == NULL ? ARENA_FIRST : b->size >= ARENA_BLOCK ? ARENA_BLOCK : 2 * b->size;
        size_t size = n > step ? n : step;
        b = malloc(sizeof *b + size);
        if (b == NULL)
            return NULL;
        b->used = 0;
        b->size = size;
        /* A block of its own goes behind the current one, which keeps its room. */
        if (size > step && *arena != NULL) {
            b->next = (*arena)->next;
            (*arena)->next = b;
        } else {
            b->next = *arena;
            *arena = b;
        }
    }
    void *p = b->bytes + b->used;
    b->used += n;
    return p;
}

static void arena_free(arena_block **arena)
{
    while (*arena != NULL) {
        arena_block *next = (*arena)->next;
        free(*arena);
        *arena = next;
    }
}

_Static_assert(sizeof(st_json) == 32, "a JSON value in 32 bytes");

struct st_json_doc {
    st_json root;
    arena_block *nodes, *text;
};

typedef struct {
    const unsigned char *p, *end, *start;
    st_json_doc *doc;
    st_json *stack; /* items of the containers being parsed, innermost last */
    size_t top, cap;
    char *why;
    size_t why_len;
    int failed;
} parser;

static int fail(parser *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(parser *ps, const char *fmt, ...)
{
    if (!ps->failed && ps->why != NULL && ps->why_len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ps->why, ps->why_len, fmt, ap);
        va_end(ap);
    }
    ps->failed = 1;
    return -1;
}

/* Pushes v on the item stack. */
static int push(parser *ps, const st_json *v)
{
    if (ps->top == ps->cap) {
        size_t cap = ps->cap ? 2 * ps->cap : 256;
        st_json *grown = realloc(ps->stack, cap * sizeof *grown);
        if (grown == NULL)
            return fail(ps, "out of memory");
        ps->stack = grown;
        ps->cap = cap;
    }
    ps->stack[ps->top++] = *v;
    return 0;
}

/* Rust's str::from_utf8: no overlong forms, no surrogates, at most U+10FFFF. */
static size_t utf8_invalid_at(const unsigned char *s, size_t len)
{
    for (size_t i = 0; i < len;) {
        unsigned c = s[i];
        size_t n = c < 0x80             ? 1
                   : (c & 0xe0) == 0xc0 ? 2
                   : (c & 0xf0) == 0xe0 ? 3
                   : (c & 0xf8) == 0xf0 ? 4
                                        : 0;
        if (n == 0 || i + n > len)
            return i;
        uint32_t v = n == 1 ? c : n == 2 ? c & 0x1f : n == 3 ? c & 0x0f : c & 0x07;
        for (size_t k = 1; k < n; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return i;
            v = (v << 6) | (s[i + k] & 0x3f);
        }
        static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (v < least[n] || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
            return i;
        i += n;
    }
    return len;
}

static void skip_space(parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static int parse_value(parser *ps, st_json *out, int depth);

static int hex4(parser *ps, uint32_t *out)
{
    if (ps->end - ps->p < 4)
        return fail(ps, "EOF in a \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = ps->p[i];
        unsigned d = c >= '0' && c <= '9'   ? c - '0'
                     : c >= 'a' && c <= 'f' ? c - 'a' + 10
                     : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                            : 16;
        if (d == 16)
            return fail(ps, "invalid \\u escape");
        v = v << 4 | d;
    }
    ps->p += 4;
    *out = v;
    return 0;
}

static size_t put_utf8(unsigned char *o, uint32_t v)
{
    if (v < 0x80) {
        o[0] = (unsigned char)v;
        return 1;
    }
    if (v < 0x800) {
        o[0] = (unsigned char)(0xc0 | v >> 6);
        o[1] = (unsigned char)(0x80 | (v & 0x3f));
        return 2;
    }
    if (v < 0x10000) {
        o[0] = (unsigned char)(0xe0 | v >> 12);
        o[1] = (unsigned char)(0x80 | ((v >> 6) & 0x3f));
        o[2] = (unsigned char)(0x80 | (v & 0x3f));
        return 3;
    }
    o[0] = (unsigned char)(0xf0 | v >> 18);
    o[1] = (unsigned char)(0x80 | ((v >> 12) & 0x3f));
    o[2] = (unsigned char)(0x80 | ((v >> 6) & 0x3f));
    o[3] = (unsigned char)(0x80 | (v & 0x3f));
    return 4;
}

/* A string; ps->p at the opening quote. Decoded text is never longer than
 * the escaped one. */
static int parse_string(parser *ps, st_json *out)
{
    const unsigned char *q = ++ps->p;
    while (q < ps->end && *q != '"') /* find the end (an escaped quote is skipped) */
        q += *q == '\\' && q + 1 < ps->end ? 2 : 1;
    if (q >= ps->end)
        return fail(ps, "EOF while parsing a string");
    unsigned char *buf = arena_alloc(&ps->doc->text, (size_t)(q - ps->p) + 1);
    if (buf == NULL)
        return fail(ps, "out of memory");
    size_t n = 0;
    while (*ps->p != '"') {
        unsigned c = *ps->p;
        if (c < 0x20)
            return fail(ps, "control character (\\u%04x) found while parsing a string", c);
        if (c != '\\') {
            buf[n++] = (unsigned char)c;
            ps->p++;
            continue;
        }
        ps->p++;
        unsigned e = *ps->p++;
        static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
        const char *hit = e != 'u' ? strchr(from, (int)e) : NULL;
        if (hit != NULL && e != '\0') {
            buf[n++] = (unsigned char)to[hit - from];
            continue;
        }
        if (e != 'u')
            return fail(ps, "invalid escape");
        uint32_t v = 0; /* hex4 sets it unless it fails */
        if (hex4(ps, &v) != 0)
            return -1;
        if (v >= 0xdc00 && v <= 0xdfff)
            return fail(ps, "lone trailing surrogate in hex escape");
        if (v >= 0xd800 && v <= 0xdbff) {
            uint32_t lo = 0;
            if (ps->end - ps->p < 2 || ps->p[0] != '\\' || ps->p[1] != 'u')
                return fail(ps, "lone leading surrogate in hex escape");
            ps->p += 2;
            if (hex4(ps, &lo) != 0)
                return -1;
            if (lo < 0xdc00 || lo > 0xdfff)
                return fail(ps, "lone leading surrogate in hex escape");
            v = 0x10000 + ((v - 0xd800) << 10) + (lo - 0xdc00);
        }
        n += put_utf8(buf + n, v);
    }
    ps->p++;
    buf[n] = '\0';
    *out = (st_json){.kind = ST_JSON_STRING, .str = (const char *)buf, .len = n};
    return 0;
}

static int is_digit(const unsigned char *p, const unsigned char *end)
{
    return p < end && *p >= '0' && *p <= '9';
}

static int parse_number(parser *ps, st_json *out)
{
    const unsigned char *s = ps->p, *p = ps->p;
    int negative = *p == '-', integer = 1;
    if (negative)
        p++;
    if (!is_digit(p, ps->end))
        return fail(ps, "invalid number");
    if (*p == '0' && is_digit(p + 1, ps->end))
        return fail(ps, "invalid number (a leading zero)");
    while (is_digit(p, ps->end))
        p++;
    if (p < ps->end && *p == '.') {
        integer = 0;
        if (!is_digit(++p, ps->end))
            return fail(ps, "invalid number");
        while (is_digit(p, ps->end))
            p++;
    }
    if (p < ps->end && (*p == 'e' || *p == 'E')) {
        integer = 0;
        p++;
        if (p < ps->end && (*p == '+' || *p == '-'))
            p++;
        if (!is_digit(p, ps->end))
            return fail(ps, "invalid number");
        while (is_digit(p, ps->end))
            p++;
    }
    ps->p = p;
    *out = (st_json){.kind = ST_JSON_NUMBER, .str = (const char *)s, .len = (size_t)(p - s)};
    if (integer && !negative) {
        uint64_t v = 0;
        int overflow = 0;
        for (const unsigned char *d = s; d < p && !overflow; d++) {
            overflow = __builtin_mul_overflow(v, 10, &v);
            overflow = overflow || __builtin_add_overflow(v, (uint64_t)(*d - '0'), &v);
        }
        if (!overflow) {
            out->is_u64 = 1;
            out->u64 = v;
            return 0;
        }
    }
    /* A float (or an integer past 64 bits, which serde_json reads as one):
     * out of a double's range is an error there. */
    char *text = malloc(out->len + 1);
    if (text == NULL)
        return fail(ps, "out of memory");
    memcpy(text, s, out->len);
    text[out->len] = '\0';
    double d = strtod(text, NULL);
    free(text);
    if (isinf(d))
        return fail(ps, "number out of range");
    return 0;
}

static int by_key(const void *a, const void *b)
{
    const st_json *x = *(const st_json *const *)a, *y = *(const st_json *const *)b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->str, y->str, n);
    return c != 0 ? c : (x->len > y->len) - (x->len < y->len);
}

/* Refuses an object with a key twice. */
static int check_unique(parser *ps, const st_json *o)
{
    if (o->count < 2)
        return 0;
    const st_json **keys = malloc(o->count * sizeof *keys);
    if (keys == NULL)
        return fail(ps, "out of memory");
    for (size_t i = 0; i < o->count; i++)
        keys[i] = &o->items[2 * i];
    qsort(keys, o->count, sizeof *keys, by_key);
    int r = 0;
    for (size_t i = 1; r == 0 && i < o->count; i++)
        if (by_key(&keys[i - 1], &keys[i]) == 0)
            r = fail(ps, "duplicate key '%.80s'", keys[i]->str);
    free(keys);
    return r;
}

/* An array or object; ps->p at its opening bracket. Its items are pushed
 * on the stack as they are parsed, then copied to the node arena. */
static int parse_container(parser *ps, st_json *out, int depth)
{
    int object = *ps->p == '{';
    unsigned char close = object ? '}' : ']';
    if (depth > ST_JSON_MAX_DEPTH)
        return fail(ps, "recursion limit exceeded (more than %d nested arrays and objects)",
                    ST_JSON_MAX_DEPTH);
    ps->p++;
    size_t base = ps->top;
    skip_space(ps);
    int first = 1;
    while (!(ps->p < ps->end && *ps->p == close)) {
        if (!first) {
            if (ps->p >= ps->end || *ps->p != ',')
                return fail(ps, object ? "expected ',' or '}'" : "expected ',' or ']'");
            ps->p++;
            skip_space(ps);
        }
        first = 0;
        st_json v;
        if (object) {
            if (ps->p >= ps->end || *ps->p != '"')
                return fail(ps, "expected a key (a string)");
            if (parse_string(ps, &v) != 0 || push(ps, &v) != 0)
                return -1;
            skip_space(ps);
            if (ps->p >= ps->end || *ps->p != ':')
                return fail(ps, "expected ':'");
            ps->p++;
            skip_space(ps);
        }
        if (parse_value(ps, &v, depth + 1) != 0 || push(ps, &v) != 0)
            return -1;
        skip_space(ps);
        if (ps->p >= ps->end)
            return fail(ps, object ? "EOF while parsing an object" : "EOF while parsing a list");
    }
    ps->p++;
    size_t n = ps->top - base;
    st_json *items = NULL;
    if (n > 0 && (items = arena_alloc(&ps->doc->nodes, n * sizeof *items)) == NULL)
        return fail(ps, "out of memory");
    if (n > 0)
        memcpy(items, ps->stack + base, n * sizeof *items);
    ps->top = base;
    *out = (st_json){.kind = object ? ST_JSON_OBJECT : ST_JSON_ARRAY,
                     .items = items,
                     .count = object ? n / 2 : n};
    return object ? check_unique(ps, out) : 0;
}

static int literal(parser *ps, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
        return fail(ps, "expected a value");
    ps->p += n;
    return 0;
}

static int parse_value(parser *ps, st_json *out, int depth)
{
    if (ps->p >= ps->end)
        return fail(ps, "EOF while parsing a value");
    switch (*ps->p) {
    case '{':
    case '[':
        return parse_container(ps, out, depth);
    case '"':
        return parse_string(ps, out);
    case 'n':
        *out = (st_json){.kind = ST_JSON_NULL};
        return literal(ps, "null");
    case 't':
        *out = (st_json){.kind = ST_JSON_BOOL, .truth = 1};
        return literal(ps, "true");
    case 'f':
        *out = (st_json){.kind = ST_JSON_BOOL};
        return literal(ps, "false");
    default:
        if (*ps->p == '-' || (*ps->p >= '0' && *ps->p <= '9'))
            return parse_number(ps, out);
        return fail(ps, "expected a value");
    }
}

st_json_doc *st_json_parse(const char *text, size_t len, char *why, size_t why_len, size_t *where)
{
    st_json_doc *doc = calloc(1, sizeof *doc);
    parser ps = {.p = (const unsigned char *)text,
                 .end = (const unsigned char *)text + len,
                 .start = (const unsigned char *)text,
                 .doc = doc,
                 .why = why,
                 .why_len = why_len};
    if (doc == NULL) {
        fail(&ps, "out of memory");
        return NULL;
    }
    size_t bad = utf8_invalid_at(ps.p, len);
    if (bad < len) {
        ps.p += bad;
        fail(&ps, "invalid UTF-8");
    } else {
        skip_space(&ps);
        if (parse_value(&ps, &doc->root, 1) == 0) {
            skip_space(&ps);
            if (ps.p != ps.end)
                fail(&ps, "trailing characters");
        }
    }
    free(ps.stack);
    if (where != NULL)
        *where = (size_t)(ps.p - ps.start);
    if (ps.failed) {
        st_json_free(doc);
        return NULL;
    }
    return doc;
}

const st_json *st_json_root(const st_json_doc *doc) { return &doc->root; }

void st_json_drop_tree(st_json_doc *doc)
{
    arena_free(&doc->nodes);
    doc->root = (st_json){.kind = ST_JSON_NULL};
}

void st_json_free(st_json_doc *doc)
{
    if (doc == NULL)
        return;
    arena_free(&doc->nodes);
    arena_free(&doc->text);
    free(doc);
}

const st_json *st_json_get(const st_json *o, const char *key)
{
    size_t n = strlen(key);
    for (size_t i = 0; o->kind == ST_JSON_OBJECT && i < o->count; i++) {
        const st_json *k = st_json_key(o, i);
        if (k->len == n && memcmp(k->str, key, n) == 0)
            return st_json_value(o, i);
    }
    return NULL;
}
