#include "unlock/unlock_exec.h"
#include "unlock/unlock_run.h"

#include "util/mkdirs.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Appends n bytes to the tail buffer, dropping its oldest bytes when full. */
static void keep_tail(char *out, size_t len, size_t *used, const char *buf, size_t n)
{
    if (len == 0)
        return;
    size_t cap = len - 1;
    if (n >= cap) {
        memcpy(out, buf + n - cap, cap);
        *used = cap;
    } else {
        if (*used + n > cap) {
            size_t drop = *used + n - cap;
            memmove(out, out + drop, *used - drop);
            *used -= drop;
        }
        memcpy(out + *used, buf, n);
        *used += n;
    }
    out[*used] = '\0';
}

int gdu_unlock_exec(char *const argv[], bool echo, char *out, size_t len)
{
    int fds[2];
    size_t used = 0;
    if (len > 0)
        out[0] = '\0';
    if (pipe2(fds, O_CLOEXEC) != 0)
        return -errno;
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        return -e;
    }
    if (pid == 0) {
        int null = open("/dev/null", O_RDONLY);
        if (null >= 0)
            dup2(null, STDIN_FILENO);
        dup2(fds[1], STDOUT_FILENO);
        dup2(fds[1], STDERR_FILENO);
        signal(SIGPIPE, SIG_DFL);
        execvp(argv[0], argv);
        dprintf(STDERR_FILENO, "%s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(fds[1]);
    char buf[4096];
    for (;;) {
        ssize_t n = read(fds[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        keep_tail(out, len, &used, buf, (size_t)n);
        if (echo && fwrite(buf, 1, (size_t)n, stderr) != (size_t)n)
            echo = false;
    }
    close(fds[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -errno;
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

void gdu_unlock_last_line(const char *text, char *line, size_t len)
{
    const char *end = text + strlen(text);
    while (end > text && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' '))
        end--;
    const char *start = end;
    while (start > text && start[-1] != '\n')
        start--;
    snprintf(line, len, "%.*s", (int)(end - start), start);
}

bool gdu_unlock_format(char *out, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, len, fmt, ap);
    va_end(ap);
    return n >= 0 && (size_t)n < len;
}

void gdu_unlock_argv_text(char *const argv[], char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; argv[i] != NULL && used < len; i++)
        used += (size_t)snprintf(out + used, len - used, "%s%s", i ? " " : "", argv[i]);
}

int gdu_unlock_write_file(const char *path, const char *text)
{
    char dir[PATH_MAX], tmp[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash != NULL && slash != dir) {
        *slash = '\0';
        int rc = gdu_mkdirs(dir);
        if (rc != 0)
            return rc;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp-%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    size_t n = strlen(text);
    ssize_t w = write(fd, text, n);
    int rc = w == (ssize_t)n ? 0 : w < 0 ? -errno : -ENOSPC;
    if (rc == 0 && fsync(fd) != 0)
        rc = -errno;
    if (close(fd) != 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && rename(tmp, path) != 0)
        rc = -errno;
    if (rc != 0)
        unlink(tmp);
    return rc;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path) != 0 && errno != ENOENT ? -1 : 0;
}

int gdu_unlock_remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0 : -errno;
    if (!S_ISDIR(st.st_mode))
        return unlink(path) == 0 ? 0 : -errno;
    return nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -errno;
}

int gdu_unlock_fail(gdu_unlock_error *err, int exit_code, const char *code, const char *fix,
                    const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    err->exit_code = exit_code;
    snprintf(err->code, sizeof err->code, "%s", code);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    snprintf(err->fix, sizeof err->fix, "%s", fix ? fix : "");
    va_end(ap);
    return -1;
}
