#include "util/json_text.h"
#include "util/text.h"
#include "util/utf8.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

json_t *gdu_json_textn(const char *s, size_t n)
{
    if (gdu_utf8_valid(s, n))
        return json_stringn(s, n);
    /* A replaced byte grows at most to the three of U+FFFD. */
    char *copy = malloc(3 * n + 1);
    if (copy == NULL)
        return NULL;
    size_t len = 0;
    for (size_t i = 0, k; i < n; i += k) {
        uint32_t cp;
        k = gdu_utf8_seq(s + i, n - i, &cp);
        if (k == 0) {
            memcpy(copy + len, GDU_UTF8_REPLACEMENT, 3);
            len += 3;
            k = gdu_utf8_invalid_len(s + i, n - i);
        } else {
            memcpy(copy + len, s + i, k);
            len += k;
        }
    }
    json_t *j = json_stringn(copy, len);
    free(copy);
    return j;
}

json_t *gdu_json_text(const char *s)
{
    return s != NULL ? gdu_json_textn(s, strlen(s)) : json_null();
}

int gdu_json_set_text(json_t *obj, const char *key, const char *s)
{
    if (json_object_set_new(obj, key, gdu_json_text(s)) != 0)
        return -1;
    if (s == NULL || gdu_utf8_valid(s, strlen(s)))
        return 0;
    size_t klen = strlen(key);
    char *exact_key = malloc(klen + sizeof "_escaped");
    char *exact = gdu_text_escaped(s, strlen(s));
    int rc = -1;
    if (exact_key != NULL && exact != NULL) {
        memcpy(exact_key, key, klen);
        memcpy(exact_key + klen, "_escaped", sizeof "_escaped");
        rc = json_object_set_new(obj, exact_key, json_string(exact));
    }
    free(exact_key);
    free(exact);
    return rc;
}

static json_t *escaped_string(const char *s, size_t n)
{
    char *e = gdu_text_escaped(s, n);
    json_t *j = e != NULL ? json_string(e) : NULL;
    free(e);
    return j;
}

json_t *gdu_json_escaped_copy(const json_t *doc)
{
    switch (json_typeof(doc)) {
    case JSON_STRING:
        return escaped_string(json_string_value(doc), json_string_length(doc));
    case JSON_ARRAY: {
        json_t *a = json_array();
        size_t i;
        const json_t *v;
        json_array_foreach(doc, i, v)
        {
            if (a == NULL || json_array_append_new(a, gdu_json_escaped_copy(v)) != 0) {
                json_decref(a);
                return NULL;
            }
        }
        return a;
    }
    case JSON_OBJECT: {
        json_t *o = json_object();
        const char *key;
        const json_t *v;
        json_object_foreach((json_t *)doc, key, v)
        {
            char *k = gdu_text_escaped(key, strlen(key));
            int rc =
                o != NULL && k != NULL ? json_object_set_new(o, k, gdu_json_escaped_copy(v)) : -1;
            free(k);
            if (rc != 0) {
                json_decref(o);
                return NULL;
            }
        }
        return o;
    }
    default:
        return json_deep_copy(doc);
    }
}
