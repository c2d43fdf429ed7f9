/* NV20_SUBDEVICE_0 controls of the GPU's framebuffer. Numbers and layout from
 * ctrl2080fb.h and ctrlxxxx.h of open-gpu-kernel-modules 580.142; both are
 * non-privileged (RMCTRL_FLAGS_NON_PRIVILEGED, 0x8, in their flags,
 * g_subdevice_nvoc.c:5849-5851 and 6251-6254).
 *  - NV2080_CTRL_CMD_FB_GET_INFO_V2: values by index, of which gdunlock asks
 *    BAR1's size and the part of it unused now (by every process, the
 *    console's and USERD's mappings included), both in KiB; answered at
 *    kern_mem_sys_ctrl.c:291-312.
 *  - NV2080_CTRL_CMD_FB_GET_STATIC_BAR1_INFO: whether RM maps all of video
 *    memory through BAR1 at once (static BAR1) and whether write-combined;
 *    answered at kern_mem_sys_ctrl.c:1283-1310. UVM makes the PCI P2PDMA
 *    pages cuFile's P2PDMA mode needs only for a static BAR1 that is not
 *    write-combined (uvm_pmm_gpu.c:3497-3509). */
#ifndef GDUNLOCK_DRIVERABI_CTRL2080_FB_H
#define GDUNLOCK_DRIVERABI_CTRL2080_FB_H

#include <stddef.h>
#include <stdint.h>

#define GDU_NV2080_CTRL_CMD_FB_GET_INFO_V2 0x20801303u
#define GDU_NV2080_CTRL_FB_INFO_MAX_LIST_SIZE 0x80u

/* Indexes (NV2080_CTRL_FB_INFO_INDEX_*); values in KiB. */
#define GDU_NV2080_CTRL_FB_INFO_INDEX_BAR1_SIZE 0x05u
#define GDU_NV2080_CTRL_FB_INFO_INDEX_BAR1_AVAIL_SIZE 0x1du

/* NVXXXX_CTRL_XXX_INFO */
typedef struct {
    uint32_t index; /* in */
    uint32_t data;  /* out */
} gdu_nv2080_fb_info;

typedef struct {
    uint32_t fbInfoListSize; /* in: entries of fbInfoList used */
    gdu_nv2080_fb_info fbInfoList[GDU_NV2080_CTRL_FB_INFO_MAX_LIST_SIZE];
} gdu_nv2080_fb_get_info_v2_params;

_Static_assert(sizeof(gdu_nv2080_fb_info) == 8, "NV2080_CTRL_FB_INFO size");
_Static_assert(offsetof(gdu_nv2080_fb_info, data) == 4, "NV2080_CTRL_FB_INFO data offset");
_Static_assert(offsetof(gdu_nv2080_fb_get_info_v2_params, fbInfoList) == 4,
               "FB_GET_INFO_V2 fbInfoList offset");
_Static_assert(sizeof(gdu_nv2080_fb_get_info_v2_params) == 1028, "FB_GET_INFO_V2 params size");

#define GDU_NV2080_CTRL_CMD_FB_GET_STATIC_BAR1_INFO 0x20801354u

typedef struct {
    uint8_t bStaticBar1Enabled;       /* NvBool */
    uint8_t bStaticBar1WriteCombined; /* NvBool: !PDB_PROP_CL_DISABLE_IOMAP_WC */
    _Alignas(8) uint64_t staticBar1StartOffset;
    _Alignas(8) uint64_t staticBar1Size; /* bytes; valid when enabled */
} gdu_nv2080_fb_static_bar1_info_params;

_Static_assert(offsetof(gdu_nv2080_fb_static_bar1_info_params, bStaticBar1WriteCombined) == 1,
               "GET_STATIC_BAR1_INFO bStaticBar1WriteCombined offset");
_Static_assert(offsetof(gdu_nv2080_fb_static_bar1_info_params, staticBar1StartOffset) == 8,
               "GET_STATIC_BAR1_INFO staticBar1StartOffset offset");
_Static_assert(offsetof(gdu_nv2080_fb_static_bar1_info_params, staticBar1Size) == 16,
               "GET_STATIC_BAR1_INFO staticBar1Size offset");
_Static_assert(sizeof(gdu_nv2080_fb_static_bar1_info_params) == 24,
               "GET_STATIC_BAR1_INFO params size");

#endif
