/* BAR1 as RM counts it: its size and the part of it no one maps now, per GPU,
 * shared by every process (nvidia-fs's pins of all of them, CPU mappings of
 * video memory, USERD and the console take from it). RM refuses a pin when
 * its own count runs short (p2p.c:1019-1030, open-gpu-kernel-modules
 * 580.142), whatever one process's PCI BAR suggests. And whether RM maps
 * all of video memory through it at once (static BAR1), write-combined or
 * not: what cuFile's P2PDMA mode needs. Through our RM client:
 * NV2080_CTRL_CMD_FB_GET_INFO_V2 and _GET_STATIC_BAR1_INFO
 * (driverabi/ctrl2080_fb.h). */
#ifndef GDUNLOCK_RM_RM_BAR1_INFO_H
#define GDUNLOCK_RM_RM_BAR1_INFO_H

#include "rm/rm_client.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct gdu_rm_bar1 {
    uint64_t total;      /* BAR1's size, bytes */
    uint64_t available;  /* unused now by every process, bytes (a moment's figure) */
    bool static_known;   /* RM answered GET_STATIC_BAR1_INFO */
    bool static_enabled; /* all of video memory mapped through BAR1 at once */
    bool write_combined; /* the static mapping is write-combined */
    uint64_t static_size;
} gdu_rm_bar1;

/* RM's figures for the GPU of RM gpuId gpu_id, through a device and
 * subdevice of client c opened for the query. The process must hold the
 * GPU's /dev/nvidiaN open (a CUDA context does). Returns 0, or -errno with
 * why (-EIO with *status when RM refused; -ENODATA when it had no figures).
 * A refused static-BAR1 question only leaves static_known false. */
int gdu_rm_bar1_query(gdu_rm_client *c, uint32_t gpu_id, gdu_rm_bar1 *out, uint32_t *status,
                      char *why, size_t why_len);

/* The same for the GPU at PCI address addr ("0000:1b:00.0", any spelling),
 * in an RM client of its own on the given calls (rm_client.h: the shim's
 * ioctl is libc's, so that its own hook never sees the escapes): what the
 * I/O engine's cuFile ring and the shim's report ask (holding a CUDA context
 * on the GPU). Returns 0, -ENODEV when the RM has no such GPU attached, or
 * -errno with why. */
int gdu_rm_bar1_of(const char *addr, const gdu_rm_calls *calls, gdu_rm_bar1 *out, char *why,
                   size_t why_len);

#endif
