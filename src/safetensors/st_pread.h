/* Reading checkpoint files: pread of exactly len bytes, opening a regular
 * file without blocking, and what identifies the file a header was read
 * from. */
#ifndef GDUNLOCK_ST_PREAD_H
#define GDUNLOCK_ST_PREAD_H

#include "gdunlock/safetensors.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

/* Returns 0, a negative errno, or -ENODATA when the file ends first (EINTR
 * retried). */
int st_pread_full(int fd, void *buf, size_t len, uint64_t offset);

/* Opens a regular file for reading without blocking on anything else: the
 * open itself is non-blocking (a FIFO without a writer would block a plain
 * open forever), the type is checked with fstat, then the descriptor is made
 * blocking again. Returns the descriptor, -errno, or -EINVAL for a file that
 * is no data file (gdu_data_file_check: not a regular file, or one of /proc,
 * /sys and the like). */
int st_open_regular(const char *path);

/* The failure of st_open_regular(path) as a status: GDU_ST_ERR_TOO_MANY_FILES
 * at the open-file limit (with the limit and the fix), else GDU_ST_ERR_OPEN,
 * naming what the file is where it is no data file. */
gdu_st_status st_open_fail(gdu_st_error *err, const char *path, int rc);

/* What a file was when it was validated: a path opened again must still
 * name this file, unchanged. The change time is there because the
 * modification time can be put back after a rewrite in place (cp -p,
 * rsync --inplace -t) and the change time cannot. */
typedef struct st_identity {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    struct timespec ctime;
} st_identity;

/* fstat of fd into *id; 0 or -errno. */
int st_identity_of(int fd, st_identity *id);
/* Whether a and b are the same file, unchanged. */
int st_identity_equal(const st_identity *a, const st_identity *b);

#endif
