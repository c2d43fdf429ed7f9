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

typedef struct st_block {
    atomic_int refs;
    st_mem_kind kind;
    int device;       /* GPU ordinal (for pinned memory: the context's GPU), -1 for plain host */
    uint64_t address; /* device pointer or host pointer */
    uint64_t size;
} st_block;

/* Allocates size bytes (at least 1) with one reference. For ST_MEM_PINNED
 * the block falls back to ST_MEM_HOST where libcuda is missing. */
gdu_st_status st_block_alloc(st_mem_kind kind, int device, uint64_t size, st_block **out,
                             gdu_st_error *err);
void st_block_retain(st_block *block);
/* Drops a reference; the last one frees the memory (errors at process exit,
 * when the driver is already shut down, are ignored: nothing is left to leak). */
void st_block_release(st_block *block);

/* "device", "pinned host" or "host". */
const char *st_mem_kind_name(st_mem_kind kind);

#endif
