/* The progress line of a command moving bytes (load, bench) on stderr:
 *   loading 3.00 GiB / 8.00 GiB ( 37%)  2.41 GB/s  ETA 2s
 * On a terminal the line is rewritten in place and cleared to its end each
 * time, so a shorter line leaves nothing of a longer one; elsewhere
 * (--progress into a file or pipe) a line at most every second, and the
 * last, each ending with a newline. */
#ifndef GDUNLOCK_UTIL_PROGRESS_H
#define GDUNLOCK_UTIL_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct {
    FILE *out;
    const char *prefix;  /* before the task's name ("bench: "); NULL none */
    bool tty;            /* out is a terminal: one line, rewritten */
    double start;        /* when the rate's count began (seconds, monotonic) */
    uint64_t start_done; /* the bytes done then */
    double last;         /* when a line was last written; < 0 none yet */
    const char *task;    /* the task of the last line */
    uint64_t done;       /* its bytes so far */
} gdu_progress;

/* Progress on stderr; the first task's bytes count from now. */
void gdu_progress_start(gdu_progress *p);

/* The task's bytes done of total; final ends the line. A new task (another
 * string, or done going back) counts its rate from its first report. */
void gdu_progress_bytes(gdu_progress *p, const char *task, uint64_t done, uint64_t total,
                        bool final);

/* The line itself (no \r, no newline): the task, done / total, percent,
 * rate (bytes/s; none when <= 0) and, until final, the time left. */
void gdu_progress_line(char *buf, size_t len, const char *task, uint64_t done, uint64_t total,
                       double rate, bool final);

#endif
