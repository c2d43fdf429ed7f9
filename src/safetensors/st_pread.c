#include "safetensors/st_pread.h"

#include <errno.h>
#include <unistd.h>

int st_pread_full(int fd, void *buf, size_t len, uint64_t offset)
{
    size_t done = 0;
    while (done < len) {
        ssize_t r = pread(fd, (char *)buf + done, len - done, (off_t)(offset + done));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            return -ENODATA;
        done += (size_t)r;
    }
    return 0;
}
