/* Decoding of the RM escape and UVM parameter blocks the shim watches into
 * plain descriptions. Pure functions over bytes: they never follow the
 * pointers inside a block (fuzzed by tests/fuzz/fuzz_shim_decode.c). */
#ifndef GDUNLOCK_SHIM_DECODE_H
#define GDUNLOCK_SHIM_DECODE_H

#include "driverabi/uvm_abi.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    GDU_RM_OP_ALLOC = 1,    /* NVOS21 or NVOS64 */
    GDU_RM_OP_FREE,         /* NVOS00 */
    GDU_RM_OP_CONTROL,      /* NVOS54 */
    GDU_RM_OP_DUP,          /* NVOS55 */
    GDU_RM_OP_ALLOC_MEMORY, /* NVOS02 with fd */
} gdu_rm_op;

typedef struct {
    gdu_rm_op op;
    uint32_t client; /* hRoot / hClient */
    uint32_t parent; /* alloc, dup, alloc-memory: parent of the new object */
    uint32_t handle; /* alloc, dup, alloc-memory: the new object (after the call: the
                         generated one); free: the object freed; control: its target */
    uint32_t cls;    /* alloc, alloc-memory */
    uint32_t cmd;    /* control */
    uint64_t params; /* alloc: pAllocParms; control: params */
    uint32_t params_size;
    uint32_t src_client, src_handle; /* dup */
    uint32_t status;
} gdu_rm_call;

/* True for the (escape number, block size) pairs the shim decodes. */
bool gdu_rm_call_watched(unsigned nr, size_t size);

/* Decodes a block of size bytes for escape nr. Returns false when the pair is
 * not one gdu_rm_call_watched accepts. */
bool gdu_rm_call_decode(unsigned nr, const void *block, size_t size, gdu_rm_call *out);

/* Writes status into a FREE or CONTROL block of escape nr, as RM would after
 * the call (test mode: the shim answers a call of libcuda's itself). Returns
 * false for any other escape. */
bool gdu_rm_call_set_status(unsigned nr, void *block, size_t size, uint32_t status);

/* UVM requests the shim watches, with the size of their blocks (the
 * map's size depends on the layout). 0 when not watched. */
size_t gdu_uvm_watched_size(unsigned long request, const gdu_uvm_layout *layout);

typedef struct {
    uint64_t base, length;
    uint32_t status;
} gdu_uvm_range;

/* Reads base, length and rmStatus of a UVM_FREE or UVM_UNMAP_EXTERNAL block. */
void gdu_uvm_range_decode(unsigned long request, const void *block, gdu_uvm_range *out);

/* The part of a mapping [base, base+length) at memory offset `offset` that
 * REGISTER_VIDMEM accepts: address, size and offset all 64 KiB aligned.
 * Returns false when no such part exists (then *size is 0). */
bool gdu_vidmem_aligned_part(uint64_t base, uint64_t length, uint64_t offset, uint64_t *reg_address,
                             uint64_t *reg_size, uint64_t *reg_offset);

#endif
