#include "probe/rdma_probe.h"

#include "probe/topo_path.h"

#include <stdio.h>
#include <string.h>

/* A file's first line into buf: "" when absent, "?" when there but
 * unreadable or empty (NCCL tests existence alone, so it counts). */
static void first_line(gdu_sysroot *sr, const char *path, char *buf, size_t len)
{
    buf[0] = '\0';
    if (gdu_sysroot_read_line(sr, path, buf, len) != 0 && gdu_sysroot_exists(sr, path))
        snprintf(buf, len, "?");
}

static void probe_dev(gdu_sysroot *sr, const char *name, gdu_rdma_dev *d)
{
    snprintf(d->name, sizeof d->name, "%s", name);
    char path[256], real[512];
    snprintf(path, sizeof path, "/sys/class/infiniband/%s/device", name);
    if (gdu_sysroot_realpath(sr, path, real, sizeof real) == 0)
        (void)gdu_sysfs_path_last_bdf(real, d->bdf, sizeof d->bdf);
    snprintf(path, sizeof path, "/sys/class/infiniband/%s/ports/1/link_layer", name);
    (void)gdu_sysroot_read_line(sr, path, d->link_layer, sizeof d->link_layer);
    snprintf(path, sizeof path, "/sys/class/infiniband/%s/ports/1/state", name);
    (void)gdu_sysroot_read_line(sr, path, d->state, sizeof d->state);
}

void gdu_rdma_probe(gdu_sysroot *sr, gdu_rdma *out)
{
    memset(out, 0, sizeof *out);
    char **names = NULL;
    long n = gdu_sysroot_list(sr, "/sys/class/infiniband", &names);
    out->class_present = n >= 0;
    for (long i = 0; i < n && out->n_devs < GDU_RDMA_MAX_DEVS; i++)
        probe_dev(sr, names[i], &out->devs[out->n_devs++]);
    if (n > 0)
        gdu_sysroot_free_names(names, n);
    first_line(sr, "/sys/kernel/mm/memory_peers/nv_mem/version", out->nv_mem, sizeof out->nv_mem);
    first_line(sr, "/sys/kernel/mm/memory_peers/nv_mem_nc/version", out->nv_mem_nc,
               sizeof out->nv_mem_nc);
    first_line(sr, "/sys/module/nvidia_peermem/version", out->peermem, sizeof out->peermem);
}

bool gdu_rdma_peer_memory(const gdu_rdma *r)
{
    return r->nv_mem[0] || r->nv_mem_nc[0] || r->peermem[0];
}
