/* doctor --capture: copies every file the probes read on the live machine
 * (the sysroot's record) into a directory, symbolic links included so that
 * sysfs's device paths resolve the same way, and writes the live answers to
 * DIR/gdunlock-live.json. The result replays with --sysroot DIR. */
#ifndef GDUNLOCK_PROBE_CAPTURE_H
#define GDUNLOCK_PROBE_CAPTURE_H

#include "probe/live.h"
#include "probe/sysroot.h"

#include <stddef.h>

typedef struct gdu_capture_stats {
    size_t files, links, missing, failed;
} gdu_capture_stats;

/* sr must be the live sysroot. Returns 0, or -errno with the reason (the
 * directory cannot be created, the JSON cannot be written). Files that vanish
 * or cannot be read are counted, not fatal. */
int gdu_capture_write(const gdu_sysroot *sr, const gdu_live *live, const char *dir,
                      gdu_capture_stats *stats, char *why, size_t why_len);

#endif
