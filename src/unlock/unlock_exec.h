/* The runner's hands: running a program and keeping the tail of what it
 * said, writing a file whole or not at all, removing a tree. Internal to
 * src/unlock. */
#ifndef GDUNLOCK_UNLOCK_UNLOCK_EXEC_H
#define GDUNLOCK_UNLOCK_UNLOCK_EXEC_H

#include "util/exit_codes.h"

#include <stdbool.h>
#include <stddef.h>

/* Runs argv[0] (looked up in PATH) with argv, stdin from /dev/null, its
 * stdout and stderr together into out (the last len - 1 bytes, NUL-ended);
 * echo also copies them to this process's stderr as they come. Returns the
 * exit status, 128 + the signal that ended it, 127 when it could not be
 * started (out says why), or -errno. */
int gdu_unlock_exec(char *const argv[], bool echo, char *out, size_t len);

/* The last non-empty line of text, into line. */
void gdu_unlock_last_line(const char *text, char *line, size_t len);

/* vsnprintf into out; false when it did not fit (out then holds what did). */
__attribute__((format(printf, 3, 4))) bool gdu_unlock_format(char *out, size_t len, const char *fmt,
                                                             ...);

/* argv joined with spaces, for the steps shown to the user. */
void gdu_unlock_argv_text(char *const argv[], char *out, size_t len);

/* Writes text to path under a temporary name in the same folder and renames
 * it over path (folders made as needed, mode 0644). Returns 0 or -errno. */
int gdu_unlock_write_file(const char *path, const char *text);

/* Removes path and everything under it (links not followed); absent is 0. */
int gdu_unlock_remove_tree(const char *path);

/* Fills err (exit status, a GDU_EXIT_ value; stable code, fix or NULL,
 * message); returns -1. */
struct gdu_unlock_error;
__attribute__((format(printf, 5, 6))) int gdu_unlock_fail(struct gdu_unlock_error *err,
                                                          int exit_code, const char *code,
                                                          const char *fix, const char *fmt, ...);

#endif
