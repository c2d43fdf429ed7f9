/* A minimal RM client of our own on /dev/nvidiactl: one NV01_ROOT_CLIENT
 * and the escapes issued through it (controls, allocations, frees), each
 * RM refusal named by its NV_STATUS. The ioctl function is injectable for
 * tests. Users: the P2P caps (rm_p2p_caps.h) and the BAR1 window study
 * (rm_bar1.h). */
#ifndef GDUNLOCK_FACTS_RM_CLIENT_H
#define GDUNLOCK_FACTS_RM_CLIENT_H

#include <stddef.h>
#include <stdint.h>

typedef int (*gdu_rm_ioctl_fn)(int fd, unsigned long request, void *arg);

typedef struct gdu_rm_client {
    int fd; /* the control file */
    uint32_t hclient;
    gdu_rm_ioctl_fn ioctl_fn;
} gdu_rm_client;

/* Opens ctl_path (NULL: /dev/nvidiactl) and allocates a root client. ioctl_fn
 * NULL uses the real ioctl. Returns 0, or -errno with the cause in why
 * (-EIO when the RM refused, with the NV_STATUS by name). */
int gdu_rm_client_open(gdu_rm_client *client, const char *ctl_path, gdu_rm_ioctl_fn ioctl_fn,
                       char *why, size_t why_len);

/* Frees the client and closes the file. Safe on a client that failed to open. */
void gdu_rm_client_close(gdu_rm_client *client);

/* Escape nr with its parameter block on fd (a /dev/nvidia* file; -1: the
 * client's control file). Returns 0, or -errno when the ioctl itself failed
 * (with what and the errno in why). The block's status is the caller's. */
int gdu_rm_escape(gdu_rm_client *client, int fd, unsigned nr, void *block, size_t size,
                  const char *what, char *why, size_t why_len);

/* RM_CONTROL cmd on hobject (0: the client itself). Returns 0, -errno, or
 * -EIO when RM refused; *status (may be NULL) gets RM's status. */
int gdu_rm_control(gdu_rm_client *client, uint32_t hobject, uint32_t cmd, void *params,
                   uint32_t size, uint32_t *status, const char *what, char *why, size_t why_len);

/* RM_ALLOC (NVOS21) of hclass under hparent with its allocation parameters;
 * RM picks the handle and *hnew receives it. Returns as gdu_rm_control. */
int gdu_rm_alloc(gdu_rm_client *client, uint32_t hparent, uint32_t hclass, void *params,
                 uint32_t size, uint32_t *hnew, uint32_t *status, const char *what, char *why,
                 size_t why_len);

/* RM_FREE of hobject (and all below it). Returns as gdu_rm_control; *status
 * (may be NULL) gets RM's status. */
int gdu_rm_free_checked(gdu_rm_client *client, uint32_t hparent, uint32_t hobject, uint32_t *status,
                        const char *what, char *why, size_t why_len);

/* The same, best effort, for teardown. */
void gdu_rm_free(gdu_rm_client *client, uint32_t hparent, uint32_t hobject);

#endif
