#include "shim/shim_decode.h"

#include "driverabi/nv503c.h"
#include "driverabi/nv_escape.h"
#include "driverabi/nvos.h"

#include <string.h>

bool gdu_rm_call_watched(unsigned nr, size_t size)
{
    switch (nr) {
    case GDU_NV_ESC_RM_ALLOC:
        return size == sizeof(gdu_nvos21) || size == sizeof(gdu_nvos64);
    case GDU_NV_ESC_RM_FREE:
        return size == sizeof(gdu_nvos00);
    case GDU_NV_ESC_RM_CONTROL:
        return size == sizeof(gdu_nvos54);
    case GDU_NV_ESC_RM_DUP_OBJECT:
        return size == sizeof(gdu_nvos55);
    case GDU_NV_ESC_RM_ALLOC_MEMORY:
        return size == sizeof(gdu_nvos02_with_fd);
    default:
        return false;
    }
}

bool gdu_rm_call_decode(unsigned nr, const void *block, size_t size, gdu_rm_call *out)
{
    if (!gdu_rm_call_watched(nr, size))
        return false;
    switch (nr) {
    case GDU_NV_ESC_RM_ALLOC:
        if (size == sizeof(gdu_nvos21)) {
            gdu_nvos21 p;
            memcpy(&p, block, sizeof p);
            *out = (gdu_rm_call){.op = GDU_RM_OP_ALLOC,
                                 .client = p.hRoot,
                                 .parent = p.hObjectParent,
                                 .handle = p.hObjectNew,
                                 .cls = p.hClass,
                                 .params = p.pAllocParms,
                                 .params_size = p.paramsSize,
                                 .status = p.status};
        } else {
            gdu_nvos64 p;
            memcpy(&p, block, sizeof p);
            *out = (gdu_rm_call){.op = GDU_RM_OP_ALLOC,
                                 .client = p.hRoot,
                                 .parent = p.hObjectParent,
                                 .handle = p.hObjectNew,
                                 .cls = p.hClass,
                                 .params = p.pAllocParms,
                                 .params_size = p.paramsSize,
                                 .status = p.status};
        }
        return true;
    case GDU_NV_ESC_RM_FREE: {
        gdu_nvos00 p;
        memcpy(&p, block, sizeof p);
        *out = (gdu_rm_call){.op = GDU_RM_OP_FREE,
                             .client = p.hRoot,
                             .parent = p.hObjectParent,
                             .handle = p.hObjectOld,
                             .status = p.status};
        return true;
    }
    case GDU_NV_ESC_RM_CONTROL: {
        gdu_nvos54 p;
        memcpy(&p, block, sizeof p);
        *out = (gdu_rm_call){.op = GDU_RM_OP_CONTROL,
                             .client = p.hClient,
                             .handle = p.hObject,
                             .cmd = p.cmd,
                             .params = p.params,
                             .params_size = p.paramsSize,
                             .status = p.status};
        return true;
    }
    case GDU_NV_ESC_RM_DUP_OBJECT: {
        gdu_nvos55 p;
        memcpy(&p, block, sizeof p);
        *out = (gdu_rm_call){.op = GDU_RM_OP_DUP,
                             .client = p.hClient,
                             .parent = p.hParent,
                             .handle = p.hObject,
                             .src_client = p.hClientSrc,
                             .src_handle = p.hObjectSrc,
                             .status = p.status};
        return true;
    }
    default: { /* GDU_NV_ESC_RM_ALLOC_MEMORY */
        gdu_nvos02_with_fd p;
        memcpy(&p, block, sizeof p);
        *out = (gdu_rm_call){.op = GDU_RM_OP_ALLOC_MEMORY,
                             .client = p.params.hRoot,
                             .parent = p.params.hObjectParent,
                             .handle = p.params.hObjectNew,
                             .cls = p.params.hClass,
                             .status = p.params.status};
        return true;
    }
    }
}

bool gdu_rm_call_set_status(unsigned nr, void *block, size_t size, uint32_t status)
{
    if (!gdu_rm_call_watched(nr, size))
        return false;
    if (nr == GDU_NV_ESC_RM_FREE)
        memcpy((unsigned char *)block + offsetof(gdu_nvos00, status), &status, sizeof status);
    else if (nr == GDU_NV_ESC_RM_CONTROL)
        memcpy((unsigned char *)block + offsetof(gdu_nvos54, status), &status, sizeof status);
    else
        return false;
    return true;
}

size_t gdu_uvm_watched_size(unsigned long request, const gdu_uvm_layout *layout)
{
    switch (request) {
    case GDU_UVM_MAP_EXTERNAL_ALLOCATION:
        return layout != NULL ? layout->size : 0;
    case GDU_UVM_FREE:
        return sizeof(gdu_uvm_free_params);
    case GDU_UVM_UNMAP_EXTERNAL:
        return sizeof(gdu_uvm_unmap_external_params);
    default:
        return 0;
    }
}

void gdu_uvm_range_decode(unsigned long request, const void *block, gdu_uvm_range *out)
{
    if (request == GDU_UVM_FREE) {
        gdu_uvm_free_params p;
        memcpy(&p, block, sizeof p);
        *out = (gdu_uvm_range){.base = p.base, .length = p.length, .status = p.rmStatus};
    } else {
        gdu_uvm_unmap_external_params p;
        memcpy(&p, block, sizeof p);
        *out = (gdu_uvm_range){.base = p.base, .length = p.length, .status = p.rmStatus};
    }
}

bool gdu_vidmem_aligned_part(uint64_t base, uint64_t length, uint64_t offset, uint64_t *reg_address,
                             uint64_t *reg_size, uint64_t *reg_offset)
{
    const uint64_t align = GDU_NV503C_VIDMEM_ALIGN;
    *reg_size = 0;
    if (base > UINT64_MAX - (align - 1))
        return false;
    uint64_t start = (base + align - 1) & ~(align - 1);
    uint64_t skip = start - base;
    if (skip >= length)
        return false;
    /* The memory offset moves with the address; both must land on 64 KiB. */
    if (offset > UINT64_MAX - skip || ((offset + skip) & (align - 1)) != 0)
        return false;
    uint64_t size = (length - skip) & ~(align - 1);
    if (size == 0)
        return false;
    *reg_address = start;
    *reg_size = size;
    *reg_offset = offset + skip;
    return true;
}
