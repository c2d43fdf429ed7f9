/* Parsing and validation of one safetensors header:
 *   8 bytes little-endian N, N bytes of UTF-8 JSON, then the data section.
 * Every size and offset from the file is checked before use, in 64-bit
 * arithmetic with overflow checks, so hostile headers give a named error. */
#include "safetensors/st_error.h"
#include "safetensors/st_pread.h"
#include "safetensors/st_header_internal.h"
#include "safetensors/st_json.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Names in error messages are cut so that a hostile name cannot flood them. */
#define NAME_FMT "'%.80s'"

static uint64_t load_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* A JSON unsigned integer, as serde reads a usize (not "-0", "1.0", "1e3"). */
static int json_to_u64(const st_json *v, uint64_t *out)
{
    if (v == NULL || v->kind != ST_JSON_NUMBER || !v->is_u64)
        return -1;
    *out = v->u64;
    return 0;
}

static gdu_st_status parse_metadata(gdu_st_header *h, const st_json *meta, gdu_st_error *err)
{
    if (meta->kind == ST_JSON_NULL) /* the reference's Option: null means none */
        return GDU_ST_OK;
    if (meta->kind != ST_JSON_OBJECT)
        return st_fail(err, GDU_ST_ERR_METADATA, "__metadata__ is not a JSON object");
    size_t n = meta->count;
    h->has_metadata = 1;
    h->metadata = calloc(n ? n : 1, sizeof *h->metadata);
    if (h->metadata == NULL)
        return st_fail(err, GDU_ST_ERR_NOMEM, "out of memory for %zu metadata entries", n);
    for (size_t i = 0; i < n; i++) {
        const st_json *key = st_json_key(meta, i), *value = st_json_value(meta, i);
        if (value->kind != ST_JSON_STRING)
            return st_fail(err, GDU_ST_ERR_METADATA,
                           "__metadata__ entry " NAME_FMT " is not a string", key->str);
        h->metadata[i].key = key->str;
        h->metadata[i].key_len = key->len;
        h->metadata[i].value = value->str;
        h->metadata[i].value_len = value->len;
        h->metadata_count++;
    }
    return GDU_ST_OK;
}

/* The dtype's name (a string node): a string, or serde's other form of a
 * unit enum variant, an object {"F32": null}. NULL for anything else. */
static const st_json *dtype_name(const st_json *dtype)
{
    if (dtype == NULL)
        return NULL;
    if (dtype->kind == ST_JSON_STRING)
        return dtype;
    if (dtype->kind == ST_JSON_OBJECT && dtype->count == 1 &&
        st_json_value(dtype, 0)->kind == ST_JSON_NULL)
        return st_json_key(dtype, 0);
    return NULL;
}

/* The entry's three fields, from {dtype, shape, data_offsets} (other fields
 * ignored) or, as serde also reads a struct, a [dtype, shape, data_offsets]
 * list. */
static int entry_fields(const st_json *entry, const st_json **dtype, const st_json **shape,
                        const st_json **offsets)
{
    if (entry->kind == ST_JSON_ARRAY) {
        if (entry->count != 3)
            return -1;
        *dtype = &entry->items[0];
        *shape = &entry->items[1];
        *offsets = &entry->items[2];
        return 0;
    }
    if (entry->kind != ST_JSON_OBJECT)
        return -1;
    *dtype = st_json_get(entry, "dtype");
    *shape = st_json_get(entry, "shape");
    *offsets = st_json_get(entry, "data_offsets");
    return 0;
}

/* Elements of the shape x bits per element, or -1 on overflow. Strict: as
 * the reference, a running product checked at each dimension (so [2^63, 4,
 * 0] overflows before the 0 is reached). Lenient: a zero dimension empties
 * the tensor whatever the others are. */
static int shape_bits(const uint64_t *shape, size_t ndim, unsigned bits_per, unsigned flags,
                      uint64_t *bits)
{
    uint64_t elements = 1;
    int overflow = 0;
    for (size_t d = 0; d < ndim; d++) {
        overflow |= __builtin_mul_overflow(elements, shape[d], &elements);
        if (overflow && !(flags & GDU_ST_LENIENT))
            return -1;
    }
    for (size_t d = 0; (flags & GDU_ST_LENIENT) && d < ndim; d++) {
        if (shape[d] == 0) {
            elements = 0;
            overflow = 0;
        }
    }
    if (overflow || __builtin_mul_overflow(elements, (uint64_t)bits_per, bits))
        return -1;
    return 0;
}

static gdu_st_status parse_tensor(const st_json *key, const st_json *entry, uint64_t data_size,
                                  unsigned flags, gdu_st_tensor_info *t, uint64_t *shape_store,
                                  gdu_st_error *err)
{
    const char *name = key->str;
    const st_json *dtype = NULL, *shape = NULL, *offsets = NULL;
    if (entry_fields(entry, &dtype, &shape, &offsets) != 0)
        return st_fail(err, GDU_ST_ERR_TENSOR_ENTRY, "tensor " NAME_FMT " is not a JSON object",
                       name);
    const st_json *dname = dtype_name(dtype);
    if (dname == NULL || shape == NULL || shape->kind != ST_JSON_ARRAY || offsets == NULL ||
        offsets->kind != ST_JSON_ARRAY)
        return st_fail(err, GDU_ST_ERR_TENSOR_ENTRY,
                       "tensor " NAME_FMT " lacks a string \"dtype\", a list \"shape\" or a "
                       "list \"data_offsets\"",
                       name);
    t->name = name;
    t->name_len = key->len;
    if (strlen(dname->str) != dname->len || gdu_st_dtype_from_name(dname->str, &t->dtype) != 0)
        return st_fail(err, GDU_ST_ERR_DTYPE, "tensor " NAME_FMT ": unknown dtype '%.32s'", name,
                       dname->str);

    size_t ndim = shape->count;
    for (size_t d = 0; d < ndim; d++)
        if (json_to_u64(&shape->items[d], &shape_store[d]) != 0)
            return st_fail(err, GDU_ST_ERR_SHAPE,
                           "tensor " NAME_FMT ": shape entry %zu is not a non-negative integer",
                           name, d);
    t->ndim = (uint32_t)ndim;
    t->shape = shape_store;
    uint64_t bits;
    if (shape_bits(shape_store, ndim, gdu_st_dtype_bits(t->dtype), flags, &bits) != 0)
        return st_fail(err, GDU_ST_ERR_OVERFLOW,
                       "tensor " NAME_FMT ": shape x dtype size overflows 64 bits", name);
    if (bits % 8 != 0)
        return st_fail(err, GDU_ST_ERR_SIZE_MISMATCH,
                       "tensor " NAME_FMT ": %llu bits of %s elements do not fill whole bytes",
                       name, (unsigned long long)bits, gdu_st_dtype_name(t->dtype));

    if (offsets->count != 2 || json_to_u64(&offsets->items[0], &t->begin) != 0 ||
        json_to_u64(&offsets->items[1], &t->end) != 0 || t->begin > t->end)
        return st_fail(err, GDU_ST_ERR_OFFSETS,
                       "tensor " NAME_FMT ": data_offsets is not [begin, end] with "
                       "0 <= begin <= end",
                       name);
    if (t->end - t->begin != bits / 8)
        return st_fail(err, GDU_ST_ERR_SIZE_MISMATCH,
                       "tensor " NAME_FMT ": data_offsets span %llu bytes, shape x dtype "
                       "needs %llu",
                       name, (unsigned long long)(t->end - t->begin),
                       (unsigned long long)(bits / 8));
    if (t->end > data_size)
        return st_fail(err, GDU_ST_ERR_OUT_OF_RANGE,
                       "tensor " NAME_FMT ": bytes [%llu, %llu) pass the end of the data "
                       "section (%llu bytes; file truncated?)",
                       name, (unsigned long long)t->begin, (unsigned long long)t->end,
                       (unsigned long long)data_size);
    return GDU_ST_OK;
}

static int by_offsets(const void *a, const void *b)
{
    const gdu_st_tensor_info *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name);
}

static gdu_st_status overlap(const gdu_st_tensor_info *a, const gdu_st_tensor_info *b,
                             gdu_st_error *err)
{
    return st_fail(err, GDU_ST_ERR_OVERLAP,
                   "tensors " NAME_FMT " [%llu, %llu) and " NAME_FMT " [%llu, %llu) overlap",
                   a->name, (unsigned long long)a->begin, (unsigned long long)a->end, b->name,
                   (unsigned long long)b->begin, (unsigned long long)b->end);
}

/* Strict layout, the reference's: sorted by offsets, every tensor starts
 * where the previous one ended (the first at 0), and the last ends at the
 * end of the file. */
static gdu_st_status check_layout_strict(gdu_st_header *h, gdu_st_error *err)
{
    uint64_t next = 0;
    const gdu_st_tensor_info *last = NULL;
    for (size_t i = 0; i < h->tensor_count; i++) {
        const gdu_st_tensor_info *t = &h->tensors[i];
        if (t->begin > next)
            return st_fail(err, GDU_ST_ERR_HOLE,
                           "tensor " NAME_FMT " starts at byte %llu of the data section but %s "
                           "at %llu: %llu bytes belong to no tensor (the format forbids holes)",
                           t->name, (unsigned long long)t->begin,
                           last ? "the tensor before it ends" : "the data starts",
                           (unsigned long long)next, (unsigned long long)(t->begin - next));
        if (t->begin < next && t->begin == t->end)
            return st_fail(err, GDU_ST_ERR_OFFSETS,
                           "empty tensor " NAME_FMT " sits at byte %llu, inside " NAME_FMT
                           " [%llu, %llu): tensors must follow one another",
                           t->name, (unsigned long long)t->begin, last->name,
                           (unsigned long long)last->begin, (unsigned long long)last->end);
        if (t->begin < next)
            return overlap(last, t, err);
        next = t->end;
        last = t;
    }
    if (next != h->data_size)
        return st_fail(err, GDU_ST_ERR_TRAILING,
                       "%llu bytes after the last tensor's end (byte %llu of the data section) "
                       "belong to no tensor (the format forbids them)",
                       (unsigned long long)(h->data_size - next), (unsigned long long)next);
    h->data_span = next;
    return GDU_ST_OK;
}

/* Sorts by offsets, refuses shared bytes and measures span, holes and tail.
 * Lenient: empty tensors share no bytes, so they may sit anywhere in the
 * span, and holes and trailing bytes are counted. */
static gdu_st_status check_layout(gdu_st_header *h, unsigned flags, gdu_st_error *err)
{
    qsort(h->tensors, h->tensor_count, sizeof *h->tensors, by_offsets);
    if (!(flags & GDU_ST_LENIENT))
        return check_layout_strict(h, err);
    uint64_t covered = 0, span = 0;
    const gdu_st_tensor_info *last = NULL;
    for (size_t i = 0; i < h->tensor_count; i++) {
        const gdu_st_tensor_info *t = &h->tensors[i];
        if (t->begin == t->end)
            continue;
        if (last != NULL && t->begin < last->end)
            return overlap(last, t, err);
        covered += t->end - t->begin;
        last = t;
    }
    for (size_t i = 0; i < h->tensor_count; i++)
        if (h->tensors[i].end > span)
            span = h->tensors[i].end;
    h->data_span = span;
    h->hole_bytes = span - covered;
    h->trailing_bytes = h->data_size - span;
    return GDU_ST_OK;
}

static size_t entry_dims(const st_json *value)
{
    const st_json *dtype = NULL, *shape = NULL, *offsets = NULL;
    if (entry_fields(value, &dtype, &shape, &offsets) != 0 || shape == NULL ||
        shape->kind != ST_JSON_ARRAY)
        return 0;
    return shape->count;
}

static int is_metadata_key(const st_json *key)
{
    return key->len == 12 && memcmp(key->str, "__metadata__", 12) == 0;
}

static gdu_st_status parse_object(gdu_st_header *h, const st_json *root, unsigned flags,
                                  gdu_st_error *err)
{
    size_t tensors = 0, dims = 0;
    for (size_t i = 0; i < root->count; i++) {
        if (is_metadata_key(st_json_key(root, i)))
            continue;
        tensors++;
        dims += entry_dims(st_json_value(root, i));
    }
    h->tensors = calloc(tensors ? tensors : 1, sizeof *h->tensors);
    h->shapes = calloc(dims ? dims : 1, sizeof *h->shapes);
    if (h->tensors == NULL || h->shapes == NULL)
        return st_fail(err, GDU_ST_ERR_NOMEM, "out of memory for %zu tensors", tensors);

    size_t dims_used = 0;
    for (size_t i = 0; i < root->count; i++) {
        const st_json *key = st_json_key(root, i), *value = st_json_value(root, i);
        gdu_st_status s;
        if (is_metadata_key(key)) {
            s = parse_metadata(h, value, err);
        } else {
            gdu_st_tensor_info *t = &h->tensors[h->tensor_count++];
            s = parse_tensor(key, value, h->data_size, flags, t, h->shapes + dims_used, err);
            dims_used += t->ndim;
        }
        if (s != GDU_ST_OK)
            return s;
    }
    return check_layout(h, flags, err);
}

/* The header length field against its bounds; names which one it breaks. */
static gdu_st_status check_length(uint64_t n, uint64_t file_size, gdu_st_error *err)
{
    if (n == 0)
        return st_fail(err, GDU_ST_ERR_HEADER_JSON,
                       "header length 0: the header is empty, not a JSON object (not a "
                       "safetensors file?)");
    if (n > GDU_ST_MAX_HEADER_BYTES)
        return st_fail(err, GDU_ST_ERR_HEADER_LENGTH,
                       "header length %llu is over the limit of %llu bytes (not a safetensors "
                       "file?)",
                       (unsigned long long)n, GDU_ST_MAX_HEADER_BYTES);
    if (n > file_size - 8)
        return st_fail(err, GDU_ST_ERR_HEADER_LENGTH,
                       "header length %llu passes the end of the %llu-byte file (truncated, or "
                       "not a safetensors file?)",
                       (unsigned long long)n, (unsigned long long)file_size);
    return GDU_ST_OK;
}

gdu_st_status gdu_st_header_parse_flags(const void *bytes, size_t len, uint64_t file_size,
                                        unsigned flags, gdu_st_header **out, gdu_st_error *err)
{
    if (out == NULL || (bytes == NULL && len > 0))
        return st_fail(err, GDU_ST_ERR_INVALID_ARGUMENT, "NULL argument");
    *out = NULL;
    if (flags & ~GDU_ST_LENIENT)
        return st_unknown_flags(err, flags);
    if (len > file_size)
        return st_fail(err, GDU_ST_ERR_INVALID_ARGUMENT, "image longer than the file size");
    if (file_size < 8 || len < 8)
        return st_fail(err, GDU_ST_ERR_TOO_SMALL,
                       "%llu bytes: a safetensors file starts with an 8-byte header length",
                       (unsigned long long)file_size);
    uint64_t n = load_le64(bytes);
    gdu_st_status s = check_length(n, file_size, err);
    if (s != GDU_ST_OK)
        return s;
    if (n > len - 8)
        return st_fail(err, GDU_ST_ERR_INVALID_ARGUMENT,
                       "image of %zu bytes holds only part of the %llu-byte header", len,
                       (unsigned long long)n);

    gdu_st_header *h = calloc(1, sizeof *h);
    if (h == NULL)
        return st_fail(err, GDU_ST_ERR_NOMEM, "out of memory");
    h->data_offset = 8 + n;
    h->data_size = file_size - h->data_offset;

    char why[160] = "";
    size_t where = 0;
    h->doc = st_json_parse((const char *)bytes + 8, (size_t)n, why, sizeof why, &where);
    const st_json *root = h->doc ? st_json_root(h->doc) : NULL;
    if (root == NULL)
        s = st_fail(err, GDU_ST_ERR_HEADER_JSON, "header JSON, byte %zu: %s", where, why);
    else if (root->kind != ST_JSON_OBJECT)
        s = st_fail(err, GDU_ST_ERR_HEADER_NOT_OBJECT, "header JSON is not an object");
    else
        s = parse_object(h, root, flags, err);
    if (s == GDU_ST_OK)
        st_json_drop_tree(h->doc); /* names and metadata live on in its strings */
    if (s != GDU_ST_OK) {
        gdu_st_header_free(h);
        return s;
    }
    *out = h;
    return st_ok(err);
}

gdu_st_status gdu_st_header_parse(const void *bytes, size_t len, uint64_t file_size,
                                  gdu_st_header **out, gdu_st_error *err)
{
    return gdu_st_header_parse_flags(bytes, len, file_size, 0, out, err);
}

gdu_st_status gdu_st_header_read_fd(int fd, unsigned flags, gdu_st_header **out, gdu_st_error *err)
{
    if (out == NULL)
        return st_fail(err, GDU_ST_ERR_INVALID_ARGUMENT, "NULL argument");
    *out = NULL;
    if (flags & ~GDU_ST_LENIENT)
        return st_unknown_flags(err, flags);
    struct stat st;
    if (fstat(fd, &st) != 0)
        return st_fail(err, GDU_ST_ERR_IO, "fstat: %s", strerror(errno));
    if (!S_ISREG(st.st_mode))
        return st_fail(err, GDU_ST_ERR_OPEN, "not a regular file");
    uint64_t size = (uint64_t)st.st_size;
    unsigned char prefix[8];
    if (size < 8)
        return gdu_st_header_parse_flags(prefix, 0, size, flags, out, err);
    int rc = st_pread_full(fd, prefix, 8, 0);
    if (rc != 0)
        return st_fail(err, GDU_ST_ERR_IO, "reading the header length: %s", strerror(-rc));
    uint64_t n = load_le64(prefix);
    if (check_length(n, size, NULL) != GDU_ST_OK)
        return gdu_st_header_parse_flags(prefix, 8, size, flags, out, err);
    unsigned char *image = malloc(8 + (size_t)n);
    if (image == NULL)
        return st_fail(err, GDU_ST_ERR_NOMEM, "out of memory for a %llu-byte header",
                       (unsigned long long)n);
    memcpy(image, prefix, 8);
    rc = st_pread_full(fd, image + 8, (size_t)n, 8);
    gdu_st_status s = rc != 0
                          ? st_fail(err, GDU_ST_ERR_IO, "reading the header: %s", strerror(-rc))
                          : gdu_st_header_parse_flags(image, 8 + (size_t)n, size, flags, out, err);
    free(image);
    return s;
}

void gdu_st_header_free(gdu_st_header *h)
{
    if (h == NULL)
        return;
    st_json_free(h->doc);
    free(h->tensors);
    free(h->shapes);
    free(h->metadata);
    free(h);
}

size_t gdu_st_header_tensor_count(const gdu_st_header *h) { return h ? h->tensor_count : 0; }

const gdu_st_tensor_info *gdu_st_header_tensor(const gdu_st_header *h, size_t index)
{
    return h && index < h->tensor_count ? &h->tensors[index] : NULL;
}

uint64_t gdu_st_header_data_offset(const gdu_st_header *h) { return h ? h->data_offset : 0; }
uint64_t gdu_st_header_data_span(const gdu_st_header *h) { return h ? h->data_span : 0; }
uint64_t gdu_st_header_hole_bytes(const gdu_st_header *h) { return h ? h->hole_bytes : 0; }
uint64_t gdu_st_header_trailing_bytes(const gdu_st_header *h) { return h ? h->trailing_bytes : 0; }
size_t gdu_st_header_metadata_count(const gdu_st_header *h) { return h ? h->metadata_count : 0; }

int gdu_st_header_has_metadata(const gdu_st_header *h) { return h ? h->has_metadata : 0; }

int gdu_st_header_metadata(const gdu_st_header *h, size_t index, const char **key, size_t *key_len,
                           const char **value, size_t *value_len)
{
    if (h == NULL || key == NULL || value == NULL || index >= h->metadata_count)
        return -1;
    *key = h->metadata[index].key;
    if (key_len != NULL)
        *key_len = h->metadata[index].key_len;
    *value = h->metadata[index].value;
    if (value_len != NULL)
        *value_len = h->metadata[index].value_len;
    return 0;
}
