#include "facts/capture.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { MAX_LINK_HOPS = 40, MAX_COPY_BYTES = 1 << 20 };

static int mkdir_p(const char *path)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return -ENAMETOOLONG;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return -errno;
    return 0;
}

/* Copies what a read gives (sysfs/procfs sizes are not real sizes). Returns
 * 0, -errno of the source, or 1 when the copy could not be written. */
static int copy_file(const char *src, const char *dst)
{
    int in = open(src, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (in < 0)
        return -errno;
    struct stat st;
    if (fstat(in, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(in);
        return -EINVAL;
    }
    int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (out < 0) {
        close(in);
        return 1;
    }
    char buf[8192];
    size_t total = 0;
    int rc = 0;
    while (total < MAX_COPY_BYTES) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            /* A file only root may read in full (config) keeps what came. */
            rc = total ? 0 : -errno;
            break;
        }
        if (n == 0)
            break;
        if (write(out, buf, (size_t)n) != n) {
            rc = 1;
            break;
        }
        total += (size_t)n;
    }
    close(in);
    if (close(out) != 0)
        rc = 1;
    return rc;
}

/* Joins a link's directory and a relative target, folding "." and "..". */
static void resolve_relative(const char *link_dir, const char *target, char *out, size_t len)
{
    char buf[PATH_MAX * 2];
    snprintf(buf, sizeof buf, "%s/%s", target[0] == '/' ? "" : link_dir, target);
    char *parts[256];
    size_t n = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
        if (strcmp(t, ".") == 0)
            continue;
        if (strcmp(t, "..") == 0) {
            if (n > 0)
                n--;
            continue;
        }
        if (n < sizeof parts / sizeof parts[0])
            parts[n++] = t;
    }
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n && used < len; i++)
        used += (size_t)snprintf(out + used, len - used, "/%s", parts[i]);
    if (n == 0)
        snprintf(out, len, "/");
}

/* Recreates path under dir component by component: directories as
 * directories, links as the same links (then follows them), the last
 * component copied if it is a file. */
static void capture_path(const char *dir, const char *path, gdu_capture_stats *st, int hops)
{
    char cur[PATH_MAX] = "", dst[PATH_MAX * 2];
    const char *p = path;
    while (*p) {
        while (*p == '/')
            p++;
        const char *s = p;
        while (*p && *p != '/')
            p++;
        if (p == s)
            break;
        char parent[PATH_MAX];
        snprintf(parent, sizeof parent, "%s", cur[0] ? cur : "/");
        size_t used = strlen(cur);
        snprintf(cur + used, sizeof cur - used, "/%.*s", (int)(p - s), s);
        snprintf(dst, sizeof dst, "%s%s", dir, cur);
        struct stat sb;
        if (lstat(cur, &sb) != 0) {
            st->missing++;
            return;
        }
        if (S_ISLNK(sb.st_mode)) {
            char target[PATH_MAX], resolved[PATH_MAX], rest[PATH_MAX];
            ssize_t n = readlink(cur, target, sizeof target - 1);
            if (n < 0 || hops >= MAX_LINK_HOPS) {
                st->failed++;
                return;
            }
            target[n] = '\0';
            char dst_parent[PATH_MAX * 2];
            snprintf(dst_parent, sizeof dst_parent, "%s%s", dir, parent);
            mkdir_p(dst_parent);
            if (symlink(target, dst) == 0)
                st->links++;
            else if (errno != EEXIST)
                st->unwritten++;
            resolve_relative(parent, target, resolved, sizeof resolved);
            snprintf(rest, sizeof rest, "%s%s", resolved, p);
            capture_path(dir, rest, st, hops + 1);
            return;
        }
        if (S_ISDIR(sb.st_mode)) {
            if (mkdir_p(dst) != 0)
                st->unwritten++;
            continue;
        }
        if (*p != '\0') /* a file in the middle of a path */
            return;
        struct stat existing;
        if (lstat(dst, &existing) == 0)
            return;
        int rc = S_ISREG(sb.st_mode) ? copy_file(cur, dst) : -EINVAL; /* no FIFO, no device */
        if (rc == 0)
            st->files++;
        else if (rc > 0)
            st->unwritten++;
        else
            st->failed++;
        return;
    }
}

int gdu_capture_prepare(const char *dir, char *why, size_t why_len)
{
    int rc = mkdir_p(dir);
    if (rc != 0) {
        snprintf(why, why_len, "cannot create %s: %s", dir, strerror(-rc));
        return rc;
    }
    DIR *d = opendir(dir);
    if (d == NULL) {
        rc = -errno;
        snprintf(why, why_len, "%s: %s", dir, strerror(-rc));
        return rc;
    }
    const struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            break;
    closedir(d);
    if (e != NULL) {
        snprintf(why, why_len,
                 "%s is not empty: a capture there would mix with what it holds "
                 "(existing files are kept); name a new or empty folder",
                 dir);
        return -EEXIST;
    }
    return 0;
}

int gdu_capture_write(const gdu_sysroot *sr, const gdu_live *live, const char *dir,
                      gdu_capture_stats *stats, char *why, size_t why_len)
{
    memset(stats, 0, sizeof *stats);
    int rc = mkdir_p(dir);
    if (rc != 0) {
        snprintf(why, why_len, "cannot create %s: %s", dir, strerror(-rc));
        return rc;
    }
    char root[PATH_MAX];
    if (realpath(dir, root) == NULL) {
        snprintf(why, why_len, "cannot resolve %s: %s", dir, strerror(errno));
        return -errno;
    }
    for (size_t i = 0; i < sr->n_recorded; i++)
        capture_path(root, sr->recorded[i], stats, 0);
    char file[PATH_MAX + 64];
    snprintf(file, sizeof file, "%s/%s", root, GDU_LIVE_FILE);
    json_t *j = gdu_live_to_json(live);
    bool written = j != NULL && json_dump_file(j, file, JSON_INDENT(2) | JSON_SORT_KEYS) == 0;
    json_decref(j);
    if (stats->unwritten > 0) {
        snprintf(why, why_len,
                 "%zu files, folders or links could not be written into %s (disk "
                 "full?): the capture is incomplete",
                 stats->unwritten, dir);
        return -EIO;
    }
    if (!written) {
        snprintf(why, why_len, "cannot write %s", file);
        return -EIO;
    }
    return 0;
}
