/* What libcufile wrote to its log during the run. Its messages carry the
 * cause behind a bare status number (for 5027 on the H200 machine: the udev
 * property of the block device it could not find). CUFILE_LOGFILE_PATH, when
 * the user has not set it, points the log at a temporary file for the run;
 * otherwise only what was appended to the user's log during the run is read. */
#include "verify/verify_internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOG_TAIL_LINES 4

void gdu_verify_cufile_log_begin(gdu_verify_cufile_log *log)
{
    memset(log, 0, sizeof *log);
    const char *user = getenv("CUFILE_LOGFILE_PATH");
    if (user && *user) {
        snprintf(log->path, sizeof log->path, "%s", user);
        struct stat st;
        log->start = stat(user, &st) == 0 ? st.st_size : 0;
        return;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(log->path, sizeof log->path, "%s/gdunlock-cufile-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int fd = mkstemp(log->path);
    if (fd < 0) {
        log->path[0] = '\0';
        return;
    }
    close(fd);
    log->ours = true;
    setenv("CUFILE_LOGFILE_PATH", log->path, 1);
}

/* The last LOG_TAIL_LINES non-empty lines written since begin, joined with " | ". */
void gdu_verify_cufile_log_end(gdu_verify_cufile_log *log, char *out, size_t len)
{
    out[0] = '\0';
    if (!log->path[0])
        return;
    /* The user's log may be a terminal or a pipe (/dev/stderr): only a
     * regular file is read back, opened without blocking. */
    int fd = open(log->path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
        close(fd);
        fd = -1;
    }
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (f == NULL && fd >= 0)
        close(fd);
    if (f && fseeko(f, log->start, SEEK_SET) == 0) {
        char lines[LOG_TAIL_LINES][GDU_VERIFY_TEXT];
        size_t n = 0;
        char line[1024];
        while (fgets(line, sizeof line, f)) {
            line[strcspn(line, "\r\n")] = '\0';
            if (!line[0])
                continue;
            snprintf(lines[n % LOG_TAIL_LINES], sizeof lines[0], "%.*s", (int)sizeof lines[0] - 1,
                     line);
            n++;
        }
        size_t first = n > LOG_TAIL_LINES ? n - LOG_TAIL_LINES : 0;
        size_t used = 0;
        for (size_t i = first; i < n && used + 1 < len; i++) {
            int w = snprintf(out + used, len - used, "%s%s", used ? " | " : "",
                             lines[i % LOG_TAIL_LINES]);
            used += w > 0 ? (size_t)w : 0;
        }
    }
    if (f)
        fclose(f);
    if (log->ours) {
        unlink(log->path);
        unsetenv("CUFILE_LOGFILE_PATH");
    }
}
