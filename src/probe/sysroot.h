/* Every file the probes read goes through a sysroot: a prefix ("/" on the live
 * machine, a captured tree with --sysroot DIR) and a record of each path read,
 * so that `doctor --capture` can copy exactly those files. Paths given to these
 * functions are absolute paths as they are on the examined machine. */
#ifndef GDUNLOCK_PROBE_SYSROOT_H
#define GDUNLOCK_PROBE_SYSROOT_H

#include <stdbool.h>
#include <stddef.h>

typedef struct gdu_sysroot {
    char root[4096]; /* "" for the live machine, else the captured tree without a trailing '/' */
    char **recorded; /* distinct paths read, in first-read order */
    size_t n_recorded, cap_recorded;
} gdu_sysroot;

/* root NULL or "/" means the live machine. Returns 0 or -ENAMETOOLONG. */
int gdu_sysroot_init(gdu_sysroot *sr, const char *root);
/* A sysroot must be a readable directory. Returns 0 (always, live) or -errno
 * with the reason ("... is not a directory") in why. */
int gdu_sysroot_check(const gdu_sysroot *sr, char *why, size_t why_len);
void gdu_sysroot_free(gdu_sysroot *sr);
bool gdu_sysroot_is_live(const gdu_sysroot *sr);

/* Writes root + path into out. Returns 0 or -ENAMETOOLONG. */
int gdu_sysroot_path(const gdu_sysroot *sr, const char *path, char *out, size_t len);

/* Adds a path to the record (for files read by a library, e.g. libpci). */
void gdu_sysroot_record(gdu_sysroot *sr, const char *path);

/* Symbolic links in a sysroot resolve inside it (absolute targets start at
 * its root, ".." stops there), as in a chroot: a replay reads only the capture. */

/* Reads a whole regular file (up to 1 MiB) as a NUL-terminated string; the
 * caller frees *text. Returns the length read or -errno: -EISDIR for a
 * directory, -EINVAL for anything else that is not a regular file (a FIFO, a
 * device), which is never opened. */
long gdu_sysroot_read(gdu_sysroot *sr, const char *path, char **text);

/* Reads a file's first line into buf, trailing whitespace removed. Returns 0 or -errno. */
int gdu_sysroot_read_line(gdu_sysroot *sr, const char *path, char *buf, size_t len);

/* true if the path exists (recorded either way, so a capture shows its absence too). */
bool gdu_sysroot_exists(gdu_sysroot *sr, const char *path);

/* The same for a file whose content must never travel (a private key) or
 * is of no use (a compiler): recorded as "PATH" GDU_SYSROOT_PRESENCE, for
 * which a capture holds an empty stand-in of the same kind. */
#define GDU_SYSROOT_PRESENCE "\tpresence"
bool gdu_sysroot_present(gdu_sysroot *sr, const char *path);

/* The target of a symbolic link, e.g. /sys/bus/pci/devices/X/driver. Returns 0 or -errno. */
int gdu_sysroot_readlink(gdu_sysroot *sr, const char *path, char *buf, size_t len);

/* The canonical path of path on the examined machine (symbolic links resolved
 * inside the sysroot), without the root prefix. Returns 0 or -errno. */
int gdu_sysroot_realpath(gdu_sysroot *sr, const char *path, char *buf, size_t len);

/* For files a library opens by itself under a sysroot (libpci): 0 when path
 * is absent, a regular file or a directory, and resolving it on this machine
 * leads where resolving it inside the sysroot does; -EXDEV when it leads
 * elsewhere (outside), -EINVAL when it is a FIFO, device or socket. 0 live. */
int gdu_sysroot_confined(gdu_sysroot *sr, const char *path);

/* Names in a directory, sorted, dot files left out; the caller frees with
 * gdu_sysroot_free_names. Returns the count or -errno. The record holds the
 * directory with a trailing '/': its entries' names were read. */
long gdu_sysroot_list(gdu_sysroot *sr, const char *dir, char ***names);
void gdu_sysroot_free_names(char **names, long n);

#endif
