#include "facts/snapshot.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Each distinct block device a mount is on: its chain down to the disks
 * (the storage rules and topo's mounts per drive) and udev's data (cuFile
 * identifies a volume by it). */
static void take_blocks(gdu_sysroot *sr, gdu_snapshot *out)
{
    out->blocks = out->mounts.n ? calloc(out->mounts.n, sizeof *out->blocks) : NULL;
    for (size_t i = 0; out->blocks != NULL && i < out->mounts.n; i++) {
        const gdu_mount *m = &out->mounts.m[i];
        if (m->major == 0 || gdu_snapshot_block(out, m->major, m->minor) != NULL)
            continue;
        gdu_block *b = &out->blocks[out->n_blocks++];
        b->major = m->major;
        b->minor = m->minor;
        b->found = gdu_block_resolve(sr, m->major, m->minor, &b->chain) == 0;
        b->udev_fs_usage = gdu_udev_has_fs_usage(sr, m->major, m->minor);
    }
}

static void append_names(gdu_sysroot *sr, const char *dir, char *out, size_t len)
{
    char **names;
    long n = gdu_sysroot_list(sr, dir, &names);
    for (long i = 0; i < n; i++) {
        size_t used = strlen(out);
        if (used < len)
            snprintf(out + used, len - used, "%s%s", used ? "," : "", names[i]);
    }
    if (n > 0)
        gdu_sysroot_free_names(names, n);
}

/* Interface names: the entries of <dev>/net, or of <dev>/virtio<N>/net for virtio-net. */
static void take_nics(gdu_sysroot *sr, gdu_snapshot *out)
{
    size_t count = 0;
    for (size_t i = 0; i < out->pci.n; i++)
        count += gdu_pci_is_nic(&out->pci.devs[i]);
    out->nics = count ? calloc(count, sizeof *out->nics) : NULL;
    for (size_t i = 0; out->nics != NULL && i < out->pci.n; i++) {
        const gdu_pci_dev *d = &out->pci.devs[i];
        if (!gdu_pci_is_nic(d))
            continue;
        gdu_nic *nic = &out->nics[out->n_nics++];
        char dir[160], **children;
        snprintf(nic->bdf, sizeof nic->bdf, "%s", d->bdf);
        snprintf(dir, sizeof dir, "/sys/bus/pci/devices/%s/net", d->bdf);
        append_names(sr, dir, nic->names, sizeof nic->names);
        snprintf(dir, sizeof dir, "/sys/bus/pci/devices/%s", d->bdf);
        long n = gdu_sysroot_list(sr, dir, &children);
        for (long k = 0; k < n; k++)
            if (strncmp(children[k], "virtio", 6) == 0) {
                snprintf(dir, sizeof dir, "/sys/bus/pci/devices/%s/%.32s/net", d->bdf, children[k]);
                append_names(sr, dir, nic->names, sizeof nic->names);
            }
        if (n > 0)
            gdu_sysroot_free_names(children, n);
    }
}

/* nvidia-fs's stats, read once: the words for a report, the figures for
 * the judges. A live file named elsewhere is read outside sr, so that the
 * capture lists only the examined machine's files. */
static void take_nvfs_stats(gdu_sysroot *sr, const char *path, gdu_snapshot *out)
{
    gdu_sysroot elsewhere;
    bool own = path != NULL && gdu_sysroot_is_live(sr) && gdu_sysroot_init(&elsewhere, NULL) == 0;
    gdu_snapshot_text *t = &out->nvfs_text;
    t->len = gdu_sysroot_read(own ? &elsewhere : sr, own ? path : GDU_NVFS_STATS_PATH, &t->text);
    if (own)
        gdu_sysroot_free(&elsewhere);
    out->driver.nvfs_stats_readable = t->len >= 0;
    out->nvfs_stats_parsed =
        t->len >= 0 && gdu_nvfs_stats_parse(t->text, (size_t)t->len, &out->nvfs) == 0;
}

void gdu_snapshot_take_stats_from(gdu_sysroot *sr, const char *const *paths, size_t n_paths,
                                  const char *nvfs_stats, gdu_snapshot *out)
{
    memset(out, 0, sizeof *out);
    out->live_machine = gdu_sysroot_is_live(sr);
    gdu_driver_probe(sr, &out->driver);
    gdu_snapshot_text *params = &out->driver_params;
    params->len = gdu_sysroot_read(sr, GDU_DRIVER_PARAMS_PATH, &params->text);
    gdu_driver_params_parse(params->text, &out->driver);
    gdu_kernel_probe(sr, &out->kernel);
    gdu_module_env_probe(sr, out->kernel.release, &out->module_env);
    gdu_pci_scan(sr, &out->pci, out->pci_error, sizeof out->pci_error);
    gdu_nvme_scan(sr, &out->nvme);
    gdu_mounts_read(sr, &out->mounts);
    take_blocks(sr, out);
    take_nics(sr, out);
    gdu_rdma_probe(sr, &out->rdma);
    gdu_iommu_probe(sr, &out->iommu);
    if (gdu_sysroot_is_live(sr))
        gdu_live_collect(&out->live, paths, n_paths);
    else
        gdu_live_load(sr, &out->live, out->live_error, sizeof out->live_error);
    gdu_cufile_config_probe(sr, out->live.cufile_env_json, &out->cufile);
    take_nvfs_stats(sr, nvfs_stats, out);
    snprintf(out->root, sizeof out->root, "%s", sr->root);
    out->files = sr->recorded;
    out->n_files = sr->n_recorded;
    sr->recorded = NULL;
    sr->n_recorded = sr->cap_recorded = 0;
}

void gdu_snapshot_take(gdu_sysroot *sr, const char *const *paths, size_t n_paths, gdu_snapshot *out)
{
    gdu_snapshot_take_stats_from(sr, paths, n_paths, NULL, out);
}

void gdu_snapshot_free(gdu_snapshot *s)
{
    gdu_pci_free(&s->pci);
    gdu_mounts_free(&s->mounts);
    free(s->blocks);
    free(s->nics);
    gdu_iommu_free(&s->iommu);
    free(s->driver_params.text);
    free(s->nvfs_text.text);
    for (size_t i = 0; i < s->n_files; i++)
        free(s->files[i]);
    free(s->files);
}

const gdu_block *gdu_snapshot_block(const gdu_snapshot *s, unsigned major, unsigned minor)
{
    for (size_t i = 0; i < s->n_blocks; i++)
        if (s->blocks[i].major == major && s->blocks[i].minor == minor)
            return &s->blocks[i];
    return NULL;
}

static void fill_view(const gdu_snapshot *s, gdu_gpu_view *v)
{
    for (size_t i = 0; i < s->driver.n_gpus; i++)
        if (strcasecmp(s->driver.gpus[i].bdf, v->bdf) == 0)
            v->info = &s->driver.gpus[i];
    v->cuda = gdu_live_gpu_by_bdf(&s->live, v->bdf);
    v->name = v->cuda && v->cuda->name[0] ? v->cuda->name : v->info ? v->info->model : "";
    v->geforce = gdu_gpu_name_geforce(v->name);
    int index;
    v->bar1 = v->pci ? gdu_pci_bar1(v->pci->bar_size, &index) : 0;
    v->rebar_max = v->pci && index >= 0 ? v->pci->rebar_max[index] : 0;
    v->memory = v->cuda ? v->cuda->total_mem : 0;
}

size_t gdu_snapshot_gpus(const gdu_snapshot *s, gdu_gpu_view *out, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < s->pci.n && n < cap; i++) {
        if (!gdu_pci_is_nvidia_gpu(&s->pci.devs[i]))
            continue;
        gdu_gpu_view *v = &out[n];
        memset(v, 0, sizeof *v);
        v->index = (int)n;
        v->pci = &s->pci.devs[i];
        snprintf(v->bdf, sizeof v->bdf, "%s", v->pci->bdf);
        fill_view(s, v);
        n++;
    }
    if (n == 0) /* no PCI view (e.g. an incomplete capture): the driver's list */
        for (size_t i = 0; i < s->driver.n_gpus && n < cap; i++) {
            gdu_gpu_view *v = &out[n];
            memset(v, 0, sizeof *v);
            v->index = (int)n;
            snprintf(v->bdf, sizeof v->bdf, "%s", s->driver.gpus[i].bdf);
            fill_view(s, v);
            n++;
        }
    return n;
}

int gdu_snapshot_gpu_by_ordinal(const gdu_snapshot *s, int ordinal, gdu_gpu_view *out)
{
    const gdu_live_gpu *g = gdu_live_gpu_by_ordinal(&s->live, ordinal);
    if (g == NULL)
        return -ENOENT;
    gdu_gpu_view views[GDU_MAX_GPUS];
    size_t n = gdu_snapshot_gpus(s, views, GDU_MAX_GPUS);
    for (size_t i = 0; i < n; i++)
        if (views[i].cuda == g) {
            *out = views[i];
            return 0;
        }
    memset(out, 0, sizeof *out);
    out->index = -1;
    snprintf(out->bdf, sizeof out->bdf, "%s", g->bdf);
    out->pci = gdu_pci_find(&s->pci, g->bdf);
    fill_view(s, out);
    return 0;
}

gdu_nvlink_answer gdu_snapshot_nvlink(const gdu_snapshot *s, const gdu_gpu_view *a,
                                      const gdu_gpu_view *b)
{
    if (a->cuda == NULL || b->cuda == NULL)
        return GDU_NVLINK_UNKNOWN;
    const gdu_live_pair *p = gdu_live_pair_find(&s->live, a->cuda->ordinal, b->cuda->ordinal);
    if (p == NULL)
        return GDU_NVLINK_UNKNOWN;
    if (p->rm_known) {
        gdu_p2p_link link = gdu_p2p_caps_link(p->rm.caps);
        return link == GDU_P2P_LINK_NVLINK || link == GDU_P2P_LINK_NVLINK_INDIRECT ? GDU_NVLINK_YES
                                                                                   : GDU_NVLINK_NO;
    }
    if (p->can_access == 1 && p->native_atomics == 1)
        return GDU_NVLINK_INFERRED;
    return p->can_access < 0 ? GDU_NVLINK_UNKNOWN : GDU_NVLINK_NO;
}

int gdu_snapshot_of(const char *sysroot, gdu_snapshot **out, char *why, size_t why_len)
{
    gdu_sysroot sr;
    *out = NULL;
    snprintf(why, why_len, "path too long");
    if (gdu_sysroot_init(&sr, sysroot) != 0 || gdu_sysroot_check(&sr, why, why_len) != 0)
        return GDU_SNAPSHOT_BAD_ROOT;
    gdu_snapshot *s = malloc(sizeof *s);
    if (s == NULL) {
        gdu_sysroot_free(&sr);
        return GDU_SNAPSHOT_NO_MEMORY;
    }
    gdu_snapshot_take(&sr, NULL, 0, s);
    gdu_sysroot_free(&sr);
    *out = s;
    return 0;
}

void gdu_snapshot_release(gdu_snapshot *s)
{
    if (s == NULL)
        return;
    gdu_snapshot_free(s);
    free(s);
}
