#include "rm/rm_p2p_caps.h"

#include "driverabi/ctrl0000_gpu.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gdu_rm_attached_gpus(gdu_rm_client *c, gdu_rm_gpu *out, size_t cap, size_t *count, char *why,
                         size_t why_len)
{
    gdu_nv0000_attached_ids_params ids;
    memset(&ids, 0xff, sizeof ids);
    *count = 0;
    int rc = gdu_rm_control(c, 0, GDU_NV0000_CTRL_CMD_GPU_GET_ATTACHED_IDS, &ids, sizeof ids, NULL,
                            "listing attached GPUs", why, why_len);
    if (rc != 0)
        return rc;
    for (size_t i = 0; i < GDU_NV0000_GPU_MAX_ATTACHED_GPUS && *count < cap; i++) {
        if (ids.gpuIds[i] == GDU_NV0000_GPU_INVALID_ID)
            break;
        gdu_nv0000_pci_info_params pci = {.gpuId = ids.gpuIds[i]};
        rc = gdu_rm_control(c, 0, GDU_NV0000_CTRL_CMD_GPU_GET_PCI_INFO, &pci, sizeof pci, NULL,
                            "reading a GPU's PCI address", why, why_len);
        if (rc != 0)
            return rc;
        out[*count] = (gdu_rm_gpu){
            .gpu_id = ids.gpuIds[i], .domain = pci.domain, .bus = pci.bus, .device = pci.slot};
        (*count)++;
    }
    return 0;
}

int gdu_rm_p2p_caps(gdu_rm_client *c, uint32_t src_id, uint32_t dst_id, gdu_p2p_rm_caps *out,
                    char *why, size_t why_len)
{
    /* 8 KiB: too large for the stack of a library call. */
    gdu_nv0000_p2p_caps_v2_params *p = calloc(1, sizeof *p);
    if (p == NULL) {
        snprintf(why, why_len, "reading P2P caps: out of memory");
        return -ENOMEM;
    }
    p->gpuIds[0] = src_id;
    p->gpuIds[1] = dst_id;
    p->gpuCount = 2;
    int rc = gdu_rm_control(c, 0, GDU_NV0000_CTRL_CMD_SYSTEM_GET_P2P_CAPS_V2, p, sizeof *p, NULL,
                            "reading P2P caps", why, why_len);
    if (rc == 0) {
        out->caps = p->p2pCaps;
        memcpy(out->status, p->p2pCapsStatus, sizeof out->status);
        out->optimal_read_ces = p->p2pOptimalReadCEs;
        out->optimal_write_ces = p->p2pOptimalWriteCEs;
    }
    free(p);
    return rc;
}
