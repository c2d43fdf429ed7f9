/* The JSON of a safetensors header, parsed as the reference implementation's
 * parser (serde_json) reads it, so that the header validation can accept and
 * refuse exactly what the reference does:
 *   - whitespace is space, tab, line feed and carriage return, before and
 *     after the value; anything else after it is an error;
 *   - strings are UTF-8 with JSON's escapes; \u0000 is a character like any
 *     other (so strings carry a length); a lone surrogate is an error;
 *   - a number is kept as written, with its value when it is an integer
 *     from 0 to 2^64-1 written without sign, fraction or exponent (what
 *     serde reads into a usize: "-0", "1.0" and "1e3" are floats); a number
 *     that overflows a double is an error, as serde_json's is;
 *   - at most 127 arrays and objects nested (serde_json's recursion limit of
 *     128, the outermost counted);
 *   - duplicate keys in an object are an error (the format's specification;
 *     serde would keep the last).
 * The tree lives in one arena and the decoded strings in another, so that
 * a caller done with the tree keeps the strings alone (st_json_drop_tree);
 * st_json_free frees both. Each container's items are allocated once, at
 * their exact count. */
#ifndef GDUNLOCK_ST_JSON_H
#define GDUNLOCK_ST_JSON_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    ST_JSON_NULL,
    ST_JSON_BOOL,
    ST_JSON_NUMBER,
    ST_JSON_STRING,
    ST_JSON_ARRAY,
    ST_JSON_OBJECT
} st_json_kind;

/* A value, in 32 bytes: a header of a million tensors has over ten million
 * of them. */
typedef struct st_json st_json;
struct st_json {
    st_json_kind kind;
    unsigned char is_u64; /* NUMBER: an unsigned integer that fits 64 bits */
    unsigned char truth;  /* BOOL */
    size_t len;           /* STRING, NUMBER: bytes of str */
    union {
        const char *str; /* STRING: the decoded bytes, NUL-terminated (may hold NUL); NUMBER: as
                          * written, in the parsed text */
        st_json *items;  /* ARRAY: count values; OBJECT: count keys (STRING) and values,
                          * interleaved */
    };
    union {
        uint64_t u64; /* NUMBER, when is_u64 */
        size_t count; /* ARRAY: items; OBJECT: members */
    };
};

typedef struct st_json_doc st_json_doc;

#define ST_JSON_MAX_DEPTH 127

/* Parses len bytes. Returns the document, or NULL with a message in why
 * (and the byte offset of the error in *where). */
st_json_doc *st_json_parse(const char *text, size_t len, char *why, size_t why_len, size_t *where);
const st_json *st_json_root(const st_json_doc *doc);
/* Frees the tree (st_json_root may not be used after it); the strings stay
 * until st_json_free. */
void st_json_drop_tree(st_json_doc *doc);
void st_json_free(st_json_doc *doc);

/* An object's member: key and value of member i. */
static inline const st_json *st_json_key(const st_json *o, size_t i) { return &o->items[2 * i]; }
static inline const st_json *st_json_value(const st_json *o, size_t i)
{
    return &o->items[2 * i + 1];
}
/* The value of key (NUL-terminated, holding no NUL) in object o, or NULL. */
const st_json *st_json_get(const st_json *o, const char *key);

#endif
