/* A minimal RM client of our own on /dev/nvidiactl: one NV01_ROOT_CLIENT
 * and the escapes issued through it (controls, allocations, frees), each
 * RM refusal named by its NV_STATUS. Users: the machine's facts (P2P caps,
 * BAR1), the shim's report, the I/O engine and the BAR1 window study
 * (rm_bar1.h). The layer sits on the driver ABI alone and knows nothing of
 * its users: the calls it makes on its file are handed in (gdu_rm_calls). */
#ifndef GDUNLOCK_RM_RM_CLIENT_H
#define GDUNLOCK_RM_RM_CLIENT_H

#include <stddef.h>
#include <stdint.h>

typedef int (*gdu_rm_ioctl_fn)(int fd, unsigned long request, void *arg);

/* The ioctl and close the client makes on its control file, handed in by its
 * user, so that the client binds to none of its own: inside the shim, which
 * exports both, it would otherwise call the shim's. The shim hands libc's
 * ioctl (its own hook would wait for the lock its caller holds) and its own
 * close (which keeps its fd cache right); programs gdu_rm_kernel_calls;
 * tests a fake RM's. */
typedef struct gdu_rm_calls {
    gdu_rm_ioctl_fn ioctl_call;
    int (*close_call)(int fd);
} gdu_rm_calls;

/* ioctl(2) and close(2) as they are (rm_kernel.c). */
extern const gdu_rm_calls gdu_rm_kernel_calls;

typedef struct gdu_rm_client {
    int fd; /* the control file */
    uint32_t hclient;
    gdu_rm_calls calls;
} gdu_rm_client;

/* Opens ctl_path (NULL: /dev/nvidiactl) and allocates a root client whose
 * file takes the given calls (copied). Returns 0, or -errno with the cause in
 * why (-EIO when the RM refused, with the NV_STATUS by name). */
int gdu_rm_client_open(gdu_rm_client *client, const char *ctl_path, const gdu_rm_calls *calls,
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
