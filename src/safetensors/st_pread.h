/* pread of exactly len bytes (EINTR retried). */
#ifndef GDUNLOCK_ST_PREAD_H
#define GDUNLOCK_ST_PREAD_H

#include <stddef.h>
#include <stdint.h>

/* Returns 0, a negative errno, or -ENODATA when the file ends first. */
int st_pread_full(int fd, void *buf, size_t len, uint64_t offset);

#endif
