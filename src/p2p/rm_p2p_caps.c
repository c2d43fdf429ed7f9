#include "p2p/rm_p2p_caps.h"

#include "driverabi/ctrl0000_gpu.h"
#include "driverabi/nv_classes.h"
#include "driverabi/nv_escape.h"
#include "driverabi/nv_status.h"
#include "driverabi/nvos.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

static int real_ioctl(int fd, unsigned long request, void *arg)
{
    return ioctl(fd, request, arg);
}

/* Issues one escape; returns 0, or -errno when the ioctl itself failed. */
static int escape(gdu_rm_client *c, unsigned nr, void *block, size_t size, const char *what,
                  char *why, size_t why_len)
{
    int rc;
    do
        rc = c->ioctl_fn(c->fd, gdu_nv_ioctl_request(nr, size), block);
    while (rc < 0 && errno == EINTR);
    if (rc < 0) {
        int err = errno ? errno : EIO;
        snprintf(why, why_len, "%s: ioctl failed: %s", what, strerror(err));
        return -err;
    }
    return 0;
}

static int control(gdu_rm_client *c, uint32_t cmd, void *params, uint32_t size, const char *what,
                   char *why, size_t why_len)
{
    gdu_nvos54 p = {
        .hClient = c->hclient,
        .hObject = c->hclient,
        .cmd = cmd,
        .params = (uint64_t)(uintptr_t)params,
        .paramsSize = size,
    };
    int rc = escape(c, GDU_NV_ESC_RM_CONTROL, &p, sizeof p, what, why, why_len);
    if (rc != 0)
        return rc;
    if (p.status != GDU_NV_OK) {
        snprintf(why, why_len, "%s: RM returned %s", what, gdu_nv_status_name(p.status));
        return -EIO;
    }
    return 0;
}

int gdu_rm_client_open(gdu_rm_client *c, const char *ctl_path, gdu_rm_ioctl_fn ioctl_fn,
                       char *why, size_t why_len)
{
    c->hclient = 0;
    c->ioctl_fn = ioctl_fn ? ioctl_fn : real_ioctl;
    if (ctl_path == NULL)
        ctl_path = "/dev/nvidiactl";
    c->fd = open(ctl_path, O_RDWR | O_CLOEXEC);
    if (c->fd < 0) {
        int err = errno;
        snprintf(why, why_len, "cannot open %s: %s%s", ctl_path, strerror(err),
                 err == ENOENT ? " (no NVIDIA kernel driver loaded)" : "");
        return -err;
    }
    /* hObjectNew 0: the RM generates the client handle and writes it back. */
    gdu_nvos21 alloc = {.hClass = GDU_NV01_ROOT_CLIENT};
    int rc = escape(c, GDU_NV_ESC_RM_ALLOC, &alloc, sizeof alloc, "allocating an RM client", why,
                    why_len);
    if (rc == 0 && alloc.status != GDU_NV_OK) {
        snprintf(why, why_len, "allocating an RM client: RM returned %s",
                 gdu_nv_status_name(alloc.status));
        rc = -EIO;
    }
    if (rc == 0 && alloc.hObjectNew == 0) {
        snprintf(why, why_len, "allocating an RM client: RM returned no handle");
        rc = -EIO;
    }
    if (rc != 0) {
        close(c->fd);
        c->fd = -1;
        return rc;
    }
    c->hclient = alloc.hObjectNew;
    return 0;
}

void gdu_rm_client_close(gdu_rm_client *c)
{
    if (c->fd < 0)
        return;
    if (c->hclient != 0) {
        gdu_nvos00 p = {.hRoot = c->hclient, .hObjectOld = c->hclient};
        char ignored[8];
        /* Closing the file frees the client anyway; this only makes it prompt. */
        escape(c, GDU_NV_ESC_RM_FREE, &p, sizeof p, "", ignored, sizeof ignored);
    }
    close(c->fd);
    c->fd = -1;
    c->hclient = 0;
}

int gdu_rm_attached_gpus(gdu_rm_client *c, gdu_rm_gpu *out, size_t cap, size_t *count, char *why,
                         size_t why_len)
{
    gdu_nv0000_attached_ids_params ids;
    memset(&ids, 0xff, sizeof ids);
    *count = 0;
    int rc = control(c, GDU_NV0000_CTRL_CMD_GPU_GET_ATTACHED_IDS, &ids, sizeof ids,
                     "listing attached GPUs", why, why_len);
    if (rc != 0)
        return rc;
    for (size_t i = 0; i < GDU_NV0000_GPU_MAX_ATTACHED_GPUS && *count < cap; i++) {
        if (ids.gpuIds[i] == GDU_NV0000_GPU_INVALID_ID)
            break;
        gdu_nv0000_pci_info_params pci = {.gpuId = ids.gpuIds[i]};
        rc = control(c, GDU_NV0000_CTRL_CMD_GPU_GET_PCI_INFO, &pci, sizeof pci,
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
    int rc = control(c, GDU_NV0000_CTRL_CMD_SYSTEM_GET_P2P_CAPS_V2, p, sizeof *p,
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
