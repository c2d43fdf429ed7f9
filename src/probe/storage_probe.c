#include "probe/storage_probe.h"

#include "probe/topo_path.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gdu_nvme_scan(gdu_sysroot *sr, gdu_nvme_list *out)
{
    char **names;
    memset(out, 0, sizeof *out);
    long n = gdu_sysroot_list(sr, "/sys/class/nvme", &names);
    for (long i = 0; i < n && out->n < GDU_MAX_NVME; i++) {
        gdu_nvme *c = &out->ctrl[out->n++];
        char path[PATH_MAX], real[PATH_MAX];
        snprintf(c->name, sizeof c->name, "%.15s", names[i]);
        snprintf(path, sizeof path, "/sys/class/nvme/%s/model", names[i]);
        gdu_sysroot_read_line(sr, path, c->model, sizeof c->model);
        snprintf(path, sizeof path, "/sys/class/nvme/%s/device", names[i]);
        if (gdu_sysroot_realpath(sr, path, real, sizeof real) == 0)
            gdu_sysfs_path_last_bdf(real, c->bdf, sizeof c->bdf);
        char **entries;
        snprintf(path, sizeof path, "/sys/class/nvme/%s", names[i]);
        long k = gdu_sysroot_list(sr, path, &entries);
        size_t nlen = strlen(c->name);
        for (long j = 0; j < k && c->n_ns < GDU_MAX_NS;
             j++) /* namespaces: nvme0n1 (not nvme0c0n1) */
            if (strncmp(entries[j], c->name, nlen) == 0 && entries[j][nlen] == 'n')
                snprintf(c->namespaces[c->n_ns++], sizeof c->namespaces[0], "%.31s", entries[j]);
        if (k > 0)
            gdu_sysroot_free_names(entries, k);
    }
    if (n > 0)
        gdu_sysroot_free_names(names, n);
}

int gdu_mounts_read(gdu_sysroot *sr, gdu_mounts *out)
{
    char *text;
    out->m = NULL;
    out->n = 0;
    long len = gdu_sysroot_read(sr, "/proc/self/mountinfo", &text);
    if (len < 0)
        return (int)len;
    size_t lines = 1;
    for (const char *p = text; *p; p++)
        lines += *p == '\n';
    out->m = calloc(lines, sizeof *out->m);
    if (out->m == NULL) {
        free(text);
        return -ENOMEM;
    }
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        if (gdu_parse_mountinfo_line(line, &out->m[out->n]) == 0)
            out->n++;
    free(text);
    return 0;
}

void gdu_mounts_free(gdu_mounts *mounts)
{
    free(mounts->m);
    mounts->m = NULL;
    mounts->n = 0;
}

const gdu_mount *gdu_mount_for_path(const gdu_mounts *mounts, const char *path)
{
    const gdu_mount *best = NULL;
    size_t best_len = 0;
    for (size_t i = 0; i < mounts->n; i++) {
        const char *mp = mounts->m[i].mount_point;
        size_t n = strlen(mp);
        bool root = strcmp(mp, "/") == 0;
        bool prefix = root || (strncmp(path, mp, n) == 0 && (path[n] == '/' || path[n] == '\0'));
        size_t weight = root ? 1 : n;
        if (prefix && weight >= best_len) {
            best = &mounts->m[i];
            best_len = weight;
        }
    }
    return best;
}

static void append(char *buf, size_t len, const char *text)
{
    size_t used = strlen(buf);
    if (used < len)
        snprintf(buf + used, len - used, "%s", text);
}

/* Walks down from a block device name through partition parents and slaves. */
static void resolve_name(gdu_sysroot *sr, const char *name, gdu_block_chain *out, int depth)
{
    char path[PATH_MAX], real[PATH_MAX];
    if (depth > 8)
        return;
    snprintf(path, sizeof path, "/sys/class/block/%s/partition", name);
    if (gdu_sysroot_exists(sr, path)) {
        /* A partition's directory sits inside its disk's: .../block/vda/vda1 */
        snprintf(path, sizeof path, "/sys/class/block/%s", name);
        if (gdu_sysroot_realpath(sr, path, real, sizeof real) == 0) {
            char *slash = strrchr(real, '/');
            if (slash) {
                *slash = '\0';
                const char *parent = strrchr(real, '/');
                if (parent) {
                    append(out->layers, sizeof out->layers, " -> ");
                    append(out->layers, sizeof out->layers, parent + 1);
                    resolve_name(sr, parent + 1, out, depth + 1);
                    return;
                }
            }
        }
    }
    char **slaves;
    snprintf(path, sizeof path, "/sys/class/block/%s/slaves", name);
    long n = gdu_sysroot_list(sr, path, &slaves);
    if (n > 0) {
        append(out->layers, sizeof out->layers, " -> ");
        for (long i = 0; i < n; i++) {
            if (i)
                append(out->layers, sizeof out->layers, " + ");
            append(out->layers, sizeof out->layers, slaves[i]);
        }
        for (long i = 0; i < n; i++)
            resolve_name(sr, slaves[i], out, depth + 1);
        gdu_sysroot_free_names(slaves, n);
        return;
    }
    if (n == 0)
        free(slaves);
    if (out->n_disks >= GDU_MAX_DISKS)
        return;
    /* name may be out->top: copied through a local, never onto itself. */
    char disk[sizeof out->disks[0]];
    snprintf(disk, sizeof disk, "%.31s", name);
    memcpy(out->disks[out->n_disks], disk, sizeof disk);
    snprintf(path, sizeof path, "/sys/class/block/%s", name);
    out->disk_bdf[out->n_disks][0] = '\0';
    if (gdu_sysroot_realpath(sr, path, real, sizeof real) == 0)
        gdu_sysfs_path_last_bdf(real, out->disk_bdf[out->n_disks], sizeof out->disk_bdf[0]);
    out->n_disks++;
}

int gdu_block_resolve(gdu_sysroot *sr, unsigned major, unsigned minor, gdu_block_chain *out)
{
    char path[PATH_MAX], real[PATH_MAX];
    memset(out, 0, sizeof *out);
    snprintf(path, sizeof path, "/sys/dev/block/%u:%u", major, minor);
    if (gdu_sysroot_realpath(sr, path, real, sizeof real) != 0)
        return -ENOENT;
    const char *base = strrchr(real, '/');
    snprintf(out->top, sizeof out->top, "%.31s", base ? base + 1 : real);
    snprintf(out->layers, sizeof out->layers, "%s", out->top);
    resolve_name(sr, out->top, out, 0);
    return 0;
}

bool gdu_udev_has_fs_usage(gdu_sysroot *sr, unsigned major, unsigned minor)
{
    char path[64], *text;
    snprintf(path, sizeof path, "/run/udev/data/b%u:%u", major, minor);
    if (gdu_sysroot_read(sr, path, &text) < 0)
        return false;
    bool found = strstr(text, "E:ID_FS_USAGE=") != NULL;
    free(text);
    return found;
}

bool gdu_disk_is_nvme(const char *disk) { return strncmp(disk, "nvme", 4) == 0; }
