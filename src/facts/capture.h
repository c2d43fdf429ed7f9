/* doctor --capture: a snapshot (facts/snapshot.h) written out. Every file
 * it was taken from is copied into a directory, symbolic links included so
 * that sysfs's device paths resolve the same way; the live answers go to
 * DIR/gdunlock-live.json and the list of files to DIR/gdunlock-files.txt.
 * The result replays with --sysroot DIR to the same snapshot. A file whose
 * presence alone was asked (GDU_SYSROOT_PRESENCE: a signing key, a
 * compiler) is written empty: its content never leaves the machine. */
#ifndef GDUNLOCK_FACTS_CAPTURE_H
#define GDUNLOCK_FACTS_CAPTURE_H

#include "facts/snapshot.h"

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

/* The list of the files a capture holds, one absolute path a line. */
#define GDU_CAPTURE_FILES "gdunlock-files.txt"

/* Writes s into dir: its files, copied from where it was taken (the live
 * machine or another capture, whose gdunlock-live.json is then one of the
 * files), the live answers of a live snapshot, and the file list. Returns
 * 0, or -errno with the reason (the directory cannot be created, the JSON
 * or a copy cannot be written). Files that vanish or cannot be read (or
 * are no regular files) are counted, not fatal. */
int gdu_capture_write(const gdu_snapshot *s, const char *dir, gdu_capture_stats *stats, char *why,
                      size_t why_len);

#endif
