#include "util/open_regular.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *gdu_file_kind(mode_t mode)
{
    return S_ISREG(mode)    ? "a regular file"
           : S_ISDIR(mode)  ? "a directory"
           : S_ISFIFO(mode) ? "a FIFO"
           : S_ISCHR(mode)  ? "a character device"
           : S_ISBLK(mode)  ? "a block device"
           : S_ISSOCK(mode) ? "a socket"
           : S_ISLNK(mode)  ? "a symbolic link"
                            : "of an unknown type";
}

static int not_regular(const char *path, mode_t mode, char *why, size_t len)
{
    snprintf(why, len, "%s is %s, not a regular file", path, gdu_file_kind(mode));
    return S_ISDIR(mode) ? -EISDIR : -EINVAL;
}

int gdu_open_regular(const char *path, int flags, mode_t mode, char *why, size_t len)
{
    int fd = open(path, flags | O_NONBLOCK | O_NOCTTY, mode);
    struct stat st;
    if (fd < 0) {
        int err = errno;
        /* O_NONBLOCK makes a FIFO without a reader fail to open for writing
         * (ENXIO), O_DIRECT fails on it (EINVAL): say what is there. */
        if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
            return not_regular(path, st.st_mode, why, len);
        snprintf(why, len, "cannot open %s: %s%s", path, strerror(err),
                 err == EMFILE || err == ENFILE
                     ? " (the process's open-file limit: raise it with ulimit -n)"
                     : "");
        return -err;
    }
    int r = 0;
    if (fstat(fd, &st) != 0) {
        r = -errno;
        snprintf(why, len, "cannot stat %s: %s", path, strerror(-r));
    } else if (!S_ISREG(st.st_mode)) {
        r = not_regular(path, st.st_mode, why, len);
    } else if (!(flags & O_NONBLOCK) && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
        r = -errno;
        snprintf(why, len, "%s: fcntl: %s", path, strerror(-r));
    }
    if (r != 0) {
        close(fd);
        return r;
    }
    return fd;
}
