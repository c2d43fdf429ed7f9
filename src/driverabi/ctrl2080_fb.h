/* NV20_SUBDEVICE_0 control NV2080_CTRL_CMD_FB_GET_INFO_V2: values of the
 * GPU's framebuffer by index, of which gdunlock asks BAR1's size and the part
 * of it unused now (by every process, the console's and USERD's mappings
 * included), both in KiB. Numbers and layout from ctrl2080fb.h and
 * ctrlxxxx.h of open-gpu-kernel-modules 580.142; the control is
 * non-privileged (RMCTRL_FLAGS_NON_PRIVILEGED in its flags 0x10118,
 * g_subdevice_nvoc.c:5849-5851), answered at kern_mem_sys_ctrl.c:291-312. */
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

#endif
