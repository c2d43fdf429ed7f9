#include "probe/sysroot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { MAX_FILE_BYTES = 1 << 20 };

int gdu_sysroot_init(gdu_sysroot *sr, const char *root)
{
    memset(sr, 0, sizeof *sr);
    if (root == NULL || strcmp(root, "/") == 0)
        return 0;
    size_t n = strlen(root);
    while (n > 1 && root[n - 1] == '/')
        n--;
    if (n >= sizeof sr->root)
        return -ENAMETOOLONG;
    memcpy(sr->root, root, n);
    sr->root[n] = '\0';
    return 0;
}

int gdu_sysroot_check(const gdu_sysroot *sr, char *why, size_t why_len)
{
    struct stat st;
    if (gdu_sysroot_is_live(sr))
        return 0;
    if (stat(sr->root, &st) != 0) {
        int e = errno;
        snprintf(why, why_len, "%s: %s", sr->root, strerror(e));
        return -e;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(why, why_len,
                 "%s is not a directory: give the folder 'gdunlock doctor --capture "
                 "DIR' wrote",
                 sr->root);
        return -ENOTDIR;
    }
    if (access(sr->root, R_OK | X_OK) != 0) {
        int e = errno;
        snprintf(why, why_len, "%s: %s", sr->root, strerror(e));
        return -e;
    }
    return 0;
}

void gdu_sysroot_free(gdu_sysroot *sr)
{
    for (size_t i = 0; i < sr->n_recorded; i++)
        free(sr->recorded[i]);
    free(sr->recorded);
    sr->recorded = NULL;
    sr->n_recorded = sr->cap_recorded = 0;
}

bool gdu_sysroot_is_live(const gdu_sysroot *sr) { return sr->root[0] == '\0'; }

int gdu_sysroot_path(const gdu_sysroot *sr, const char *path, char *out, size_t len)
{
    int n = snprintf(out, len, "%s%s", sr->root, path);
    return (n < 0 || (size_t)n >= len) ? -ENAMETOOLONG : 0;
}

void gdu_sysroot_record(gdu_sysroot *sr, const char *path)
{
    for (size_t i = 0; i < sr->n_recorded; i++)
        if (strcmp(sr->recorded[i], path) == 0)
            return;
    if (sr->n_recorded == sr->cap_recorded) {
        size_t cap = sr->cap_recorded ? sr->cap_recorded * 2 : 64;
        char **grown = realloc(sr->recorded, cap * sizeof *grown);
        if (grown == NULL)
            return; /* the record is best effort: a capture then lacks this file */
        sr->recorded = grown;
        sr->cap_recorded = cap;
    }
    char *copy = strdup(path);
    if (copy != NULL)
        sr->recorded[sr->n_recorded++] = copy;
}

/* One link of a walk in a sysroot: the link at full (whose name ends done,
 * after its first used bytes) gives way to its target, which an absolute
 * target makes start again at the root; the walk goes on with todo =
 * target/after; hops counts the links followed. Returns 0 or -errno
 * (ELOOP past 40 links). */
static int follow_link(const char *full, char *done, size_t used, const char *after,
                       char todo[PATH_MAX], int *hops)
{
    char target[PATH_MAX];
    ssize_t t = readlink(full, target, sizeof target - 1);
    if (t < 0)
        return -errno;
    target[t] = '\0';
    if (++*hops > 40)
        return -ELOOP;
    done[used] = '\0';
    if (target[0] == '/')
        done[0] = '\0';
    char next[PATH_MAX];
    if (snprintf(next, sizeof next, "%s/%s", target, after) >= (int)sizeof next)
        return -ENAMETOOLONG;
    snprintf(todo, PATH_MAX, "%s", next);
    return 0;
}

/* Resolves path (absolute, as the examined machine names it) to the file to
 * open on this one. Live: the path itself. In a sysroot, every symbolic link
 * is followed the way the kernel would inside a chroot at the root: absolute
 * targets start again at the root and ".." stops there, so that a captured
 * link such as /etc/cufile.json -> /etc/alternatives/cufile.json never reaches
 * this machine's own files. The last component is followed when follow_last.
 * Returns 0 or -errno (ENOENT, ENOTDIR, ELOOP, ENAMETOOLONG). */
static int resolve(const gdu_sysroot *sr, const char *path, bool follow_last, char *out, size_t len)
{
    if (gdu_sysroot_is_live(sr))
        return snprintf(out, len, "%s", path) < (int)len ? 0 : -ENAMETOOLONG;
    char todo[PATH_MAX], done[PATH_MAX] = "", full[PATH_MAX * 2];
    if (snprintf(todo, sizeof todo, "%s", path) >= (int)sizeof todo)
        return -ENAMETOOLONG;
    size_t root_len = strlen(sr->root); /* full is root + done, rebuilt per component */
    memcpy(full, sr->root, root_len);
    int hops = 0;
    char *rest = todo;
    for (;;) {
        while (*rest == '/')
            rest++;
        if (*rest == '\0')
            break;
        char *end = strchr(rest, '/');
        size_t n = end ? (size_t)(end - rest) : strlen(rest);
        char *after = rest + n;
        while (*after == '/')
            after++;
        bool last = *after == '\0';
        if (n == 1 && rest[0] == '.') {
            rest = after;
            continue;
        }
        if (n == 2 && rest[0] == '.' && rest[1] == '.') {
            char *slash = strrchr(done, '/');
            if (slash != NULL)
                *slash = '\0'; /* at the root, ".." is the root */
            rest = after;
            continue;
        }
        size_t used = strlen(done);
        if (used + 1 + n >= sizeof done)
            return -ENAMETOOLONG;
        done[used] = '/';
        memcpy(done + used + 1, rest, n);
        done[used + 1 + n] = '\0';
        memcpy(full + root_len, done, used + 2 + n);
        struct stat st;
        if (lstat(full, &st) != 0)
            return -errno;
        if (S_ISLNK(st.st_mode) && (!last || follow_last)) {
            int rc = follow_link(full, done, used, after, todo, &hops);
            if (rc != 0)
                return rc;
            rest = todo;
            continue;
        }
        if (!last && !S_ISDIR(st.st_mode))
            return -ENOTDIR;
        rest = after;
    }
    return snprintf(out, len, "%s%s", sr->root, done[0] ? done : "/") < (int)len ? 0
                                                                                 : -ENAMETOOLONG;
}

/* fd's bytes to its end (at most MAX_FILE_BYTES), NUL-ended, in *text (the
 * caller frees): sysfs and procfs report sizes of 0 or 4096 whatever they
 * hold. Returns the length or -errno. */
static long read_to_eof(int fd, char **text)
{
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap + 1);
    if (buf == NULL)
        return -ENOMEM;
    for (;;) {
        if (len == cap) {
            if (cap >= MAX_FILE_BYTES)
                break;
            char *grown = realloc(buf, cap * 2 + 1);
            if (grown == NULL) {
                free(buf);
                return -ENOMEM;
            }
            buf = grown;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + len, cap - len);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            free(buf);
            return -e;
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    buf[len] = '\0';
    *text = buf;
    return (long)len;
}

long gdu_sysroot_read(gdu_sysroot *sr, const char *path, char **text)
{
    char full[PATH_MAX];
    *text = NULL;
    gdu_sysroot_record(sr, path);
    int rc = resolve(sr, path, true, full, sizeof full);
    if (rc != 0)
        return rc;
    /* Only a regular file is read (procfs and sysfs files are regular): a FIFO
     * would block the open and a device could do anything, so the type is
     * checked first, and again on what was opened without blocking. */
    struct stat st;
    if (stat(full, &st) != 0)
        return -errno;
    if (!S_ISREG(st.st_mode))
        return S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
    int fd = open(full, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return -EINVAL;
    }
    long len = read_to_eof(fd, text);
    close(fd);
    return len;
}

int gdu_sysroot_read_line(gdu_sysroot *sr, const char *path, char *buf, size_t len)
{
    char *text;
    long n = gdu_sysroot_read(sr, path, &text);
    if (n < 0)
        return (int)n;
    size_t end = strcspn(text, "\n");
    while (end > 0 && (text[end - 1] == ' ' || text[end - 1] == '\t' || text[end - 1] == '\r'))
        end--;
    if (len > 0) {
        size_t k = end < len - 1 ? end : len - 1;
        memcpy(buf, text, k);
        buf[k] = '\0';
    }
    free(text);
    return 0;
}

bool gdu_sysroot_exists(gdu_sysroot *sr, const char *path)
{
    char full[PATH_MAX];
    struct stat st;
    gdu_sysroot_record(sr, path);
    return resolve(sr, path, true, full, sizeof full) == 0 && stat(full, &st) == 0;
}

bool gdu_sysroot_present(gdu_sysroot *sr, const char *path)
{
    char full[PATH_MAX], marked[PATH_MAX + 16];
    struct stat st;
    snprintf(marked, sizeof marked, "%s" GDU_SYSROOT_PRESENCE, path);
    gdu_sysroot_record(sr, marked);
    return resolve(sr, path, true, full, sizeof full) == 0 && stat(full, &st) == 0;
}

int gdu_sysroot_readlink(gdu_sysroot *sr, const char *path, char *buf, size_t len)
{
    char full[PATH_MAX];
    gdu_sysroot_record(sr, path);
    if (len == 0)
        return -ENAMETOOLONG;
    int rc = resolve(sr, path, false, full, sizeof full);
    if (rc != 0)
        return rc;
    ssize_t n = readlink(full, buf, len - 1);
    if (n < 0)
        return -errno;
    buf[n] = '\0';
    return 0;
}

int gdu_sysroot_realpath(gdu_sysroot *sr, const char *path, char *buf, size_t len)
{
    char full[PATH_MAX];
    gdu_sysroot_record(sr, path);
    int rc = resolve(sr, path, true, full, sizeof full);
    if (rc != 0)
        return rc;
    if (gdu_sysroot_is_live(sr)) {
        char real[PATH_MAX];
        if (realpath(full, real) == NULL)
            return -errno;
        return snprintf(buf, len, "%s", real) < (int)len ? 0 : -ENAMETOOLONG;
    }
    struct stat st;
    if (stat(full, &st) != 0)
        return -errno;
    const char *inner = full + strlen(sr->root);
    return snprintf(buf, len, "%s", inner) < (int)len ? 0 : -ENAMETOOLONG;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

long gdu_sysroot_list(gdu_sysroot *sr, const char *dir, char ***names)
{
    char full[PATH_MAX], listed[PATH_MAX];
    *names = NULL;
    size_t n_dir = strlen(dir);
    while (n_dir > 1 && dir[n_dir - 1] == '/')
        n_dir--;
    snprintf(listed, sizeof listed, "%.*s/", (int)n_dir, dir);
    gdu_sysroot_record(sr, listed);
    int rc = resolve(sr, dir, true, full, sizeof full);
    if (rc != 0)
        return rc;
    DIR *d = opendir(full);
    if (d == NULL)
        return -errno;
    char **list = NULL;
    long n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        /* Kernel file systems have no dot files; a capture's are its own
         * (the fixtures' .keep files that keep empty folders in git). */
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            long ncap = cap ? cap * 2 : 16;
            char **grown = realloc(list, (size_t)ncap * sizeof *grown);
            if (grown == NULL)
                break;
            list = grown;
            cap = ncap;
        }
        if ((list[n] = strdup(e->d_name)) == NULL)
            break;
        n++;
    }
    closedir(d);
    if (n > 0)
        qsort(list, (size_t)n, sizeof *list, cmp_names);
    *names = list;
    return n;
}

void gdu_sysroot_free_names(char **names, long n)
{
    for (long i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

int gdu_sysroot_confined(gdu_sysroot *sr, const char *path)
{
    if (gdu_sysroot_is_live(sr))
        return 0;
    char inner[PATH_MAX], host[PATH_MAX * 2], host_real[PATH_MAX], inner_real[PATH_MAX];
    int rc = resolve(sr, path, true, inner, sizeof inner);
    if (snprintf(host, sizeof host, "%s%s", sr->root, path) >= (int)sizeof host)
        return -ENAMETOOLONG;
    bool host_ok = realpath(host, host_real) != NULL;
    if (rc != 0)
        return host_ok ? -EXDEV : 0; /* dangling inside; a file outside */
    struct stat st;
    if (stat(inner, &st) != 0 || !host_ok || realpath(inner, inner_real) == NULL ||
        strcmp(inner_real, host_real) != 0)
        return -EXDEV;
    return S_ISREG(st.st_mode) || S_ISDIR(st.st_mode) ? 0 : -EINVAL;
}
