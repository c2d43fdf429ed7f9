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

void gdu_sysroot_free(gdu_sysroot *sr)
{
    for (size_t i = 0; i < sr->n_recorded; i++)
        free(sr->recorded[i]);
    free(sr->recorded);
    sr->recorded = NULL;
    sr->n_recorded = sr->cap_recorded = 0;
}

bool gdu_sysroot_is_live(const gdu_sysroot *sr)
{
    return sr->root[0] == '\0';
}

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

long gdu_sysroot_read(gdu_sysroot *sr, const char *path, char **text)
{
    char full[PATH_MAX];
    *text = NULL;
    gdu_sysroot_record(sr, path);
    if (gdu_sysroot_path(sr, path, full, sizeof full) != 0)
        return -ENAMETOOLONG;
    int fd = open(full, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    /* sysfs and procfs report sizes of 0 or 4096 whatever they hold: read to EOF. */
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap + 1);
    if (buf == NULL) {
        close(fd);
        return -ENOMEM;
    }
    for (;;) {
        if (len == cap) {
            if (cap >= MAX_FILE_BYTES)
                break;
            char *grown = realloc(buf, cap * 2 + 1);
            if (grown == NULL) {
                free(buf);
                close(fd);
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
            close(fd);
            return -e;
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    close(fd);
    buf[len] = '\0';
    *text = buf;
    return (long)len;
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
    return gdu_sysroot_path(sr, path, full, sizeof full) == 0 && stat(full, &st) == 0;
}

int gdu_sysroot_readlink(gdu_sysroot *sr, const char *path, char *buf, size_t len)
{
    char full[PATH_MAX];
    gdu_sysroot_record(sr, path);
    if (len == 0 || gdu_sysroot_path(sr, path, full, sizeof full) != 0)
        return -ENAMETOOLONG;
    ssize_t n = readlink(full, buf, len - 1);
    if (n < 0)
        return -errno;
    buf[n] = '\0';
    return 0;
}

int gdu_sysroot_realpath(gdu_sysroot *sr, const char *path, char *buf, size_t len)
{
    char full[PATH_MAX], resolved[PATH_MAX];
    gdu_sysroot_record(sr, path);
    if (gdu_sysroot_path(sr, path, full, sizeof full) != 0)
        return -ENAMETOOLONG;
    if (realpath(full, resolved) == NULL)
        return -errno;
    const char *inner = resolved;
    if (sr->root[0] != '\0') {
        /* The captured tree's links are relative (as sysfs makes them), so they
         * resolve inside it; the root may itself sit behind a link. */
        char root_real[PATH_MAX];
        if (realpath(sr->root, root_real) == NULL)
            return -errno;
        size_t rl = strlen(root_real);
        if (strncmp(resolved, root_real, rl) != 0 || (resolved[rl] != '/' && resolved[rl] != '\0'))
            return -EXDEV;
        inner = resolved[rl] ? resolved + rl : "/";
    }
    if (strlen(inner) >= len)
        return -ENAMETOOLONG;
    strcpy(buf, inner);
    return 0;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

long gdu_sysroot_list(gdu_sysroot *sr, const char *dir, char ***names)
{
    char full[PATH_MAX];
    *names = NULL;
    gdu_sysroot_record(sr, dir);
    if (gdu_sysroot_path(sr, dir, full, sizeof full) != 0)
        return -ENAMETOOLONG;
    DIR *d = opendir(full);
    if (d == NULL)
        return -errno;
    char **list = NULL;
    long n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
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
