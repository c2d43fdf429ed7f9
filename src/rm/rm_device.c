#include "rm/rm_device.h"

#include "driverabi/ctrl0000_gpu_id.h"
#include "driverabi/nv_classes.h"
#include "driverabi/nvos.h"

#include <string.h>

int gdu_rm_device_open(gdu_rm_client *c, uint32_t gpu_id, gdu_rm_device *d, uint32_t *status,
                       char *why, size_t why_len)
{
    gdu_nv0000_gpu_id_info_v2_params id = {.gpuId = gpu_id};
    memset(d, 0, sizeof *d);
    int rc = gdu_rm_control(c, 0, GDU_NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2, &id, sizeof id, status,
                            "reading the GPU's device instance", why, why_len);
    if (rc != 0)
        return rc;
    d->device_instance = id.deviceInstance;
    gdu_nv0080_alloc_params dev = {.deviceId = id.deviceInstance, .hClientShare = c->hclient};
    rc = gdu_rm_alloc(c, c->hclient, GDU_NV01_DEVICE_0, &dev, sizeof dev, &d->hdevice, status,
                      "allocating the device (NV01_DEVICE_0)", why, why_len);
    if (rc != 0)
        return rc;
    gdu_nv2080_alloc_params sub = {.subDeviceId = 0};
    rc = gdu_rm_alloc(c, d->hdevice, GDU_NV20_SUBDEVICE_0, &sub, sizeof sub, &d->hsubdevice, status,
                      "allocating the subdevice (NV20_SUBDEVICE_0)", why, why_len);
    if (rc != 0) {
        gdu_rm_free(c, c->hclient, d->hdevice);
        d->hdevice = 0;
    }
    return rc;
}

void gdu_rm_device_close(gdu_rm_client *c, gdu_rm_device *d)
{
    if (d->hdevice != 0)
        gdu_rm_free(c, c->hclient, d->hdevice); /* the subdevice goes with it */
    memset(d, 0, sizeof *d);
}
