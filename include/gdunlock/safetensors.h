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
 * here prints. A NULL handle or output pointer, an index out of range, a
 * flag bit not defined here or a target not in gdu_st_target is refused
 * with GDU_ST_ERR_INVALID_ARGUMENT; for a NULL model or header, or an index
 * out of range, the accessors answer 0, NULL, -1 or an empty struct. */
#ifndef GDUNLOCK_SAFETENSORS_H
#define GDUNLOCK_SAFETENSORS_H

#include "gdunlock/io.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gdu_st_status {
    GDU_ST_OK = 0,
    GDU_ST_ERR_INVALID_ARGUMENT,  /* a NULL or out-of-range argument */
    GDU_ST_ERR_NOMEM,             /* host memory allocation failed */
    GDU_ST_ERR_OPEN,              /* the file cannot be opened or is not a regular file */
    GDU_ST_ERR_IO,                /* reading the file failed or was short */
    GDU_ST_ERR_TOO_SMALL,         /* fewer than 8 bytes: no header length */
    GDU_ST_ERR_HEADER_LENGTH,     /* header length > 100 MB, or past the end of the file */
    GDU_ST_ERR_HEADER_JSON,       /* the header is not valid UTF-8 JSON (or empty), has duplicate
                                  * keys, or nests deeper than serde_json's limit */
    GDU_ST_ERR_HEADER_NOT_OBJECT, /* the header JSON is not an object */
    GDU_ST_ERR_TENSOR_ENTRY,      /* a tensor entry is not {dtype, shape, data_offsets} */
    GDU_ST_ERR_DTYPE,             /* unknown dtype name */
    GDU_ST_ERR_SHAPE,             /* shape not a list of non-negative integers */
    GDU_ST_ERR_OVERFLOW,          /* shape product x dtype size overflows 64 bits */
    GDU_ST_ERR_OFFSETS,           /* data_offsets not [begin, end] with begin <= end, or (strict)
                                  * an empty tensor placed inside another's bytes */
    GDU_ST_ERR_SIZE_MISMATCH,     /* end - begin differs from shape x dtype size */
    GDU_ST_ERR_OUT_OF_RANGE,      /* a tensor's bytes lie past the end of the file */
    GDU_ST_ERR_OVERLAP,           /* two tensors share bytes */
    GDU_ST_ERR_METADATA,          /* __metadata__ is not null or a string -> string object */
    GDU_ST_ERR_INDEX,             /* the sharded index is malformed or inconsistent */
    GDU_ST_ERR_PATH_ESCAPE,       /* a shard name is absolute or contains ".." */
    GDU_ST_ERR_DUPLICATE_TENSOR,  /* the same tensor name in two shards */
    GDU_ST_ERR_NO_CUDA,           /* libcuda, the driver or the GPU is not available */
    GDU_ST_ERR_DEVICE_MEMORY,     /* device or pinned allocation failed */
    GDU_ST_ERR_ENGINE,            /* the I/O engine failed to move the data */
    GDU_ST_ERR_VERIFY_MISMATCH,   /* loaded bytes differ from the file */
    GDU_ST_ERR_HOLE,              /* (strict) bytes before or between tensors belong to none */
    GDU_ST_ERR_TRAILING,          /* (strict) bytes after the last tensor */
    GDU_ST_ERR_SETTINGS,          /* a GDUNLOCK_IO_* setting is invalid */
    GDU_ST_ERR_BUSY,              /* the engines are in use by a load or an open reader */
    GDU_ST_ERR_CHANGED,           /* a file that had to be opened again is not the one validated
                                  * (replaced, or written: its size, modification or change time) */
    GDU_ST_ERR_TOO_MANY_FILES,    /* the process's open-file limit was reached (EMFILE, ENFILE) */
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
    GDU_ST_F4, /* float4 e2m1, two per byte */
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

/* The reference implementation's bound on the header length. There is no
 * bound on the number of dimensions (the reference has none). */
#define GDU_ST_MAX_HEADER_BYTES 100000000ull

/* Parsing flags.
 *
 * Strict (0, the default) accepts exactly the files the reference
 * implementation (huggingface/safetensors, safetensors/src/tensor.rs)
 * accepts: tensors cover the data section from byte 0 to the end of the file
 * one after the other (no holes, no trailing bytes), shape products are
 * checked for overflow dimension by dimension, any number of dimensions,
 * __metadata__ null or a string -> string map, extra fields in a tensor entry
 * ignored, an entry also as a [dtype, shape, data_offsets] list; and, as the
 * format's specification says (the crate keeps the last), no duplicate keys.
 * The JSON is read as serde_json reads it (src/safetensors/st_json.h):
 * names and metadata may hold \u0000 (hence the lengths below), integers
 * up to 2^64-1, "-0" and "1.0" are floats (no size or offset), nesting
 * deeper than 127 is an error.
 *
 * GDU_ST_LENIENT reads damaged files the format forbids: holes, trailing
 * bytes and empty tensors anywhere are accepted and reported (hole and
 * trailing byte counts), and a zero dimension makes a shape empty however
 * large the others are. Overlapping tensors are refused either way. */
#define GDU_ST_LENIENT 1u
/* gdu_st_open_flags only: a folder stands for the checkpoint it holds, its
 * *.safetensors.index.json where it has one, else its .safetensors files
 * (one or several, as shards of a checkpoint without an index). Without it
 * a folder is GDU_ST_ERR_OPEN, as safetensors' own open refuses one. */
#define GDU_ST_FOLDER 2u

/* ---- One file's header ------------------------------------------------- */

typedef struct gdu_st_tensor_info {
    const char *name; /* UTF-8, NUL-terminated; may hold NUL (\u0000): see name_len */
    size_t name_len;  /* bytes of name */
    gdu_st_dtype dtype;
    uint32_t ndim;         /* 0 for a scalar */
    const uint64_t *shape; /* ndim entries */
    uint64_t begin, end;   /* byte range relative to the start of the data section */
} gdu_st_tensor_info;

typedef struct gdu_st_header gdu_st_header;

/* Parses a whole safetensors file image (or at least its first
 * 8 + header-length bytes) of total size file_size, strictly. Tensors come
 * out sorted by begin offset. */
gdu_st_status gdu_st_header_parse(const void *bytes, size_t len, uint64_t file_size,
                                  gdu_st_header **out, gdu_st_error *err);
/* The same with flags (GDU_ST_LENIENT). */
gdu_st_status gdu_st_header_parse_flags(const void *bytes, size_t len, uint64_t file_size,
                                        unsigned flags, gdu_st_header **out, gdu_st_error *err);
/* Reads and parses the header of an open regular file (pread, any position). */
gdu_st_status gdu_st_header_read_fd(int fd, unsigned flags, gdu_st_header **out, gdu_st_error *err);
void gdu_st_header_free(gdu_st_header *header);

size_t gdu_st_header_tensor_count(const gdu_st_header *header);
const gdu_st_tensor_info *gdu_st_header_tensor(const gdu_st_header *header, size_t index);
/* Absolute file offset of the data section (8 + header length). */
uint64_t gdu_st_header_data_offset(const gdu_st_header *header);
/* Bytes of the data section that tensors reach (the largest end offset). */
uint64_t gdu_st_header_data_span(const gdu_st_header *header);
/* Bytes inside the span that no tensor covers (always 0 when strict; the
 * format forbids holes, GDU_ST_LENIENT accepts and reports them). */
uint64_t gdu_st_header_hole_bytes(const gdu_st_header *header);
/* Bytes after the span up to the end of the file (always 0 when strict). */
uint64_t gdu_st_header_trailing_bytes(const gdu_st_header *header);
size_t gdu_st_header_metadata_count(const gdu_st_header *header);
/* Whether the header has a __metadata__ object (0 when absent or null). */
int gdu_st_header_has_metadata(const gdu_st_header *header);
/* The index-th __metadata__ entry; returns 0, or -1 past the end. Key and
 * value may hold NUL bytes (\u0000): key_len and value_len (either may be
 * NULL) get their lengths. */
int gdu_st_header_metadata(const gdu_st_header *header, size_t index, const char **key,
                           size_t *key_len, const char **value, size_t *value_len);

/* ---- Sharded checkpoints ---------------------------------------------- */

/* Parses a model.safetensors.index.json image: the distinct shard file names
 * of "weight_map", sorted by name (model-00001-of-... first), each checked to be a relative path
 * without "..". Returns them as a NULL-terminated malloc'd array of malloc'd
 * strings (free with gdu_st_string_list_free), and how many tensors it maps. */
gdu_st_status gdu_st_index_parse(const void *json, size_t len, char ***shards, size_t *shard_count,
                                 size_t *tensor_count, gdu_st_error *err);
void gdu_st_string_list_free(char **list);

/* ---- Loading ----------------------------------------------------------- */

typedef enum gdu_st_target {
    GDU_ST_TARGET_GPU = 0,
    GDU_ST_TARGET_HOST = 1, /* pinned host memory when libcuda works, else plain memory */
} gdu_st_target;

typedef struct gdu_st_load_options {
    gdu_st_target target;
    const int *gpus; /* GPU ordinals; files are placed round-robin; NULL = {0} */
    size_t gpu_count;
    /* Called from the thread in gdu_st_load (_finish) as each 256 MiB piece
     * lands (may be NULL). */
    void (*progress)(void *ctx, uint64_t bytes_done, uint64_t bytes_total);
    void *progress_ctx;
} gdu_st_load_options;

typedef struct gdu_st_tensor {
    const char *name; /* NUL-terminated; may hold NUL: name_len */
    size_t name_len;
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
 * whose name ends in ".json"), and parses and validates every header
 * strictly. No tensor data is read. Only regular files are opened (a FIFO or
 * a device is refused without blocking). Every shard must resolve (symbolic
 * links followed) inside the index's folder or, for the Hugging Face cache
 * layout (.../snapshots/REV/), inside that cache repository's blobs/ folder.
 *
 * The model keeps the descriptor each header was read from, and every later
 * read (gdu_st_load, gdu_st_verify, gdu_st_model_file_open) goes through it,
 * so that what is read is the file that was validated even if its path is
 * replaced meanwhile (a writer's rename). It keeps at most 64, and at most
 * an eighth of the open-file limit (RLIMIT_NOFILE); a file past those is
 * opened again by path when needed and refused with GDU_ST_ERR_CHANGED
 * unless it is the same file, unchanged. At the open-file limit the status
 * is GDU_ST_ERR_TOO_MANY_FILES. */
gdu_st_status gdu_st_open(const char *path, gdu_st_model **out, gdu_st_error *err);
/* The same with flags (GDU_ST_LENIENT, GDU_ST_FOLDER). */
gdu_st_status gdu_st_open_flags(const char *path, unsigned flags, gdu_st_model **out,
                                gdu_st_error *err);

/* Allocates memory (one block per file) and streams each file's data section
 * into it with the I/O engine, through the descriptors gdu_st_open read the
 * headers from (see there). The engines (one per GPU, one for host memory)
 * are created by the first load that needs them, with the GDUNLOCK_IO_*
 * settings of that moment, and kept for later loads in the process. At
 * most 32 files (and a 32nd of the open-file limit) are open on the engines
 * at once: the next is opened as one finishes. */
gdu_st_status gdu_st_load(gdu_st_model *model, const gdu_st_load_options *options,
                          gdu_st_error *err);

/* gdu_st_load in two halves. _start allocates the memory and submits the
 * reads (those of files past the 32 open at once: _finish, as files finish),
 * then returns: from then on each tensor's address is set and
 * gdu_st_model_dlpack exports it, but its bytes are valid only once
 * gdu_st_load_finish has returned GDU_ST_OK (so a binding can build its
 * tensor objects while the data moves). _finish waits for the reads, calls
 * options->progress from its thread, and on failure releases the memory and
 * clears the addresses (exports keep theirs alive, contents undefined). A
 * failed _start leaves nothing to finish; gdu_st_model_free of a started
 * load finishes it first. */
gdu_st_status gdu_st_load_start(gdu_st_model *model, const gdu_st_load_options *options,
                                gdu_st_error *err);
gdu_st_status gdu_st_load_finish(gdu_st_model *model, gdu_st_error *err);

/* Destroys the kept engines (their threads and pinned staging buffers); the
 * next load creates them again. Refuses with GDU_ST_ERR_BUSY while a load
 * runs or an engine is leased (gdu_st_engine_acquire). */
gdu_st_status gdu_st_engines_release(gdu_st_error *err);

/* Leases the kept engine for host memory (host != 0) or for GPU device, for
 * callers that read ranges themselves through include/gdunlock/io.h (the
 * Python module's safe_open). Every lease is given back with
 * gdu_st_engine_return; gdu_st_engines_release refuses while one is out.
 * Leases are counted per engine: a return of an engine that has none out
 * (returned twice, or never leased) is refused with
 * GDU_ST_ERR_INVALID_ARGUMENT and changes nothing; NULL is GDU_ST_OK. */
gdu_st_status gdu_st_engine_acquire(int host, int device, gdu_io_engine **out, gdu_st_error *err);
gdu_st_status gdu_st_engine_return(gdu_io_engine *engine);

/* Reads every loaded tensor back to the host and compares it with the file
 * whose header was validated (through the descriptor gdu_st_open read it
 * from, or the path opened again and checked: GDU_ST_ERR_CHANGED).
 * GDU_ST_ERR_VERIFY_MISMATCH names the first tensor that differs. */
gdu_st_status gdu_st_verify(const gdu_st_model *model, gdu_st_error *err);

/* Frees the tables and drops the model's reference on each memory block; a
 * block lives on while DLPack tensors still use it. */
void gdu_st_model_free(gdu_st_model *model);

/* The tensors are numbered file by file, each file's in the order of its
 * bytes (file 0's gdu_st_header_tensor_count first, then file 1's, ...). */
size_t gdu_st_model_tensor_count(const gdu_st_model *model);
const gdu_st_tensor *gdu_st_model_tensor(const gdu_st_model *model, size_t index);
/* Index of the tensor with that name, or -1; _n for names holding NUL. */
long gdu_st_model_find(const gdu_st_model *model, const char *name);
long gdu_st_model_find_n(const gdu_st_model *model, const char *name, size_t len);
size_t gdu_st_model_file_count(const gdu_st_model *model);
const char *gdu_st_model_file_path(const gdu_st_model *model, size_t index);
const gdu_st_header *gdu_st_model_file_header(const gdu_st_model *model, size_t index);

/* Opens file index of the model on engine (for reading), for callers that
 * read tensor ranges themselves through include/gdunlock/io.h (the Python
 * module's safe_open): the engine reads the file whose header the model
 * validated, through the descriptor gdu_st_open read it from, whatever the
 * path names by now (a checkpoint replaced by rename keeps being read as it
 * was). Where the model did not keep that descriptor (see gdu_st_open),
 * the path is opened again and refused with GDU_ST_ERR_CHANGED unless it is
 * the same file (device, inode), unchanged (size, modification time, change
 * time).
 * Close *out with gdu_io_close, before or after freeing the model (the
 * engine holds its own descriptor). Thread-safe. GDU_ST_ERR_OPEN with the
 * engine's reason, or GDU_ST_ERR_TOO_MANY_FILES at the open-file limit. */
gdu_st_status gdu_st_model_file_open(const gdu_st_model *model, size_t index, gdu_io_engine *engine,
                                     gdu_io_file **out, gdu_st_error *err);

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

/* JSON: the size and every field's offset and size of each struct a binding
 * mirrors (the ones of this header and io.h the Python module passes), the
 * constants it passes and the status names by value, as this library was
 * compiled; NULL when out of memory. The string lives for the process. */
const char *gdu_st_abi_layout(void);

/* The library's version ("0.1.0"), for bindings that check they match. */
const char *gdu_st_version(void);

#ifdef __cplusplus
}
#endif

#endif
