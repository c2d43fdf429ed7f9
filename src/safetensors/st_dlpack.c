/* DLPack export of loaded tensors. Our own declaration of the DLPack 0.x ABI
 * (dlpack.h: DLDevice, DLDataType, DLTensor, DLManagedTensor), checked by size
 * and offset, as consumed through a "dltensor" PyCapsule by torch.from_dlpack. */
#include "safetensors/st_model_internal.h"

#include <stddef.h>
#include <stdlib.h>

enum { DL_CPU = 1, DL_CUDA = 2 }; /* DLDeviceType */
enum { DL_UINT = 1 };             /* DLDataTypeCode */

typedef struct {
    int32_t device_type;
    int32_t device_id;
} dl_device;

typedef struct {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} dl_data_type;

typedef struct {
    void *data;
    dl_device device;
    int32_t ndim;
    dl_data_type dtype;
    int64_t *shape;
    int64_t *strides;
    uint64_t byte_offset;
} dl_tensor;

typedef struct dl_managed_tensor {
    dl_tensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct dl_managed_tensor *self);
} dl_managed_tensor;

_Static_assert(sizeof(dl_device) == 8, "DLDevice size");
_Static_assert(sizeof(dl_data_type) == 4, "DLDataType size");
_Static_assert(offsetof(dl_tensor, device) == 8, "DLTensor.device");
_Static_assert(offsetof(dl_tensor, ndim) == 16, "DLTensor.ndim");
_Static_assert(offsetof(dl_tensor, dtype) == 20, "DLTensor.dtype");
_Static_assert(offsetof(dl_tensor, shape) == 24, "DLTensor.shape");
_Static_assert(offsetof(dl_tensor, strides) == 32, "DLTensor.strides");
_Static_assert(offsetof(dl_tensor, byte_offset) == 40, "DLTensor.byte_offset");
_Static_assert(sizeof(dl_tensor) == 48, "DLTensor size");
_Static_assert(offsetof(dl_managed_tensor, manager_ctx) == 48, "DLManagedTensor.manager_ctx");
_Static_assert(offsetof(dl_managed_tensor, deleter) == 56, "DLManagedTensor.deleter");
_Static_assert(sizeof(dl_managed_tensor) == 64, "DLManagedTensor size");

/* The managed tensor and its one-entry shape, freed together by the deleter. */
typedef struct {
    dl_managed_tensor managed;
    int64_t shape[1];
} st_dlpack;

static void st_dlpack_delete(dl_managed_tensor *self)
{
    st_dlpack *d = (st_dlpack *)self;
    st_block_release(self->manager_ctx);
    free(d);
}

void *gdu_st_model_dlpack(gdu_st_model *m, size_t index)
{
    if (m == NULL || index >= m->tensor_count)
        return NULL;
    const gdu_st_tensor *t = &m->tensors[index];
    st_block *block = m->files[t->file].block;
    if (block == NULL || t->address == 0 || t->nbytes > INT64_MAX)
        return NULL;
    st_dlpack *d = calloc(1, sizeof *d);
    if (d == NULL)
        return NULL;
    st_block_retain(block);
    d->shape[0] = (int64_t)t->nbytes;
    d->managed.dl_tensor = (dl_tensor){
        .data = (void *)(uintptr_t)t->address,
        .device = block->kind == ST_MEM_DEVICE ? (dl_device){DL_CUDA, block->device}
                                               : (dl_device){DL_CPU, 0},
        .ndim = 1,
        .dtype = {DL_UINT, 8, 1},
        .shape = d->shape,
        .strides = NULL,
        .byte_offset = 0,
    };
    d->managed.manager_ctx = block;
    d->managed.deleter = st_dlpack_delete;
    return &d->managed;
}
