/* doctor --capture: copies every file the probes read on the live machine
 * (the sysroot's record) into a directory, symbolic links included so that
 * sysfs's device paths resolve the same way, and writes the live answers to
 * DIR/gdunlock-live.json. The result replays with --sysroot DIR. */
#ifndef GDUNLOCK_FACTS_CAPTURE_H
#define GDUNLOCK_FACTS_CAPTURE_H

#include "facts/live.h"
#include "probe/sysroot.h"

#include <stddef.h>

typedef struct gdu_capture_stats {
    size_t files, links, missing, failed;
    size_t
        unwritten; /* copies, folders, links that could not be written: the capture is incomplete */
} gdu_capture_stats;

/* Before probing: creates dir, or accepts it when it exists and is empty.
 * Returns 0, -EEXIST when it holds anything (a capture there would keep the
 * old files), or -errno when it cannot be created or read; why says which. */
int gdu_capture_prepare(const char *dir, char *why, size_t why_len);

/* sr must be the live sysroot. Returns 0, or -errno with the reason (the
 * directory cannot be created, the JSON or a copy cannot be written). Files
 * that vanish or cannot be read (or are no regular files) are counted, not fatal. */
int gdu_capture_write(const gdu_sysroot *sr, const gdu_live *live, const char *dir,
                      gdu_capture_stats *stats, char *why, size_t why_len);

#endif
