/* pread of exactly len bytes (EINTR retried). */
#ifndef GDUNLOCK_ST_PREAD_H
#define GDUNLOCK_ST_PREAD_H

#include <stddef.h>
#include <stdint.h>

/* Returns 0, a negative errno, or -ENODATA when the file ends first. */
int st_pread_full(int fd, void *buf, size_t len, uint64_t offset);

/* Opens a regular file for reading without blocking on anything else: the
 * open itself is non-blocking (a FIFO without a writer would block a plain
 * open forever), the type is checked with fstat, then the descriptor is made
 * blocking again. Returns the descriptor, -errno, or -EINVAL for a file that
 * is not a regular file. */
int st_open_regular(const char *path);

/* strerror for st_open_regular's results ("not a regular file" for -EINVAL). */
const char *st_open_error(int rc);

#endif
