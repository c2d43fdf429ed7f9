/* Opening a file a user named, which may be anything: a FIFO without a peer
 * blocks a plain open() (and its reads and writes) forever, and a device can
 * become the controlling terminal; only a regular file is taken. */
#ifndef GDUNLOCK_UTIL_OPEN_REGULAR_H
#define GDUNLOCK_UTIL_OPEN_REGULAR_H

#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

/* What a file of this st_mode is, for messages: "a directory", "a FIFO", "a
 * character device", "a block device", "a socket", "a regular file", ... */
const char *gdu_file_kind(mode_t mode);

/* Whether path (st, fd: its open descriptor, or -1 to look path up) is a
 * data file: 0 for a regular file on a real file system; else -EISDIR (a
 * directory) or -EINVAL with why: "PATH is a FIFO, not a regular file" (a
 * socket, a device, ...), or "PATH is a file of /proc (procfs), which the
 * kernel makes as it is read ...: not a data file" (sysfs, debugfs and the
 * kernel's other pseudo file systems too, by statfs's f_type). */
int gdu_data_file_check(const char *path, int fd, const struct stat *st, char *why, size_t len);

/* gdu_data_file_check of path as stat finds it now: why an open of it
 * failed, where it is no data file (a socket's open fails with ENXIO).
 * 0 where it is one, or cannot be looked up. */
int gdu_data_file_why(const char *path, char *why, size_t len);

/* open(path, flags, mode) that never blocks and takes only a data file:
 * opened with O_NONBLOCK and O_NOCTTY, checked with fstat and fstatfs
 * (gdu_data_file_check), O_NONBLOCK taken off again. The descriptor, or
 * -errno with why: gdu_data_file_check's (also where the open itself
 * fails on such a file), else "cannot open PATH: ...". */
int gdu_open_regular(const char *path, int flags, mode_t mode, char *why, size_t len);

#endif
