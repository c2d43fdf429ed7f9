#include "rm/rm_client.h"

#include "driverabi/nv_classes.h"
#include "driverabi/nv_escape.h"
#include "driverabi/nv_status.h"
#include "driverabi/nvos.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

int gdu_rm_escape(gdu_rm_client *c, int fd, unsigned nr, void *block, size_t size, const char *what,
                  char *why, size_t why_len)
{
    int rc;
    do
        rc = c->calls.ioctl_call(fd < 0 ? c->fd : fd, gdu_nv_ioctl_request(nr, size), block);
    while (rc < 0 && errno == EINTR);
    if (rc < 0) {
        int err = errno ? errno : EIO;
        snprintf(why, why_len, "%s: ioctl failed: %s", what, strerror(err));
        return -err;
    }
    return 0;
}

/* RM's status of a call that reached it: 0, or -EIO with the status named. */
static int rm_status(uint32_t got, uint32_t *status, const char *what, char *why, size_t why_len)
{
    if (status != NULL)
        *status = got;
    if (got == GDU_NV_OK)
        return 0;
    snprintf(why, why_len, "%s: RM returned %s", what, gdu_nv_status_name(got));
    return -EIO;
}

int gdu_rm_control(gdu_rm_client *c, uint32_t hobject, uint32_t cmd, void *params, uint32_t size,
                   uint32_t *status, const char *what, char *why, size_t why_len)
{
    gdu_nvos54 p = {
        .hClient = c->hclient,
        .hObject = hobject ? hobject : c->hclient,
        .cmd = cmd,
        .params = (uint64_t)(uintptr_t)params,
        .paramsSize = size,
    };
    int rc = gdu_rm_escape(c, -1, GDU_NV_ESC_RM_CONTROL, &p, sizeof p, what, why, why_len);
    return rc != 0 ? rc : rm_status(p.status, status, what, why, why_len);
}

int gdu_rm_alloc(gdu_rm_client *c, uint32_t hparent, uint32_t hclass, void *params, uint32_t size,
                 uint32_t *hnew, uint32_t *status, const char *what, char *why, size_t why_len)
{
    /* hObjectNew 0: RM generates the handle and writes it back. */
    gdu_nvos21 p = {
        .hRoot = c->hclient,
        .hObjectParent = hparent,
        .hClass = hclass,
        .pAllocParms = (uint64_t)(uintptr_t)params,
        .paramsSize = size,
    };
    int rc = gdu_rm_escape(c, -1, GDU_NV_ESC_RM_ALLOC, &p, sizeof p, what, why, why_len);
    if (rc == 0)
        rc = rm_status(p.status, status, what, why, why_len);
    if (rc == 0 && p.hObjectNew == 0) {
        snprintf(why, why_len, "%s: RM returned no handle", what);
        rc = -EIO;
    }
    *hnew = rc == 0 ? p.hObjectNew : 0;
    return rc;
}

int gdu_rm_free_checked(gdu_rm_client *c, uint32_t hparent, uint32_t hobject, uint32_t *status,
                        const char *what, char *why, size_t why_len)
{
    gdu_nvos00 p = {.hRoot = c->hclient, .hObjectParent = hparent, .hObjectOld = hobject};
    int rc = gdu_rm_escape(c, -1, GDU_NV_ESC_RM_FREE, &p, sizeof p, what, why, why_len);
    return rc != 0 ? rc : rm_status(p.status, status, what, why, why_len);
}

void gdu_rm_free(gdu_rm_client *c, uint32_t hparent, uint32_t hobject)
{
    char ignored[8];
    gdu_rm_free_checked(c, hparent, hobject, NULL, "", ignored, sizeof ignored);
}

int gdu_rm_client_open(gdu_rm_client *c, const char *ctl_path, const gdu_rm_calls *calls, char *why,
                       size_t why_len)
{
    c->hclient = 0;
    c->calls = *calls;
    if (ctl_path == NULL)
        ctl_path = "/dev/nvidiactl";
    c->fd = open(ctl_path, O_RDWR | O_CLOEXEC);
    if (c->fd < 0) {
        int err = errno;
        snprintf(why, why_len, "cannot open %s: %s%s", ctl_path, strerror(err),
                 err == ENOENT ? " (no NVIDIA kernel driver loaded)" : "");
        return -err;
    }
    /* A client is its own root: hRoot and hObjectParent 0. */
    gdu_nvos21 alloc = {.hClass = GDU_NV01_ROOT_CLIENT};
    int rc = gdu_rm_escape(c, -1, GDU_NV_ESC_RM_ALLOC, &alloc, sizeof alloc,
                           "allocating an RM client", why, why_len);
    if (rc == 0)
        rc = rm_status(alloc.status, NULL, "allocating an RM client", why, why_len);
    if (rc == 0 && alloc.hObjectNew == 0) {
        snprintf(why, why_len, "allocating an RM client: RM returned no handle");
        rc = -EIO;
    }
    if (rc != 0) {
        c->calls.close_call(c->fd);
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
    /* Closing the file frees the client anyway; this only makes it prompt. */
    if (c->hclient != 0)
        gdu_rm_free(c, 0, c->hclient);
    c->calls.close_call(c->fd);
    c->fd = -1;
    c->hclient = 0;
}
