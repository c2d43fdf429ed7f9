#include "util/open_regular.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
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

/* The kernel's pseudo file systems: their files are made as they are read,
 * and their size (0, or a page) says nothing of what they hold. */
static const struct {
    unsigned long magic;
    const char *name;
} pseudo_fs[] = {
    {PROC_SUPER_MAGIC, "/proc (procfs)"}, {SYSFS_MAGIC, "/sys (sysfs)"},
    {DEBUGFS_MAGIC, "debugfs"},           {TRACEFS_MAGIC, "tracefs"},
    {SECURITYFS_MAGIC, "securityfs"},     {CGROUP_SUPER_MAGIC, "cgroupfs"},
    {CGROUP2_SUPER_MAGIC, "cgroup2fs"},   {BPF_FS_MAGIC, "bpffs"},
    {EFIVARFS_MAGIC, "efivarfs"},         {PSTOREFS_MAGIC, "pstore"},
};

/* The pseudo file system the file (fd, or path when fd < 0) lives on, or
 * NULL. */
static const char *pseudo_fs_of(const char *path, int fd)
{
    struct statfs fs;
    if ((fd >= 0 ? fstatfs(fd, &fs) : statfs(path, &fs)) != 0)
        return NULL;
    for (size_t i = 0; i < sizeof pseudo_fs / sizeof pseudo_fs[0]; i++)
        if ((unsigned long)fs.f_type == pseudo_fs[i].magic)
            return pseudo_fs[i].name;
    return NULL;
}

int gdu_data_file_check(const char *path, int fd, const struct stat *st, char *why, size_t len)
{
    if (!S_ISREG(st->st_mode)) {
        snprintf(why, len, "%s is %s, not a regular file", path, gdu_file_kind(st->st_mode));
        return S_ISDIR(st->st_mode) ? -EISDIR : -EINVAL;
    }
    const char *fs = pseudo_fs_of(path, fd);
    if (fs != NULL) {
        snprintf(why, len,
                 "%s is a file of %s, which the kernel makes as it is read (its size, %lld, is "
                 "not its content): not a data file",
                 path, fs, (long long)st->st_size);
        return -EINVAL;
    }
    return 0;
}

int gdu_data_file_why(const char *path, char *why, size_t len)
{
    struct stat st;
    return stat(path, &st) == 0 ? gdu_data_file_check(path, -1, &st, why, len) : 0;
}

int gdu_open_regular(const char *path, int flags, mode_t mode, char *why, size_t len)
{
    int fd = open(path, flags | O_NONBLOCK | O_NOCTTY, mode);
    struct stat st;
    if (fd < 0) {
        int err = errno;
        /* O_NONBLOCK makes a FIFO without a reader fail to open for writing
         * (ENXIO), O_DIRECT fails on it (EINVAL): say what is there. */
        int r = gdu_data_file_why(path, why, len);
        if (r != 0)
            return r;
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
    } else {
        r = gdu_data_file_check(path, fd, &st, why, len);
    }
    if (r == 0 && !(flags & O_NONBLOCK) &&
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
        r = -errno;
        snprintf(why, len, "%s: fcntl: %s", path, strerror(-r));
    }
    if (r != 0) {
        close(fd);
        return r;
    }
    return fd;
}
