/* Finding libgdunlock.so, preloading it into a child, and reading one of
 * its reports. */
#include "launch/launch.h"
#include "util/open_regular.h"

#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool gdu_launch_find_shim_in(const char *exe, const char *libdir, char *shim, size_t len)
{
    char dir[PATH_MAX], next_to[PATH_MAX + 32], installed[2 * PATH_MAX + 32] = "";
    snprintf(dir, sizeof dir, "%s", exe);
    char *slash = strrchr(dir, '/');
    if (slash != NULL)
        *slash = '\0';
    const char *bin = slash != NULL ? dir : ".";
    snprintf(next_to, sizeof next_to, "%s/../lib/libgdunlock.so", bin);
    if (access(next_to, R_OK) == 0) {
        snprintf(shim, len, "%s", next_to);
        return true;
    }
    if (libdir != NULL && libdir[0] != '\0') {
        if (libdir[0] == '/')
            snprintf(installed, sizeof installed, "%s/libgdunlock.so", libdir);
        else
            snprintf(installed, sizeof installed, "%s/../%s/libgdunlock.so", bin, libdir);
        if (access(installed, R_OK) == 0) {
            snprintf(shim, len, "%s", installed);
            return true;
        }
    }
    /* A relative libdir of "lib" is the same place as ../lib: named once. */
    bool two = installed[0] != '\0' && strcmp(installed, next_to) != 0;
    snprintf(shim, len, "%s%s%s", next_to, two ? " or " : "", two ? installed : "");
    return false;
}

bool gdu_launch_find_shim(char *shim, size_t len, char *exe, size_t exe_len)
{
    ssize_t n = readlink("/proc/self/exe", exe, exe_len - 1);
    if (n <= 0) {
        snprintf(shim, len, "(the path of this program is unknown)");
        return false;
    }
    exe[n] = '\0';
    return gdu_launch_find_shim_in(exe, GDUNLOCK_INSTALL_LIBDIR, shim, len);
}

static int is_shim(struct dl_phdr_info *info, size_t size, void *arg)
{
    const char *slash = strrchr(info->dlpi_name, '/');
    return strcmp(slash != NULL ? slash + 1 : info->dlpi_name, "libgdunlock.so") == 0;
}

bool gdu_launch_shim_preloaded(void) { return dl_iterate_phdr(is_shim, NULL) != 0; }

/* What ld.so splits LD_PRELOAD at (glibc's rtld.c: space and colon). */
#define PRELOAD_SEPARATORS " :"

int gdu_launch_preload_path(const char *shim, const char *dir, char *out, size_t len, char *why,
                            size_t why_len)
{
    if (strpbrk(shim, PRELOAD_SEPARATORS) == NULL) {
        snprintf(out, len, "%s", shim);
        return 0;
    }
    if (strpbrk(dir, PRELOAD_SEPARATORS) != NULL) {
        snprintf(why, why_len,
                 "the shim's path %s has a space or ':', where LD_PRELOAD splits paths, and so "
                 "has the folder for a link to it (%s)",
                 shim, dir);
        return -EINVAL;
    }
    char target[PATH_MAX];
    if (realpath(shim, target) == NULL)
        snprintf(target, sizeof target, "%s", shim);
    snprintf(out, len, "%s/libgdunlock.so", dir);
    if (symlink(target, out) != 0) {
        int e = errno;
        snprintf(why, why_len, "cannot link %s to the shim %s: %s", out, target, strerror(e));
        return -e;
    }
    return 0;
}

void gdu_launch_preload(const char *shim, const char *report)
{
    char preload[PATH_MAX * 2];
    const char *old = getenv("LD_PRELOAD");
    snprintf(preload, sizeof preload, "%s%s%s", shim, old && *old ? ":" : "",
             old && *old ? old : "");
    setenv("LD_PRELOAD", preload, 1);
    setenv("GDUNLOCK_REPORT", report, 1);
}

int gdu_launch_mkdtemp(const char *what, char *dir, size_t len)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, len, "%s/gdunlock-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", what);
    return mkdtemp(dir) != NULL ? 0 : -errno;
}

json_t *gdu_launch_load_report(const char *path, char *why, size_t len)
{
    /* Checked on the descriptor: a FIFO put there after a check of the path
     * would block the open and the read. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
    struct stat st;
    if (fd < 0) {
        int err = errno;
        if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode))
            snprintf(why, len, "%s, not a regular file", gdu_file_kind(st.st_mode));
        else
            snprintf(why, len, "%s", strerror(err));
        return NULL;
    }
    json_t *r = NULL;
    if (fstat(fd, &st) != 0) {
        snprintf(why, len, "%s", strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        snprintf(why, len, "%s, not a regular file", gdu_file_kind(st.st_mode));
    } else {
        json_error_t err;
        r = json_loadfd(fd, 0, &err);
        if (r == NULL)
            snprintf(why, len, "%s", err.text);
    }
    close(fd);
    return r;
}
