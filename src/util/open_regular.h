/* Opening a file a user named, which may be anything: a FIFO without a peer
 * blocks a plain open() (and its reads and writes) forever, and a device can
 * become the controlling terminal; only a regular file is taken. */
#ifndef GDUNLOCK_UTIL_OPEN_REGULAR_H
#define GDUNLOCK_UTIL_OPEN_REGULAR_H

#include <stddef.h>
#include <sys/types.h>

/* What a file of this st_mode is, for messages: "a directory", "a FIFO", "a
 * character device", "a block device", "a socket", "a regular file", ... */
const char *gdu_file_kind(mode_t mode);

/* open(path, flags, mode) that never blocks and takes only a regular file:
 * opened with O_NONBLOCK and O_NOCTTY, checked with fstat, O_NONBLOCK taken
 * off again. The descriptor, or -errno with why: "PATH is a FIFO, not a
 * regular file" (-EISDIR for a directory, -EINVAL for the other kinds, also
 * where the open itself fails on them), else "cannot open PATH: ...". */
int gdu_open_regular(const char *path, int flags, mode_t mode, char *why, size_t len);

#endif
