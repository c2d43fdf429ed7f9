/* Reference-counted memory blocks holding one file's data section: device
 * memory in the GPU's primary context (the one PyTorch uses, so pointers are
 * valid there), pinned host memory, or plain host memory without libcuda. */
#ifndef GDUNLOCK_ST_BLOCK_H
#define GDUNLOCK_ST_BLOCK_H

#include "gdunlock/safetensors.h"

#include <stdatomic.h>

typedef enum st_mem_kind {
    ST_MEM_DEVICE,
    ST_MEM_PINNED,
    ST_MEM_HOST,
} st_mem_kind;

/* One allocation holding data-section bytes [start, end) of a file. */
typedef struct st_segment {
    uint64_t start, end;
    uint64_t address; /* where byte start lives: base + start % ST_BLOCK_ALIGN */
    uint64_t base;    /* the allocation itself */
} st_segment;

/* A segment's address is congruent to its start modulo this, so every
 * tensor keeps the alignment it has in the file (as if the whole data
 * section were one allocation). */
#define ST_BLOCK_ALIGN 256u

/* One file's data section: one or more segments, allocated one after the
 * other so that the loader can read into the first while it allocates the
 * next. Reference-counted as a whole. */
typedef struct st_block {
    atomic_int refs;
    st_mem_kind kind;
    int device;    /* GPU ordinal (for pinned memory: the context's GPU), -1 for plain host */
    uint64_t size; /* bytes of the data section */
    size_t n_segments, cap_segments;
    st_segment *segments; /* in start order, contiguous over [0, size) once complete */
    const void *cuda;     /* the libcuda table when a context is retained for the block */
} st_block;

/* An empty block for size bytes (nothing allocated yet) with one reference.
 * For ST_MEM_PINNED it falls back to ST_MEM_HOST where libcuda is missing;
 * ST_MEM_DEVICE without libcuda fails (GDU_ST_ERR_NO_CUDA). */
gdu_st_status st_block_create(st_mem_kind kind, int device, uint64_t size, st_block **out,
                              gdu_st_error *err);
/* Allocates the next segment, [end of the last segment, end). */
gdu_st_status st_block_add_segment(st_block *block, uint64_t end, gdu_st_error *err);
/* Address of data-section byte pos, and how many bytes from there are
 * contiguous in memory (to the end of its segment); 0 if pos is not allocated. */
uint64_t st_block_address(const st_block *block, uint64_t pos, uint64_t *contiguous);
void st_block_retain(st_block *block);
/* Drops a reference; the last one frees the memory (errors at process exit,
 * when the driver is already shut down, are ignored: nothing is left to leak). */
void st_block_release(st_block *block);

/* "device", "pinned host" or "host". */
const char *st_mem_kind_name(st_mem_kind kind);

#endif
