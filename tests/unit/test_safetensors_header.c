/* Header parsing and validation on good and hostile in-memory images. */
#include "gdunlock/safetensors.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* An image: 8-byte little-endian length, the JSON, data_len pattern bytes. */
typedef struct {
    unsigned char *bytes;
    size_t len;
} image;

static image make_image_len(const char *json, uint64_t declared, size_t data_len)
{
    size_t n = strlen(json);
    image im = {malloc(8 + n + data_len + 1), 8 + n + data_len};
    assert_non_null(im.bytes);
    for (int i = 0; i < 8; i++)
        im.bytes[i] = (unsigned char)(declared >> (8 * i));
    memcpy(im.bytes + 8, json, n);
    for (size_t i = 0; i < data_len; i++)
        im.bytes[8 + n + i] = (unsigned char)(i * 7 + 1);
    return im;
}

static image make_image(const char *json, size_t data_len)
{
    return make_image_len(json, strlen(json), data_len);
}

/* Parses json + data_len bytes and returns the status; *out gets the header. */
static gdu_st_status parse_flags(const char *json, size_t data_len, unsigned flags,
                                 gdu_st_header **out, gdu_st_error *err)
{
    image im = make_image(json, data_len);
    gdu_st_status s = gdu_st_header_parse_flags(im.bytes, im.len, im.len, flags, out, err);
    free(im.bytes);
    return s;
}

static gdu_st_status parse(const char *json, size_t data_len, gdu_st_header **out,
                           gdu_st_error *err)
{
    return parse_flags(json, data_len, 0, out, err);
}

static void expect_status_flags(const char *json, size_t data_len, unsigned flags,
                                gdu_st_status want)
{
    gdu_st_header *h = (gdu_st_header *)0x1;
    gdu_st_error err = {0};
    gdu_st_status s = parse_flags(json, data_len, flags, &h, &err);
    if (s != want)
        fail_msg("%s: got %s (%s), want %s", json, gdu_st_status_name(s), err.message,
                 gdu_st_status_name(want));
    assert_int_equal(err.code, want);
    if (want != GDU_ST_OK) {
        assert_null(h);
        assert_true(strlen(err.message) > 0);
    }
    gdu_st_header_free(h);
}

static void expect_status(const char *json, size_t data_len, gdu_st_status want)
{
    expect_status_flags(json, data_len, 0, want);
}

/* Strict refuses with want; lenient accepts. */
static void expect_lenient_only(const char *json, size_t data_len, gdu_st_status want)
{
    expect_status_flags(json, data_len, 0, want);
    expect_status_flags(json, data_len, GDU_ST_LENIENT, GDU_ST_OK);
}

static void test_good_file(void **state)
{
    const char *json = "{\"__metadata__\":{\"format\":\"pt\",\"note\":\"\\u00e9t\\u00e9\"},"
                       "\"b\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[16,22]},"
                       "\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
                       "\"s\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[24,32]},"
                       "\"e\":{\"dtype\":\"BF16\",\"shape\":[0,5],\"data_offsets\":[22,22]}}   ";
    gdu_st_header *h = NULL;
    gdu_st_error err;
    assert_int_equal(parse(json, 32, &h, &err), GDU_ST_ERR_HOLE); /* [22, 24) */
    assert_non_null(strstr(err.message, "'s' starts at byte 24"));
    assert_int_equal(parse_flags(json, 32, GDU_ST_LENIENT, &h, &err), GDU_ST_OK);
    assert_int_equal(gdu_st_header_tensor_count(h), 4);
    const char *order[] = {"a", "b", "e", "s"};
    for (size_t i = 0; i < 4; i++)
        assert_string_equal(gdu_st_header_tensor(h, i)->name, order[i]);
    const gdu_st_tensor_info *a = gdu_st_header_tensor(h, 0);
    assert_int_equal(a->dtype, GDU_ST_F32);
    assert_int_equal(a->ndim, 2);
    assert_int_equal(a->shape[0], 2);
    assert_int_equal(a->shape[1], 2);
    const gdu_st_tensor_info *s = gdu_st_header_tensor(h, 3);
    assert_int_equal(s->ndim, 0);
    assert_int_equal(s->begin, 24);
    assert_int_equal(gdu_st_header_data_offset(h), 8 + strlen(json));
    assert_int_equal(gdu_st_header_data_span(h), 32);
    assert_int_equal(gdu_st_header_hole_bytes(h), 2); /* [22, 24) */
    assert_int_equal(gdu_st_header_trailing_bytes(h), 0);
    assert_int_equal(gdu_st_header_metadata_count(h), 2);
    const char *key, *value;
    size_t value_len = 0;
    assert_int_equal(gdu_st_header_metadata(h, 1, &key, NULL, &value, &value_len), 0);
    assert_string_equal(key, "note");
    assert_string_equal(value, "\xc3\xa9t\xc3\xa9");
    assert_int_equal(value_len, 5);
    assert_int_equal(gdu_st_header_metadata(h, 2, &key, NULL, &value, NULL), -1);
    assert_true(gdu_st_header_has_metadata(h));
    assert_null(gdu_st_header_tensor(h, 4));
    gdu_st_header_free(h);
}

static void test_zero_tensors_and_trailing(void **state)
{
    gdu_st_header *h = NULL;
    assert_int_equal(parse("{}", 0, &h, NULL), GDU_ST_OK);
    assert_int_equal(gdu_st_header_tensor_count(h), 0);
    assert_int_equal(gdu_st_header_data_span(h), 0);
    gdu_st_header_free(h);
    assert_int_equal(parse("{\"__metadata__\":{}}", 5, &h, NULL), GDU_ST_ERR_TRAILING);
    assert_int_equal(parse_flags("{\"__metadata__\":{}}", 5, GDU_ST_LENIENT, &h, NULL), GDU_ST_OK);
    assert_int_equal(gdu_st_header_trailing_bytes(h), 5);
    gdu_st_header_free(h);
}

static void test_every_dtype(void **state)
{
    for (unsigned d = 0; d < GDU_ST_DTYPE_COUNT; d++) {
        const char *name = gdu_st_dtype_name((gdu_st_dtype)d);
        unsigned bits = gdu_st_dtype_bits((gdu_st_dtype)d);
        gdu_st_dtype back;
        assert_int_equal(gdu_st_dtype_from_name(name, &back), 0);
        assert_int_equal(back, d);
        /* 8 elements fill whole bytes for every width. */
        char json[160];
        snprintf(json, sizeof json,
                 "{\"t\":{\"dtype\":\"%s\",\"shape\":[2,4],"
                 "\"data_offsets\":[0,%u]}}",
                 name, bits);
        expect_status(json, bits, GDU_ST_OK);
    }
    assert_null(gdu_st_dtype_name(GDU_ST_DTYPE_COUNT));
    assert_int_equal(gdu_st_dtype_bits(GDU_ST_DTYPE_COUNT), 0);
    gdu_st_dtype d;
    assert_int_equal(gdu_st_dtype_from_name("f32", &d), -1);
    assert_int_equal(gdu_st_dtype_from_name(NULL, &d), -1);
}

static void test_unicode_names(void **state)
{
    gdu_st_header *h = NULL;
    const char *json = "{\"\xe6\xa8\xa1\xe5\x9e\x8b.\xf0\x9f\x98\x80\":{\"dtype\":\"U8\","
                       "\"shape\":[4],\"data_offsets\":[0,4]},"
                       "\"\\u03b1\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}";
    assert_int_equal(parse(json, 8, &h, NULL), GDU_ST_OK);
    assert_string_equal(gdu_st_header_tensor(h, 0)->name,
                        "\xe6\xa8\xa1\xe5\x9e\x8b.\xf0\x9f\x98\x80");
    assert_string_equal(gdu_st_header_tensor(h, 1)->name, "\xce\xb1");
    gdu_st_header_free(h);
}

static void test_length_field(void **state)
{
    gdu_st_header *h;
    gdu_st_error err;
    unsigned char empty[1] = {0};
    assert_int_equal(gdu_st_header_parse(empty, 0, 0, &h, &err), GDU_ST_ERR_TOO_SMALL);
    assert_null(h);
    assert_int_equal(gdu_st_header_parse("\x02\0\0\0", 4, 4, &h, &err), GDU_ST_ERR_TOO_SMALL);

    const char *json = "{}";
    /* Each bound has its own message, naming the one broken. */
    struct {
        uint64_t n;
        const char *says;
    } bad[] = {
        {3, "passes the end of the 10-byte file"},
        {1000, "passes the end"},
        {GDU_ST_MAX_HEADER_BYTES + 1, "over the limit of 100000000 bytes"},
        {UINT64_MAX, "over the limit"},
        {UINT64_MAX - 7, "over the limit"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        image im = make_image_len(json, bad[i].n, 0);
        assert_int_equal(gdu_st_header_parse(im.bytes, im.len, im.len, &h, &err),
                         GDU_ST_ERR_HEADER_LENGTH);
        if (strstr(err.message, bad[i].says) == NULL)
            fail_msg("length %llu: '%s' lacks '%s'", (unsigned long long)bad[i].n, err.message,
                     bad[i].says);
        assert_null(strstr(err.message, "is 0, over"));
        free(im.bytes);
    }
    /* Length 0: an empty header, which the reference's JSON parser refuses. */
    image im = make_image_len(json, 0, 0);
    assert_int_equal(gdu_st_header_parse(im.bytes, im.len, im.len, &h, &err),
                     GDU_ST_ERR_HEADER_JSON);
    assert_non_null(strstr(err.message, "header length 0"));
    free(im.bytes);
    /* Shorter than declared: the JSON is cut, the rest is data, which no
     * tensor covers (trailing: strict refuses, lenient reads). */
    im = make_image_len("{} ", 2, 1);
    assert_int_equal(gdu_st_header_parse(im.bytes, im.len, im.len, &h, &err), GDU_ST_ERR_TRAILING);
    assert_int_equal(gdu_st_header_parse_flags(im.bytes, im.len, im.len, GDU_ST_LENIENT, &h, &err),
                     GDU_ST_OK);
    gdu_st_header_free(h);
    free(im.bytes);
    /* An image holding only part of the header. */
    im = make_image("{}    ", 0);
    assert_int_equal(gdu_st_header_parse(im.bytes, 9, im.len, &h, &err),
                     GDU_ST_ERR_INVALID_ARGUMENT);
    assert_int_equal(gdu_st_header_parse(im.bytes, im.len, im.len - 1, &h, &err),
                     GDU_ST_ERR_INVALID_ARGUMENT);
    assert_int_equal(gdu_st_header_parse(NULL, 8, 8, &h, &err), GDU_ST_ERR_INVALID_ARGUMENT);
    free(im.bytes);
}

static void test_bad_json(void **state)
{
    expect_status("{", 0, GDU_ST_ERR_HEADER_JSON);
    expect_status("{\"a\":1,}", 0, GDU_ST_ERR_HEADER_JSON);
    expect_status("{} x", 0, GDU_ST_ERR_HEADER_JSON);
    expect_status("{\"\xff\xfe\":{}}", 0, GDU_ST_ERR_HEADER_JSON);   /* not UTF-8 */
    expect_status("{\"a\\u0000b\":{}}", 0, GDU_ST_ERR_TENSOR_ENTRY); /* NUL in a name: a name */
    expect_status("[1,2]", 0, GDU_ST_ERR_HEADER_NOT_OBJECT);
    expect_status("\"str\"", 0, GDU_ST_ERR_HEADER_NOT_OBJECT);
    expect_status("{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                  "\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
                  2, GDU_ST_ERR_HEADER_JSON); /* duplicate name */
    /* Deep nesting is refused by the parser, not by a stack overflow. */
    char deep[20000];
    memset(deep, '[', sizeof deep - 1);
    deep[sizeof deep - 1] = '\0';
    expect_status(deep, 0, GDU_ST_ERR_HEADER_JSON);
}

static void test_bad_entries(void **state)
{
    expect_status("{\"t\":5}", 0, GDU_ST_ERR_TENSOR_ENTRY);
    expect_status("{\"t\":{\"shape\":[1],\"data_offsets\":[0,1]}}", 1, GDU_ST_ERR_TENSOR_ENTRY);
    expect_status("{\"t\":{\"dtype\":\"U8\",\"shape\":3,\"data_offsets\":[0,3]}}", 3,
                  GDU_ST_ERR_TENSOR_ENTRY);
    expect_status("{\"t\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
                  GDU_ST_ERR_TENSOR_ENTRY);
    expect_status("{\"t\":{\"dtype\":\"F31\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
                  GDU_ST_ERR_DTYPE);
    expect_status("{\"t\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,1]}}", 1,
                  GDU_ST_ERR_SHAPE);
    expect_status("{\"t\":{\"dtype\":\"U8\",\"shape\":[1.0],\"data_offsets\":[0,1]}}", 1,
                  GDU_ST_ERR_SHAPE);
    expect_status("{\"t\":{\"dtype\":\"U8\",\"shape\":[\"1\"],\"data_offsets\":[0,1]}}", 1,
                  GDU_ST_ERR_SHAPE);
    /* Any number of dimensions, as the reference (no bound of its own). */
    char many[1200] = "{\"t\":{\"dtype\":\"U8\",\"shape\":[1";
    for (int i = 0; i < 500; i++)
        strcat(many, ",1");
    strcat(many, "],\"data_offsets\":[0,1]}}");
    expect_status(many, 1, GDU_ST_OK);
    expect_status("{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0]}}", 1,
                  GDU_ST_ERR_OFFSETS);
    expect_status("{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[2,1]}}", 2,
                  GDU_ST_ERR_OFFSETS);
    expect_status("{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,-1]}}", 2,
                  GDU_ST_ERR_OFFSETS);
    expect_status("{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1,2]}}", 2,
                  GDU_ST_ERR_OFFSETS);
    expect_status("{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":\"0,1\"}}", 2,
                  GDU_ST_ERR_TENSOR_ENTRY);
}

static void test_sizes(void **state)
{
    expect_status("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 8,
                  GDU_ST_ERR_SIZE_MISMATCH);
    expect_status("{\"t\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", 2,
                  GDU_ST_ERR_SIZE_MISMATCH); /* 12 bits */
    expect_status("{\"t\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296],"
                  "\"data_offsets\":[0,8]}}",
                  8, GDU_ST_ERR_OVERFLOW);
    expect_status("{\"t\":{\"dtype\":\"F64\",\"shape\":[2305843009213693952],"
                  "\"data_offsets\":[0,0]}}",
                  8, GDU_ST_ERR_OVERFLOW); /* x 64 bits */
    expect_status("{\"t\":{\"dtype\":\"F64\",\"shape\":[9223372036854775807,2],"
                  "\"data_offsets\":[0,0]}}",
                  8, GDU_ST_ERR_OVERFLOW);
    /* The reference multiplies dimension by dimension and fails at the
     * first overflow, even when a later dimension is 0; lenient empties the
     * tensor at any zero dimension. A leading 0 empties it in both. */
    expect_lenient_only("{\"t\":{\"dtype\":\"F64\",\"shape\":[9223372036854775807,4,0],"
                        "\"data_offsets\":[0,0]}}",
                        0, GDU_ST_ERR_OVERFLOW);
    expect_status("{\"t\":{\"dtype\":\"F64\",\"shape\":[0,9223372036854775807,4],"
                  "\"data_offsets\":[0,0]}}",
                  0, GDU_ST_OK);
    /* Offsets up to 2^64-1 are integers (then past the file); one more is a
     * float to serde, no offset. */
    expect_status("{\"t\":{\"dtype\":\"U8\",\"shape\":[0],"
                  "\"data_offsets\":[18446744073709551615,18446744073709551615]}}",
                  0, GDU_ST_ERR_OUT_OF_RANGE);
    expect_status("{\"t\":{\"dtype\":\"U8\",\"shape\":[1],"
                  "\"data_offsets\":[18446744073709551615,18446744073709551616]}}",
                  0, GDU_ST_ERR_OFFSETS);
}

static void test_ranges(void **state)
{
    expect_status("{\"t\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 3,
                  GDU_ST_ERR_OUT_OF_RANGE);
    expect_status_flags("{\"t\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[9,9]}}", 8,
                        GDU_ST_LENIENT, GDU_ST_ERR_OUT_OF_RANGE);
    expect_status("{\"t\":{\"dtype\":\"U8\",\"shape\":[4],"
                  "\"data_offsets\":[9223372036854775800,9223372036854775804]}}",
                  8, GDU_ST_ERR_OUT_OF_RANGE);
    expect_status("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                  "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[3,7]}}",
                  8, GDU_ST_ERR_OVERLAP);
    expect_status("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                  "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}",
                  8, GDU_ST_ERR_OVERLAP);
    /* One tensor inside another. */
    expect_status("{\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]},"
                  "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[2,4]}}",
                  8, GDU_ST_ERR_OVERLAP);
    /* Empty tensors share no bytes, but the reference wants them in order:
     * inside another's range only lenient reads them. */
    expect_lenient_only("{\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]},"
                        "\"b\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[2,2]}}",
                        8, GDU_ST_ERR_OFFSETS);
}

static void test_metadata(void **state)
{
    expect_status("{\"__metadata__\":{\"a\":1}}", 0, GDU_ST_ERR_METADATA);
    expect_status("{\"__metadata__\":{\"a\":null}}", 0, GDU_ST_ERR_METADATA);
    expect_status("{\"__metadata__\":{\"a\":{\"b\":\"c\"}}}", 0, GDU_ST_ERR_METADATA);
    expect_status("{\"__metadata__\":[\"a\"]}", 0, GDU_ST_ERR_METADATA);
    expect_status("{\"__metadata__\":\"x\"}", 0, GDU_ST_ERR_METADATA);
    /* The reference's Option: null is no metadata. */
    gdu_st_header *h = NULL;
    assert_int_equal(parse("{\"__metadata__\":null}", 0, &h, NULL), GDU_ST_OK);
    assert_false(gdu_st_header_has_metadata(h));
    assert_int_equal(gdu_st_header_metadata_count(h), 0);
    gdu_st_header_free(h);
    /* Values may hold NUL (serde_json reads \u0000); the length says so. */
    assert_int_equal(parse("{\"__metadata__\":{\"k\":\"a\\u0000b\"}}", 0, &h, NULL), GDU_ST_OK);
    const char *key, *value;
    size_t len = 0;
    assert_int_equal(gdu_st_header_metadata(h, 0, &key, NULL, &value, &len), 0);
    assert_int_equal(len, 3);
    assert_memory_equal(value, "a\0b", 3);
    gdu_st_header_free(h);
}

/* The reference crate's own cases (safetensors/src/tensor.rs tests), as
 * byte images: each accepted or refused as it is there. */
static void test_reference_cases(void **state)
{
    /* Scalar: shape [] is one element. */
    expect_status("{\"test\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[0,4]}}", 4,
                  GDU_ST_OK);
    expect_status("{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}", 16,
                  GDU_ST_OK);
    /* Extra bytes after the data (polyglot files), and 2 bytes missing. */
    expect_status("{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}", 16 + 34,
                  GDU_ST_ERR_TRAILING);
    expect_status("{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}", 14,
                  GDU_ST_ERR_OUT_OF_RANGE);
    /* Ten tensors all at [0, 16): invalid offsets. */
    char attack[1024] = "{";
    for (int i = 0; i < 10; i++)
        snprintf(attack + strlen(attack), sizeof attack - strlen(attack),
                 "%s\"weight_%d\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}",
                 i ? "," : "", i);
    strcat(attack, "}");
    expect_status(attack, 16, GDU_ST_ERR_OVERLAP);
    /* Whitespace before and after the object, any of the four JSON ones. */
    image im = make_image("\t\n{}\r ", 0);
    gdu_st_header *h = NULL;
    assert_int_equal(gdu_st_header_parse(im.bytes, im.len, im.len, &h, NULL), GDU_ST_OK);
    gdu_st_header_free(h);
    free(im.bytes);
    im = make_image("{}\r \t\n", 0);
    assert_int_equal(gdu_st_header_parse(im.bytes, im.len, im.len, &h, NULL), GDU_ST_OK);
    gdu_st_header_free(h);
    free(im.bytes);
    /* NUL padding is not whitespace. */
    im = make_image("{}  ", 0);
    memset(im.bytes + 10, 0, 2);
    assert_int_equal(gdu_st_header_parse(im.bytes, 12, 12, &h, NULL), GDU_ST_ERR_HEADER_JSON);
    free(im.bytes);
    static const struct {
        const char *json;
        size_t data;
        gdu_st_status want;
    } cases[] = {
        {"{", 0, GDU_ST_ERR_HEADER_JSON},
        {"\xff", 0, GDU_ST_ERR_HEADER_JSON},
        /* An empty tensor: [2, 0] at [0, 0]. */
        {"{\"test\":{\"dtype\":\"I32\",\"shape\":[2,0],\"data_offsets\":[0, 0]}}", 0, GDU_ST_OK},
        {"{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0, 4]}}", 4,
         GDU_ST_ERR_SIZE_MISMATCH},
        {"{\"test\":{\"dtype\":\"I32\",\"shape\":[2,9223372036854775807],"
         "\"data_offsets\":[0,16]}}",
         16, GDU_ST_ERR_OVERFLOW},
        {"{\"test\":{\"dtype\":\"I32\",\"shape\":[2,18446744073709551614],"
         "\"data_offsets\":[0,16]}}",
         16, GDU_ST_ERR_OVERFLOW},
        /* Sub-byte dtypes must fill whole bytes. */
        {"{\"t\":{\"dtype\":\"F4\",\"shape\":[1,3],\"data_offsets\":[0,2]}}", 2,
         GDU_ST_ERR_SIZE_MISMATCH},
        {"{\"t\":{\"dtype\":\"F4\",\"shape\":[1,2],\"data_offsets\":[0,1]}}", 1, GDU_ST_OK},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_status(cases[i].json, cases[i].data, cases[i].want);
}

/* What serde's derived deserializers also take, and the layout rules. */
static void test_reference_layout_and_forms(void **state)
{
    /* Data must start at byte 0, with no holes and no trailing bytes. */
    expect_lenient_only("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}", 8,
                        GDU_ST_ERR_HOLE);
    expect_lenient_only("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                        "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[8,12]}}",
                        12, GDU_ST_ERR_HOLE);
    expect_lenient_only("{}", 3, GDU_ST_ERR_TRAILING);
    /* Empty tensors in order (at a boundary) are fine, also several there. */
    expect_status("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                  "\"e\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4,4]},"
                  "\"f\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[4,4]},"
                  "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[4,6]}}",
                  6, GDU_ST_OK);
    /* A struct from a list of its fields; a unit variant as {"NAME": null}. */
    expect_status("{\"t\":[\"U8\",[2],[0,2]]}", 2, GDU_ST_OK);
    expect_status("{\"t\":[\"U8\",[2]]}", 2, GDU_ST_ERR_TENSOR_ENTRY);
    expect_status("{\"t\":[\"U8\",[2],[0,2],1]}", 2, GDU_ST_ERR_TENSOR_ENTRY);
    expect_status("{\"t\":{\"dtype\":{\"U8\":null},\"shape\":[2],\"data_offsets\":[0,2]}}", 2,
                  GDU_ST_OK);
    expect_status("{\"t\":{\"dtype\":{\"U8\":1},\"shape\":[2],\"data_offsets\":[0,2]}}", 2,
                  GDU_ST_ERR_TENSOR_ENTRY);
    /* Unknown fields in an entry are ignored. */
    expect_status("{\"t\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2],"
                  "\"extra\":{\"x\":[1,2.5,null]}}}",
                  2, GDU_ST_OK);
    /* Names: empty, spaces, "__metadata__"-like, any UTF-8. */
    expect_status("{\"\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                  "\" x \":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]},"
                  "\"__metadata\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[2,3]}}",
                  3, GDU_ST_OK);
    /* The specification's rule on duplicates (the crate keeps the last). */
    expect_status("{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}}", 0, GDU_ST_ERR_HEADER_JSON);
    /* Nesting: serde_json's limit of 127 levels, here in an ignored field. */
    char deep[1024];
    int levels = 127 - 2; /* the header object and the entry are two */
    snprintf(deep, sizeof deep,
             "{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],"
             "\"x\":");
    for (int i = 0; i < levels; i++)
        strcat(deep, "[");
    for (int i = 0; i < levels; i++)
        strcat(deep, "]");
    strcat(deep, "}}");
    expect_status(deep, 1, GDU_ST_OK);
    char deeper[1024];
    snprintf(deeper, sizeof deeper,
             "{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],"
             "\"x\":[%s]}}",
             strstr(deep, "\"x\":") + 4);
    deeper[strlen(deeper) - 4] = '\0'; /* drop the copied closing braces */
    strcat(deeper, "]}}");
    expect_status(deeper, 1, GDU_ST_ERR_HEADER_JSON);
}

/* serde_json's reading of the JSON itself: numbers, strings, nesting. */
static void test_serde_json_reading(void **state)
{
    static const struct {
        const char *json;
        size_t data;
        gdu_st_status want;
    } cases[] = {
        /* A leading 0 swallows 2^64: [0, 2^64-1] is empty, the running product never overflows. */
        {"{\"t\":{\"dtype\":\"U8\",\"shape\":[0,18446744073709551615],\"data_offsets\":[0,0]}}", 0,
         GDU_ST_OK},
        /* "-0", "1.0", "1e0" are floats: no dimension, no offset. */
        {"{\"t\":{\"dtype\":\"U8\",\"shape\":[-0],\"data_offsets\":[0,0]}}", 0, GDU_ST_ERR_SHAPE},
        {"{\"t\":{\"dtype\":\"U8\",\"shape\":[1.0],\"data_offsets\":[0,1]}}", 1, GDU_ST_ERR_SHAPE},
        {"{\"t\":{\"dtype\":\"U8\",\"shape\":[1e0],\"data_offsets\":[0,1]}}", 1, GDU_ST_ERR_SHAPE},
        {"{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[-0,1]}}", 1, GDU_ST_ERR_OFFSETS},
        /* In an ignored field any number is fine, but not one past a double. */
        {"{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":[-0,1e-400,-5]}}", 1,
         GDU_ST_OK},
        {"{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":1e400}}", 1,
         GDU_ST_ERR_HEADER_JSON},
        {"{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":-1e309}}", 1,
         GDU_ST_ERR_HEADER_JSON},
        {"{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":01}}", 1,
         GDU_ST_ERR_HEADER_JSON},
        {"{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":1.}}", 1,
         GDU_ST_ERR_HEADER_JSON},
        {"{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":+1}}", 1,
         GDU_ST_ERR_HEADER_JSON},
        /* Strings: escapes decoded, surrogate pairs joined, lone ones refused. */
        {"{\"\\ud83d\\ude00\\n\\/\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
         GDU_ST_OK},
        {"{\"\\ud83d\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
         GDU_ST_ERR_HEADER_JSON},
        {"{\"\\ude00\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
         GDU_ST_ERR_HEADER_JSON},
        {"{\"a\tb\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
         GDU_ST_ERR_HEADER_JSON}, /* a raw control character */
        {"{\"\\x\":{}}", 0, GDU_ST_ERR_HEADER_JSON},
        /* A dtype holding NUL is no dtype; a name may hold one. */
        {"{\"t\":{\"dtype\":\"U8\\u0000\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
         GDU_ST_ERR_DTYPE},
        {"{\"\\u0000\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, GDU_ST_OK},
        /* Duplicates found by their bytes, NUL included. */
        {"{\"a\\u0000\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
         "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
         2, GDU_ST_OK},
        {"{\"t\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
         GDU_ST_ERR_HEADER_JSON},
        /* Literals and structure. */
        {"{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":[true,false,null]}}",
         1, GDU_ST_OK},
        {"{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":tru}}", 1,
         GDU_ST_ERR_HEADER_JSON},
        {"{\"t\":1,}", 0, GDU_ST_ERR_HEADER_JSON},
        {"{,}", 0, GDU_ST_ERR_HEADER_JSON},
        {"{} {}", 0, GDU_ST_ERR_HEADER_JSON},
        {"\xef\xbb\xbf{}", 0, GDU_ST_ERR_HEADER_JSON}, /* a byte-order mark is no whitespace */
        {"{\"\xed\xa0\x80\":1}", 0, GDU_ST_ERR_HEADER_JSON}, /* a surrogate in UTF-8 */
        {"{\"\xc0\xaf\":1}", 0, GDU_ST_ERR_HEADER_JSON},     /* an overlong form */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_status(cases[i].json, cases[i].data, cases[i].want);
    /* A name with NUL keeps its length. */
    gdu_st_header *h = NULL;
    assert_int_equal(
        parse("{\"a\\u0000b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, &h,
              NULL),
        GDU_ST_OK);
    const gdu_st_tensor_info *t = gdu_st_header_tensor(h, 0);
    assert_int_equal(t->name_len, 3);
    assert_memory_equal(t->name, "a\0b", 3);
    gdu_st_header_free(h);
}

static void test_status_names(void **state)
{
    assert_string_equal(gdu_st_status_name(GDU_ST_OK), "GDU_ST_OK");
    assert_string_equal(gdu_st_status_name(GDU_ST_ERR_OVERLAP), "GDU_ST_ERR_OVERLAP");
    for (int s = 0; s < GDU_ST_STATUS_COUNT; s++)
        assert_string_not_equal(gdu_st_status_name((gdu_st_status)s), "unknown");
    assert_string_equal(gdu_st_status_name(GDU_ST_STATUS_COUNT), "unknown");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_file),
        cmocka_unit_test(test_zero_tensors_and_trailing),
        cmocka_unit_test(test_every_dtype),
        cmocka_unit_test(test_unicode_names),
        cmocka_unit_test(test_length_field),
        cmocka_unit_test(test_bad_json),
        cmocka_unit_test(test_bad_entries),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_ranges),
        cmocka_unit_test(test_metadata),
        cmocka_unit_test(test_status_names),
        cmocka_unit_test(test_reference_cases),
        cmocka_unit_test(test_reference_layout_and_forms),
        cmocka_unit_test(test_serde_json_reading),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
