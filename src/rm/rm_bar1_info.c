#include "rm/rm_bar1_info.h"

#include "driverabi/ctrl2080_fb.h"
#include "rm/rm_device.h"
#include "rm/rm_p2p_caps.h"
#include "util/pci_addr.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int gdu_rm_bar1_query(gdu_rm_client *c, uint32_t gpu_id, gdu_rm_bar1 *out, uint32_t *status,
                      char *why, size_t why_len)
{
    memset(out, 0, sizeof *out);
    gdu_rm_device d;
    int rc = gdu_rm_device_open(c, gpu_id, &d, status, why, why_len);
    if (rc != 0)
        return rc;
    gdu_nv2080_fb_get_info_v2_params p = {
        .fbInfoListSize = 2,
        .fbInfoList = {{GDU_NV2080_CTRL_FB_INFO_INDEX_BAR1_SIZE, 0},
                       {GDU_NV2080_CTRL_FB_INFO_INDEX_BAR1_AVAIL_SIZE, 0}},
    };
    rc = gdu_rm_control(c, d.hsubdevice, GDU_NV2080_CTRL_CMD_FB_GET_INFO_V2, &p, sizeof p, status,
                        "reading BAR1's size and use (NV2080_CTRL_CMD_FB_GET_INFO_V2)", why,
                        why_len);
    gdu_nv2080_fb_static_bar1_info_params st = {0};
    char ignored[64];
    uint32_t st_status = 0;
    if (rc == 0 &&
        gdu_rm_control(c, d.hsubdevice, GDU_NV2080_CTRL_CMD_FB_GET_STATIC_BAR1_INFO, &st, sizeof st,
                       &st_status, "reading the static BAR1", ignored, sizeof ignored) == 0) {
        out->static_known = true;
        out->static_enabled = st.bStaticBar1Enabled != 0;
        out->write_combined = st.bStaticBar1WriteCombined != 0;
        out->static_size = st.bStaticBar1Enabled ? st.staticBar1Size : 0;
    }
    gdu_rm_device_close(c, &d);
    if (rc != 0)
        return rc;
    /* RM answers 0 where it could not count (kern_mem_sys_ctrl.c:294-297). */
    if (p.fbInfoList[0].data == 0) {
        snprintf(why, why_len, "RM reports no BAR1 size for GPU 0x%x", gpu_id);
        return -ENODATA;
    }
    out->total = (uint64_t)p.fbInfoList[0].data << 10;
    out->available = (uint64_t)p.fbInfoList[1].data << 10;
    return 0;
}

int gdu_rm_bar1_of(const char *addr, const gdu_rm_calls *calls, gdu_rm_bar1 *out, char *why,
                   size_t why_len)
{
    char want[GDU_PCI_ADDR_SIZE];
    memset(out, 0, sizeof *out);
    if (gdu_pci_addr_normalize(addr, want, sizeof want) != 0) {
        snprintf(why, why_len, "'%s' is no PCI address", addr);
        return -EINVAL;
    }
    gdu_rm_client client;
    int rc = gdu_rm_client_open(&client, NULL, calls, why, why_len);
    if (rc != 0)
        return rc;
    gdu_rm_gpu gpus[GDU_RM_MAX_GPUS];
    size_t n = 0;
    rc = gdu_rm_attached_gpus(&client, gpus, GDU_RM_MAX_GPUS, &n, why, why_len);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        char have[GDU_PCI_ADDR_SIZE];
        gdu_pci_addr_format(have, sizeof have, gpus[i].domain, gpus[i].bus, gpus[i].device, 0);
        if (strcmp(have, want) == 0) {
            uint32_t status = 0;
            rc = gdu_rm_bar1_query(&client, gpus[i].gpu_id, out, &status, why, why_len);
            gdu_rm_client_close(&client);
            return rc;
        }
    }
    if (rc == 0) {
        snprintf(why, why_len, "the RM has no GPU at %s attached (no CUDA context on it?)", want);
        rc = -ENODEV;
    }
    gdu_rm_client_close(&client);
    return rc;
}
