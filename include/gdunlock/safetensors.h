/* gdunlock safetensors loader: parses and validates safetensors headers
 * (single files and sharded checkpoints with model.safetensors.index.json),
 * loads the tensor data into GPU (or host) memory through the gdunlock I/O
 * engine and returns a table of tensors.
 *
 * Memory layout: each file's data section lives in a few allocations
 * ("segments") of whole tensors, at least 256 MiB each, freed together when
 * the last tensor of the file dies. A segment's address is congruent to its
 * first byte's data-section offset modulo 256, so every tensor keeps the
 * alignment it has in the file (the safetensors writer orders tensors by
 * descending dtype size, which keeps each one aligned to its element size).
 * Segments are allocated one after the other while the reads of those
 * already allocated run (all queued at once, in 256 MiB pieces): the first
 * read does not wait for the whole file's allocation.
 *
 * Every function returns GDU_ST_OK or a named status and, when err is not
 * NULL, fills err with that status and a message saying the cause. Nothing
 * here prints. */
#ifndef GDUNLOCK_SAFETENSORS_H
#define GDUNLOCK_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gdu_st_status {
    GDU_ST_OK = 0,
    GDU_ST_ERR_INVALID_ARGUMENT, /* a NULL or out-of-range argument */
    GDU_ST_ERR_NOMEM,            /* host memory allocation failed */
    GDU_ST_ERR_OPEN,             /* the file cannot be opened or is not a regular file */
    GDU_ST_ERR_IO,               /* reading the file failed or was short */
    GDU_ST_ERR_TOO_SMALL,        /* fewer than 8 bytes: no header length */
    GDU_ST_ERR_HEADER_LENGTH,    /* header length 0, > 100 MB, or past the end of the file */
    GDU_ST_ERR_HEADER_JSON,      /* the header is not valid UTF-8 JSON, or has duplicate keys */
    GDU_ST_ERR_HEADER_NOT_OBJECT,/* the header JSON is not an object */
    GDU_ST_ERR_TENSOR_ENTRY,     /* a tensor entry is not {dtype, shape, data_offsets} */
    GDU_ST_ERR_DTYPE,            /* unknown dtype name */
    GDU_ST_ERR_SHAPE,            /* shape not a list of non-negative integers, or too many dims */
    GDU_ST_ERR_OVERFLOW,         /* shape product x dtype size overflows 64 bits */
    GDU_ST_ERR_OFFSETS,          /* data_offsets not [begin, end] with begin <= end */
    GDU_ST_ERR_SIZE_MISMATCH,    /* end - begin differs from shape x dtype size */
    GDU_ST_ERR_OUT_OF_RANGE,     /* a tensor's bytes lie past the end of the file */
    GDU_ST_ERR_OVERLAP,          /* two tensors share bytes */
    GDU_ST_ERR_METADATA,         /* __metadata__ is not a string -> string object */
    GDU_ST_ERR_INDEX,            /* the sharded index is malformed or inconsistent */
    GDU_ST_ERR_PATH_ESCAPE,      /* a shard name is absolute or contains ".." */
    GDU_ST_ERR_DUPLICATE_TENSOR, /* the same tensor name in two shards */
    GDU_ST_ERR_NO_CUDA,          /* libcuda, the driver or the GPU is not available */
    GDU_ST_ERR_DEVICE_MEMORY,    /* device or pinned allocation failed */
    GDU_ST_ERR_ENGINE,           /* the I/O engine failed to move the data */
    GDU_ST_ERR_VERIFY_MISMATCH,  /* loaded bytes differ from the file */
    GDU_ST_STATUS_COUNT
} gdu_st_status;

typedef struct gdu_st_error {
    gdu_st_status code;
    char message[512];
} gdu_st_error;

/* "GDU_ST_ERR_OVERLAP" for a status; "unknown" past the end. */
const char *gdu_st_status_name(gdu_st_status status);

/* The dtypes of the safetensors format (huggingface/safetensors main). */
typedef enum gdu_st_dtype {
    GDU_ST_BOOL,
    GDU_ST_F4,          /* float4 e2m1, two per byte */
    GDU_ST_F6_E2M3,
    GDU_ST_F6_E3M2,
    GDU_ST_U8,
    GDU_ST_I8,
    GDU_ST_F8_E5M2,
    GDU_ST_F8_E4M3,
    GDU_ST_F8_E8M0,
    GDU_ST_F8_E4M3FNUZ,
    GDU_ST_F8_E5M2FNUZ,
    GDU_ST_I16,
    GDU_ST_U16,
    GDU_ST_F16,
    GDU_ST_BF16,
    GDU_ST_I32,
    GDU_ST_U32,
    GDU_ST_F32,
    GDU_ST_C64,
    GDU_ST_F64,
    GDU_ST_I64,
    GDU_ST_U64,
    GDU_ST_DTYPE_COUNT
} gdu_st_dtype;

/* The format's name ("BF16"), or NULL for a value out of range. */
const char *gdu_st_dtype_name(gdu_st_dtype dtype);
/* Bits per element (4 for F4, 6 for F6_*, 8 for BOOL), 0 out of range. */
unsigned gdu_st_dtype_bits(gdu_st_dtype dtype);
/* Looks a format name up; returns 0 and sets *out, or -1. */
int gdu_st_dtype_from_name(const char *name, gdu_st_dtype *out);

/* Header limits (the reference implementation's bound, and a rank bound). */
#define GDU_ST_MAX_HEADER_BYTES 100000000ull
#define GDU_ST_MAX_DIMS 64

/* ---- One file's header ------------------------------------------------- */

typedef struct gdu_st_tensor_info {
    const char *name;      /* UTF-8, NUL-terminated (names with NUL bytes are rejected) */
    gdu_st_dtype dtype;
    uint32_t ndim;         /* 0 for a scalar */
    const uint64_t *shape; /* ndim entries */
    uint64_t begin, end;   /* byte range relative to the start of the data section */
} gdu_st_tensor_info;

typedef struct gdu_st_header gdu_st_header;

/* Parses a whole safetensors file image (or at least its first
 * 8 + header-length bytes) of total size file_size. Tensors come out sorted by
 * begin offset. */
gdu_st_status gdu_st_header_parse(const void *bytes, size_t len, uint64_t file_size,
                                  gdu_st_header **out, gdu_st_error *err);
/* Reads and parses the header of an open file (pread, any position). */
gdu_st_status gdu_st_header_read_fd(int fd, gdu_st_header **out, gdu_st_error *err);
void gdu_st_header_free(gdu_st_header *header);

size_t gdu_st_header_tensor_count(const gdu_st_header *header);
const gdu_st_tensor_info *gdu_st_header_tensor(const gdu_st_header *header, size_t index);
/* Absolute file offset of the data section (8 + header length). */
uint64_t gdu_st_header_data_offset(const gdu_st_header *header);
/* Bytes of the data section that tensors reach (the largest end offset). */
uint64_t gdu_st_header_data_span(const gdu_st_header *header);
/* Bytes inside the span that no tensor covers (0 for files the reference
 * writer made; the format forbids holes, we accept and report them). */
uint64_t gdu_st_header_hole_bytes(const gdu_st_header *header);
/* Bytes after the span up to the end of the file (0 for well-formed files). */
uint64_t gdu_st_header_trailing_bytes(const gdu_st_header *header);
size_t gdu_st_header_metadata_count(const gdu_st_header *header);
/* The index-th __metadata__ entry; returns 0, or -1 past the end. */
int gdu_st_header_metadata(const gdu_st_header *header, size_t index, const char **key,
                           const char **value);

/* ---- Sharded checkpoints ---------------------------------------------- */

/* Parses a model.safetensors.index.json image: the distinct shard file names
 * of "weight_map", sorted by name (model-00001-of-... first), each checked to be a relative path
 * without "..". Returns them as a NULL-terminated malloc'd array of malloc'd
 * strings (free with gdu_st_string_list_free), and how many tensors it maps. */
gdu_st_status gdu_st_index_parse(const void *json, size_t len, char ***shards,
                                 size_t *shard_count, size_t *tensor_count,
                                 gdu_st_error *err);
void gdu_st_string_list_free(char **list);

/* ---- Loading ----------------------------------------------------------- */

typedef enum gdu_st_target {
    GDU_ST_TARGET_GPU = 0,
    GDU_ST_TARGET_HOST = 1, /* pinned host memory when libcuda works, else plain memory */
} gdu_st_target;

typedef struct gdu_st_load_options {
    gdu_st_target target;
    const int *gpus;  /* GPU ordinals; files are placed round-robin; NULL = {0} */
    size_t gpu_count;
    /* Called from the loading thread as each 256 MiB piece lands (may be NULL). */
    void (*progress)(void *ctx, uint64_t bytes_done, uint64_t bytes_total);
    void *progress_ctx;
} gdu_st_load_options;

typedef struct gdu_st_tensor {
    const char *name;
    gdu_st_dtype dtype;
    uint32_t ndim;
    const uint64_t *shape;
    uint64_t nbytes;
    uint64_t address;     /* device pointer (CUdeviceptr) or host pointer; 0 before loading */
    int32_t device;       /* GPU ordinal, or -1 for host memory */
    uint32_t file;        /* index of the file it came from */
    uint64_t file_offset; /* absolute offset of its first byte in that file */
} gdu_st_tensor;

typedef struct gdu_st_model gdu_st_model;

/* Opens a .safetensors file, or a sharded checkpoint's index JSON (any file
 * whose name ends in ".json"), and parses and validates every header. No
 * tensor data is read. */
gdu_st_status gdu_st_open(const char *path, gdu_st_model **out, gdu_st_error *err);

/* Allocates memory (one block per file) and streams each file's data section
 * into it with the I/O engine. The engines (one per GPU, one for host memory)
 * are created by the first load that needs them, with the GDUNLOCK_IO_*
 * settings of that moment, and kept for later loads in the process. */
gdu_st_status gdu_st_load(gdu_st_model *model, const gdu_st_load_options *options,
                          gdu_st_error *err);

/* Destroys the kept engines (their threads and pinned staging buffers). No
 * load may be running; the next load creates them again. */
void gdu_st_engines_release(void);

/* Reads every loaded tensor back to the host and compares it with the file.
 * GDU_ST_ERR_VERIFY_MISMATCH names the first tensor that differs. */
gdu_st_status gdu_st_verify(const gdu_st_model *model, gdu_st_error *err);

/* Frees the tables and drops the model's reference on each memory block; a
 * block lives on while DLPack tensors still use it. */
void gdu_st_model_free(gdu_st_model *model);

size_t gdu_st_model_tensor_count(const gdu_st_model *model);
const gdu_st_tensor *gdu_st_model_tensor(const gdu_st_model *model, size_t index);
/* Index of the tensor with that name, or -1. */
long gdu_st_model_find(const gdu_st_model *model, const char *name);
size_t gdu_st_model_file_count(const gdu_st_model *model);
const char *gdu_st_model_file_path(const gdu_st_model *model, size_t index);
const gdu_st_header *gdu_st_model_file_header(const gdu_st_model *model, size_t index);

typedef struct gdu_st_load_stats {
    uint64_t files;
    uint64_t tensors;
    uint64_t tensor_bytes; /* sum of tensor sizes */
    uint64_t read_bytes;   /* bytes moved by the engine (data spans, holes included) */
    double seconds;        /* wall time of gdu_st_load (allocation + transfer) */
    char backend[32];      /* engine backend that moved the data */
    char reason[256];      /* why that backend */
    char memory[64];       /* "device memory", "pinned host memory", ... */
    /* Where seconds went (the stages overlap: a file's allocation runs while
     * earlier files' reads are in flight). */
    double alloc_seconds;    /* memory allocation (the first may create the GPU's context) */
    double engine_seconds;   /* creating I/O engines (once per process and GPU) */
    double transfer_seconds; /* first read submitted to last read completed */
} gdu_st_load_stats;

/* Statistics of the last gdu_st_load; zeros before it. */
gdu_st_load_stats gdu_st_model_stats(const gdu_st_model *model);

/* ---- DLPack export ----------------------------------------------------- */

/* A DLPack (v0.x, "dltensor" capsule ABI) DLManagedTensor describing tensor
 * index as a 1-D uint8 array of its nbytes, holding a reference on the
 * tensor's memory block; its deleter drops that reference (and frees the
 * block with the last one). Callers reinterpret the bytes as the dtype and
 * shape (torch: .view(dtype).reshape(shape)); this keeps every safetensors
 * dtype expressible whatever the consumer's DLPack dtype support. Returns NULL
 * before loading, for a bad index, or when out of memory. */
void *gdu_st_model_dlpack(gdu_st_model *model, size_t index);

/* sizeof(gdu_st_tensor), for bindings that mirror the struct (ctypes). */
size_t gdu_st_tensor_struct_size(void);

#ifdef __cplusplus
}
#endif

#endif
