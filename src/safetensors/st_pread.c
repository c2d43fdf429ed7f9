#include "safetensors/st_pread.h"
#include "safetensors/st_error.h"
#include "util/open_regular.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
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

int st_open_regular(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return -errno;
    struct stat st;
    char why[8]; /* st_open_fail says why, from the path */
    int rc = 0;
    if (fstat(fd, &st) != 0)
        rc = -errno;
    else if (gdu_data_file_check(path, fd, &st, why, sizeof why) != 0)
        rc = -EINVAL; /* a directory too: the loader names it as it names any other */
    else if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0)
        rc = -errno;
    if (rc != 0) {
        close(fd);
        return rc;
    }
    return fd;
}

gdu_st_status st_open_fail(gdu_st_error *err, const char *path, int rc)
{
    if (rc == -EMFILE || rc == -ENFILE) {
        struct rlimit lim = {0, 0};
        getrlimit(RLIMIT_NOFILE, &lim);
        return st_fail(err, GDU_ST_ERR_TOO_MANY_FILES,
                       "%s: %s (this process may open %llu files): raise the limit (ulimit -n) or "
                       "close files the process keeps open",
                       path, strerror(-rc), (unsigned long long)lim.rlim_cur);
    }
    char why[512];
    if ((rc == -EINVAL || rc == -ENXIO) && gdu_data_file_why(path, why, sizeof why) != 0)
        return st_fail(err, GDU_ST_ERR_OPEN, "%s", why); /* ENXIO: a socket's open */
    return st_fail(err, GDU_ST_ERR_OPEN, "%s: %s", path, strerror(-rc));
}

int st_identity_of(int fd, st_identity *id)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return -errno;
    *id = (st_identity){st.st_dev, st.st_ino, st.st_size, st.st_mtim, st.st_ctim};
    return 0;
}

int st_identity_equal(const st_identity *a, const st_identity *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec &&
           a->ctime.tv_sec == b->ctime.tv_sec && a->ctime.tv_nsec == b->ctime.tv_nsec;
}
