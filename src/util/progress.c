#include "util/progress.h"
#include "util/clock.h"
#include "util/units.h"

#include <unistd.h>

void gdu_progress_start(gdu_progress *p)
{
    *p = (gdu_progress){
        .out = stderr, .tty = isatty(STDERR_FILENO), .start = gdu_now_seconds(), .last = -1};
}

/* "45s", "3m05s", "2h01m". */
static void duration(char *buf, size_t len, double seconds)
{
    unsigned long s = seconds < 0 ? 0 : (unsigned long)(seconds + 0.5);
    if (s < 60)
        snprintf(buf, len, "%lus", s);
    else if (s < 3600)
        snprintf(buf, len, "%lum%02lus", s / 60, s % 60);
    else
        snprintf(buf, len, "%luh%02lum", s / 3600, s / 60 % 60);
}

void gdu_progress_line(char *buf, size_t len, const char *task, uint64_t done, uint64_t total,
                       double rate, bool final)
{
    char d[32], t[32], speed[32] = "", left[48] = "";
    if (rate > 0)
        snprintf(speed, sizeof speed, "  %.2f GB/s", rate / 1e9);
    if (!final && rate > 0 && done < total) {
        duration(t, sizeof t, (double)(total - done) / rate);
        snprintf(left, sizeof left, "  ETA %s", t);
    }
    gdu_format_bytes(done, d, sizeof d);
    gdu_format_bytes(total, t, sizeof t);
    snprintf(buf, len, "%s %s / %s (%3.0f%%)%s%s", task, d, t,
             total ? 100.0 * (double)done / (double)total : 100.0, speed, left);
}

void gdu_progress_bytes(gdu_progress *p, const char *task, uint64_t done, uint64_t total,
                        bool final)
{
    double t = gdu_now_seconds();
    if ((p->task != NULL && task != p->task) || done < p->done) {
        p->start = t;
        p->start_done = done;
    }
    p->task = task;
    p->done = done;
    if (!final && !p->tty && p->last >= 0 && t - p->last < 1.0)
        return;
    p->last = t;
    char line[256];
    double seconds = t - p->start;
    double rate = seconds > 0 ? (double)(done - p->start_done) / seconds : 0;
    gdu_progress_line(line, sizeof line, task, done, total, rate, final);
    const char *prefix = p->prefix != NULL ? p->prefix : "";
    if (p->tty) /* back to the start, the line, then clear what a longer one left */
        fprintf(p->out, "\r%s%s\033[K%s", prefix, line, final ? "\n" : "");
    else
        fprintf(p->out, "%s%s\n", prefix, line);
    fflush(p->out);
}
