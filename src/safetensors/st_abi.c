/* The layout of every struct the Python module mirrors with ctypes, and the
 * constants it passes, as the compiler laid them out: the module checks its
 * mirror against this field by field when it loads the library, so a field
 * added, moved or resized on either side is an error, not a misread. */
#include "gdunlock/io.h"
#include "gdunlock/safetensors.h"
#include "util/jsonw.h"

#include <pthread.h>
#include <stddef.h>

typedef struct {
    const char *name;
    size_t offset, size;
} abi_field;

#define FIELD(type, f)                                                                             \
    {                                                                                              \
#f, offsetof(type, f), sizeof(((type *)0)->f)                                              \
    }

static const abi_field st_error_fields[] = {FIELD(gdu_st_error, code),
                                            FIELD(gdu_st_error, message)};
static const abi_field st_tensor_fields[] = {
    FIELD(gdu_st_tensor, name),       FIELD(gdu_st_tensor, name_len), FIELD(gdu_st_tensor, dtype),
    FIELD(gdu_st_tensor, ndim),       FIELD(gdu_st_tensor, shape),    FIELD(gdu_st_tensor, nbytes),
    FIELD(gdu_st_tensor, address),    FIELD(gdu_st_tensor, device),   FIELD(gdu_st_tensor, file),
    FIELD(gdu_st_tensor, file_offset)};
static const abi_field st_load_options_fields[] = {
    FIELD(gdu_st_load_options, target), FIELD(gdu_st_load_options, gpus),
    FIELD(gdu_st_load_options, gpu_count), FIELD(gdu_st_load_options, progress),
    FIELD(gdu_st_load_options, progress_ctx)};
static const abi_field st_load_stats_fields[] = {
    FIELD(gdu_st_load_stats, files),           FIELD(gdu_st_load_stats, tensors),
    FIELD(gdu_st_load_stats, tensor_bytes),    FIELD(gdu_st_load_stats, read_bytes),
    FIELD(gdu_st_load_stats, seconds),         FIELD(gdu_st_load_stats, backend),
    FIELD(gdu_st_load_stats, reason),          FIELD(gdu_st_load_stats, memory),
    FIELD(gdu_st_load_stats, alloc_seconds),   FIELD(gdu_st_load_stats, engine_seconds),
    FIELD(gdu_st_load_stats, transfer_seconds)};
static const abi_field io_extent_fields[] = {
    FIELD(gdu_io_extent, offset), FIELD(gdu_io_extent, length), FIELD(gdu_io_extent, mem),
    FIELD(gdu_io_extent, done), FIELD(gdu_io_extent, status)};
static const abi_field io_options_fields[] = {
    FIELD(gdu_io_options, backend),    FIELD(gdu_io_options, direct),
    FIELD(gdu_io_options, device),     FIELD(gdu_io_options, workers),
    FIELD(gdu_io_options, chunk_size), FIELD(gdu_io_options, staging_per_worker)};

#define STRUCT(type, fields)                                                                       \
    {                                                                                              \
#type, sizeof(type), fields, sizeof fields / sizeof fields[0]                              \
    }

static const struct {
    const char *name;
    size_t size;
    const abi_field *fields;
    size_t n;
} structs[] = {
    STRUCT(gdu_st_error, st_error_fields),
    STRUCT(gdu_st_tensor, st_tensor_fields),
    STRUCT(gdu_st_load_options, st_load_options_fields),
    STRUCT(gdu_st_load_stats, st_load_stats_fields),
    STRUCT(gdu_io_extent, io_extent_fields),
    STRUCT(gdu_io_options, io_options_fields),
};

#define CONSTANT(c)                                                                                \
    {                                                                                              \
#c, (long long)(c)                                                                         \
    }

static const struct {
    const char *name;
    long long value;
} constants[] = {
    CONSTANT(GDU_ST_TARGET_GPU),   CONSTANT(GDU_ST_TARGET_HOST), CONSTANT(GDU_ST_LENIENT),
    CONSTANT(GDU_IO_BACKEND_HOST), CONSTANT(GDU_IO_READ),        CONSTANT(GDU_IO_OP_READ),
    CONSTANT(GDU_ST_FOLDER),
};

static char *layout;

static void build(void)
{
    gdu_jsonw w;
    gdu_jsonw_init(&w);
    gdu_jsonw_object_begin(&w, NULL);
    gdu_jsonw_object_begin(&w, "structs");
    for (size_t i = 0; i < sizeof structs / sizeof structs[0]; i++) {
        gdu_jsonw_object_begin(&w, structs[i].name);
        gdu_jsonw_uint(&w, "size", structs[i].size);
        gdu_jsonw_array_begin(&w, "fields");
        for (size_t j = 0; j < structs[i].n; j++) {
            gdu_jsonw_array_begin(&w, NULL);
            gdu_jsonw_string(&w, NULL, structs[i].fields[j].name);
            gdu_jsonw_uint(&w, NULL, structs[i].fields[j].offset);
            gdu_jsonw_uint(&w, NULL, structs[i].fields[j].size);
            gdu_jsonw_array_end(&w);
        }
        gdu_jsonw_array_end(&w);
        gdu_jsonw_object_end(&w);
    }
    gdu_jsonw_object_end(&w);
    gdu_jsonw_object_begin(&w, "constants");
    for (size_t i = 0; i < sizeof constants / sizeof constants[0]; i++)
        gdu_jsonw_int(&w, constants[i].name, constants[i].value);
    gdu_jsonw_object_end(&w);
    gdu_jsonw_array_begin(&w, "statuses");
    for (int s = 0; s < GDU_ST_STATUS_COUNT; s++)
        gdu_jsonw_string(&w, NULL, gdu_st_status_name((gdu_st_status)s));
    gdu_jsonw_array_end(&w);
    gdu_jsonw_object_end(&w);
    layout = gdu_jsonw_finish(&w);
}

/* {"structs": {NAME: {"size": N, "fields": [[FIELD, OFFSET, SIZE], ...]}},
 *  "constants": {NAME: VALUE}, "statuses": [NAME by value]}, or NULL when
 * memory ran out. Built once, kept for the process. */
const char *gdu_st_abi_layout(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, build);
    return layout;
}
