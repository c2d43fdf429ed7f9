/* The calls an RM client makes outside the shim: the kernel's, as they are. */
#include "rm/rm_client.h"

#include <sys/ioctl.h>
#include <unistd.h>

static int kernel_ioctl(int fd, unsigned long request, void *arg)
{
    return ioctl(fd, request, arg);
}

const gdu_rm_calls gdu_rm_kernel_calls = {kernel_ioctl, close};
