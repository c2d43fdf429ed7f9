#include "facts/capture.h"

#include "util/mkdirs.h"

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

/* Writes the words the snapshot kept of a file (read once: the capture
 * holds what the snapshot was judged on). 0, -errno why the snapshot did
 * not read it, or 1 when the copy could not be written. */
static int write_kept(const gdu_snapshot_text *kept, const char *dst)
{
    if (kept->len < 0)
        return (int)kept->len;
    int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (out < 0)
        return 1;
    size_t done = 0;
    while (done < (size_t)kept->len) {
        ssize_t n = write(out, kept->text + done, (size_t)kept->len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        done += (size_t)n;
    }
    return close(out) == 0 && done == (size_t)kept->len ? 0 : 1;
}

/* The words the snapshot kept of path (as the examined machine names it), if any. */
static const gdu_snapshot_text *kept_words(const gdu_snapshot *s, const char *path)
{
    if (strcmp(path, GDU_DRIVER_PARAMS_PATH) == 0)
        return &s->driver_params;
    if (strcmp(path, GDU_NVFS_STATS_PATH) == 0)
        return &s->nvfs_text;
    return NULL;
}

/* The stand-in of a file whose presence alone matters. 0, or 1 when it
 * could not be written. */
static int empty_file(const char *dst)
{
    int fd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    return fd >= 0 && close(fd) == 0 ? 0 : 1;
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

/* Recreates path (as the examined machine names it, found under root) under
 * dir component by component: directories as directories, links as the same
 * links (then follows them), the last component copied if it is a file, or
 * written from kept (not NULL) when the snapshot kept its words. */
static void capture_path(const char *root, const char *dir, const char *path, bool content,
                         const gdu_snapshot_text *kept, gdu_capture_stats *st, int hops)
{
    /* src and dst are root and dir followed by cur, kept so as cur grows. */
    char src[PATH_MAX * 2], dst[PATH_MAX * 2], cur[PATH_MAX] = "";
    size_t root_len = strlen(root), dir_len = strlen(dir), used = 0;
    if (root_len >= PATH_MAX || dir_len >= PATH_MAX)
        return;
    memcpy(src, root, root_len);
    memcpy(dst, dir, dir_len);
    const char *p = path;
    while (*p) {
        while (*p == '/')
            p++;
        const char *s = p;
        while (*p && *p != '/')
            p++;
        if (p == s)
            break;
        size_t n = (size_t)(p - s), parent_len = used;
        if (used + 1 + n >= sizeof cur) {
            st->failed++;
            return;
        }
        cur[used] = '/';
        memcpy(cur + used + 1, s, n);
        used += 1 + n;
        cur[used] = '\0';
        memcpy(src + root_len, cur, used + 1);
        memcpy(dst + dir_len, cur, used + 1);
        struct stat sb;
        if (lstat(src, &sb) != 0) {
            st->missing++;
            return;
        }
        if (S_ISLNK(sb.st_mode)) {
            char target[PATH_MAX], resolved[PATH_MAX], rest[PATH_MAX];
            ssize_t got = readlink(src, target, sizeof target - 1);
            if (got < 0 || hops >= MAX_LINK_HOPS) {
                st->failed++;
                return;
            }
            target[got] = '\0';
            /* Its parent was made as the component before it. */
            if (symlink(target, dst) == 0)
                st->links++;
            else if (errno != EEXIST)
                st->unwritten++;
            char parent[PATH_MAX];
            snprintf(parent, sizeof parent, "%.*s", (int)parent_len, parent_len ? cur : "/");
            resolve_relative(parent, target, resolved, sizeof resolved);
            snprintf(rest, sizeof rest, "%s%s", resolved, p);
            capture_path(root, dir, rest, content, kept, st, hops + 1);
            return;
        }
        if (S_ISDIR(sb.st_mode)) {
            if (mkdir(dst, 0755) != 0 && errno != EEXIST)
                st->unwritten++;
            continue;
        }
        if (*p != '\0') /* a file in the middle of a path */
            return;
        struct stat existing;
        if (lstat(dst, &existing) == 0)
            return;
        int rc = !S_ISREG(sb.st_mode) ? -EINVAL /* no FIFO, no device */
                 : !content           ? empty_file(dst)
                 : kept != NULL       ? write_kept(kept, dst)
                                      : copy_file(src, dst);
        if (rc == 0)
            st->files++;
        else if (rc > 0)
            st->unwritten++;
        else
            st->failed++;
        return;
    }
}

/* A directory whose entries' names were read ("path/" in the record): each
 * entry the capture lacks is made by kind, without content (a listing tells
 * names, not what the files hold): folders as folders, links as the same
 * links, anything else as an empty file. */
static void capture_listing(const char *root, const char *dir, const char *path,
                            gdu_capture_stats *st)
{
    gdu_sysroot sr;
    char inner[PATH_MAX];
    if (gdu_sysroot_init(&sr, root[0] ? root : NULL) != 0)
        return;
    int rc = gdu_sysroot_realpath(&sr, path, inner, sizeof inner);
    gdu_sysroot_free(&sr);
    char src[PATH_MAX * 2], from[PATH_MAX * 3], to[PATH_MAX * 3];
    snprintf(src, sizeof src, "%s%s", root, inner);
    DIR *d = rc == 0 ? opendir(src) : NULL;
    if (d == NULL)
        return;
    const struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') /* as gdu_sysroot_list: no dot files */
            continue;
        struct stat sb;
        snprintf(from, sizeof from, "%s/%s", src, e->d_name);
        snprintf(to, sizeof to, "%s%s/%s", dir, strcmp(inner, "/") == 0 ? "" : inner, e->d_name);
        if (lstat(to, &sb) == 0 || lstat(from, &sb) != 0)
            continue;
        char target[PATH_MAX];
        ssize_t n;
        int made = -1;
        if (S_ISDIR(sb.st_mode))
            made = mkdir(to, 0755);
        else if (S_ISLNK(sb.st_mode) && (n = readlink(from, target, sizeof target - 1)) >= 0) {
            target[n] = '\0';
            made = symlink(target, to);
        } else {
            int fd = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
            made = fd >= 0 ? close(fd) : -1;
        }
        if (made != 0)
            st->unwritten++;
    }
    closedir(d);
}

int gdu_capture_prepare(const char *dir, char *why, size_t why_len)
{
    int rc = gdu_mkdirs(dir);
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

static bool write_file_list(const gdu_snapshot *s, const char *file)
{
    FILE *f = fopen(file, "wx");
    if (f == NULL)
        return false;
    for (size_t i = 0; i < s->n_files; i++)
        fprintf(f, "%s\n", s->files[i]);
    return fclose(f) == 0;
}

int gdu_capture_write(const gdu_snapshot *s, const char *dir, gdu_capture_stats *stats, char *why,
                      size_t why_len)
{
    memset(stats, 0, sizeof *stats);
    int rc = gdu_mkdirs(dir);
    if (rc != 0) {
        snprintf(why, why_len, "cannot create %s: %s", dir, strerror(-rc));
        return rc;
    }
    char root[PATH_MAX];
    if (realpath(dir, root) == NULL) {
        snprintf(why, why_len, "cannot resolve %s: %s", dir, strerror(errno));
        return -errno;
    }
    size_t mark = strlen(GDU_SYSROOT_PRESENCE);
    for (size_t i = 0; i < s->n_files; i++) {
        size_t n = strlen(s->files[i]);
        bool presence = n > mark && strcmp(s->files[i] + n - mark, GDU_SYSROOT_PRESENCE) == 0;
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%.*s", (int)(presence ? n - mark : n), s->files[i]);
        capture_path(s->root, root, path, !presence, kept_words(s, path), stats, 0);
    }
    /* Listings last, so that what was read is there before placeholders. */
    for (size_t i = 0; i < s->n_files; i++) {
        size_t n = strlen(s->files[i]);
        if (n > 1 && s->files[i][n - 1] == '/')
            capture_listing(s->root, root, s->files[i], stats);
    }
    char file[PATH_MAX + 64];
    bool written = true;
    if (s->live_machine) {
        snprintf(file, sizeof file, "%s/%s", root, GDU_LIVE_FILE);
        json_t *j = gdu_live_to_json(&s->live);
        written = j != NULL && json_dump_file(j, file, JSON_INDENT(2) | JSON_SORT_KEYS) == 0;
        json_decref(j);
    }
    if (written) {
        snprintf(file, sizeof file, "%s/%s", root, GDU_CAPTURE_FILES);
        written = write_file_list(s, file);
    }
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
