/* The shim's own dma-buf export (`gdunlock run --rdma`, docs/rdma-model.md
 * section 3): NCCL's DMA-BUF route asks libcuda for a dma-buf of a GPU
 * buffer (cuMemGetHandleForAddressRange), which GeForce libcuda refuses,
 * though the kernel asks nothing of a GeForce that it does not ask of a
 * datacenter GPU (no brand check in nv-dmabuf.c or RM's dma-buf calls). The
 * shim makes the same escape libcuda would: NV_ESC_EXPORT_TO_DMABUF_FD on
 * the GPU's device file, naming the process's RM client and, for each
 * tracked mapping the range crosses, its memory handle with the range's
 * offset and size in it. The kernel then checks what it checks for anyone
 * (osapi.c:1286-1360: a video memory object of that GPU, page-aligned, inside
 * the object). Only on GPUs the shim unlocks; elsewhere libcuda's answer
 * stands. */
#include "driverabi/nv_dmabuf.h"
#include "driverabi/nv_escape.h"
#include "driverabi/nv_status.h"
#include "shim/shim_state.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* One memory object's part of the range. */
typedef struct {
    uint32_t client, memory;
    uint64_t offset, size;
    gdu_obj *subdevice;
} dmabuf_piece;

/* The piece of [at, end) that starts at at, from the mapping that holds it.
 * Returns 0, or -1 with why. Under the lock. */
static int piece_at(gdu_shim *s, uint64_t at, uint64_t end, dmabuf_piece *p, char *why,
                    size_t why_len)
{
    const gdu_mapping *m = gdu_shim_mapping_at(s, at);
    const gdu_obj *mem = m != NULL ? gdu_shim_obj(s, m->client, m->memory) : NULL;
    p->subdevice = mem != NULL ? gdu_shim_subdevice_of(s, mem) : NULL;
    if (p->subdevice == NULL) {
        snprintf(why, why_len, "0x%llx is not GPU memory the shim saw mapped",
                 (unsigned long long)at);
        return -1;
    }
    uint64_t mapped_end = m->base + m->length;
    p->client = m->client;
    p->memory = m->memory;
    p->offset = m->offset + (at - m->base);
    p->size = (end < mapped_end ? end : mapped_end) - at;
    return 0;
}

/* Walks the range: its number of pieces, every one of the same client and
 * GPU (the first piece's in *first). Returns the count, or 0 with why. */
static unsigned count_pieces(gdu_shim *s, uint64_t va, uint64_t end, dmabuf_piece *first, char *why,
                             size_t why_len)
{
    unsigned n = 0;
    for (uint64_t at = va; at < end; n++) {
        dmabuf_piece p;
        if (piece_at(s, at, end, &p, why, why_len) != 0)
            return 0;
        if (n == 0) {
            *first = p;
        } else if (p.client != first->client || p.subdevice != first->subdevice) {
            snprintf(why, why_len,
                     "the range crosses from one GPU or RM client into another at 0x%llx",
                     (unsigned long long)at);
            return 0;
        }
        at += p.size;
    }
    return n;
}

/* One export escape on the GPU's file gpu_fd, in the layout of the driver.
 * Returns RM's status (NV_ERR_GENERIC when the ioctl failed: errno's text in
 * why, or a fault was injected). */
static uint32_t export_call(gdu_shim *s, int gpu_fd, gdu_nv_dmabuf_export *p, char *why,
                            size_t why_len)
{
    if (gdu_shim_own_call_faulted(s)) {
        snprintf(why, why_len, "fault injected into the shim's RM call #%llu",
                 (unsigned long long)s->rm_calls);
        return GDU_NV_ERR_GENERIC;
    }
    bool current = gdu_nv_dmabuf_has_mapping_type(s->driver_version);
    gdu_nv_dmabuf_export_515 old;
    void *block = p;
    size_t size = sizeof *p;
    if (!current) {
        memset(&old, 0, sizeof old);
        GDU_NV_DMABUF_COPY_SHARED(&old, p);
        block = &old;
        size = sizeof old;
    }
    int saved = errno;
    int r = s->ops.ioctl(s->ops.ctx, gpu_fd,
                         gdu_nv_ioctl_request(GDU_NV_ESC_EXPORT_TO_DMABUF_FD, size), block);
    if (r != 0)
        snprintf(why, why_len, "the export escape failed: %s", strerror(errno));
    errno = saved;
    if (!current) {
        p->fd = old.fd;
        p->status = old.status;
    }
    return r != 0 ? GDU_NV_ERR_GENERIC : p->status;
}

/* Fills the next batch of pieces (from *at) into p. */
static void fill_batch(gdu_shim *s, uint64_t *at, uint64_t end, gdu_nv_dmabuf_export *p)
{
    char unused[8];
    p->num_objects = 0;
    while (*at < end && p->num_objects < GDU_NV_DMABUF_MAX_HANDLES) {
        dmabuf_piece piece;
        if (piece_at(s, *at, end, &piece, unused, sizeof unused) != 0)
            return; /* counted already: cannot happen under the lock */
        p->handles[p->num_objects] = piece.memory;
        p->offsets[p->num_objects] = piece.offset;
        p->sizes[p->num_objects] = piece.size;
        p->num_objects++;
        *at += piece.size;
    }
}

/* The escapes for n pieces of [va, end) on gpu_fd: one to create the
 * dma-buf, one more for each further 128 handles. Returns the dma-buf's fd,
 * or -1 with why (*status: RM's). */
static int export_pieces(gdu_shim *s, int gpu_fd, uint32_t client, uint64_t va, uint64_t end,
                         unsigned n, uint32_t *status, char *why, size_t why_len)
{
    static gdu_nv_dmabuf_export p; /* 2.6 KB, used under the lock only */
    memset(&p, 0, sizeof p);
    p.fd = -1;
    p.h_client = client;
    p.total_objects = n;
    p.total_size = end - va;
    p.mapping_type = GDU_NV_DMABUF_MAPPING_DEFAULT;
    int dmabuf = -1;
    for (uint64_t at = va; at < end;) {
        p.index = (uint32_t)(p.index + p.num_objects);
        fill_batch(s, &at, end, &p);
        *status = export_call(s, gpu_fd, &p, why, why_len);
        if (*status != GDU_NV_OK) {
            if (why[0] == '\0')
                snprintf(why, why_len, "RM refused the export: %s", gdu_nv_status_name(*status));
            if (dmabuf >= 0)
                s->ops.close_file(s->ops.ctx, dmabuf);
            return -1;
        }
        dmabuf = p.fd;
    }
    return dmabuf;
}

/* What rules an export out before the range is looked at: the process
 * not under --rdma or the shim not acting, a PCIe mapping asked for, a
 * range that is not whole pages. Under the lock. */
static bool may_export(const gdu_shim *s, uint64_t va, uint64_t size, unsigned long long flags,
                       char *why, size_t why_len)
{
    long page = sysconf(_SC_PAGESIZE);
    if (!s->cfg.rdma_network) {
        snprintf(why, why_len, "not under gdunlock run --rdma");
        return false;
    }
    if (s->passive || s->refused || !s->layout_known || s->ops.open_gpu_file == NULL) {
        snprintf(why, why_len, "the shim is not acting in this process%s%s",
                 s->refusal[0] ? ": " : "", s->refusal);
        return false;
    }
    if (flags != 0) {
        snprintf(why, why_len,
                 "flags 0x%llx ask for a PCIe mapping, which the kernel makes only on coherent "
                 "(C2C) systems",
                 flags);
        return false;
    }
    if (page <= 0 || size == 0 || va % (uint64_t)page != 0 || size % (uint64_t)page != 0 ||
        va + size < va) {
        snprintf(why, why_len,
                 "[0x%llx, +%llu) is not whole pages: the kernel exports page-aligned ranges only",
                 (unsigned long long)va, (unsigned long long)size);
        return false;
    }
    return true;
}

static int export_locked(gdu_shim *s, uint64_t va, uint64_t size, unsigned long long flags,
                         char *why, size_t why_len)
{
    if (!may_export(s, va, size, flags, why, why_len))
        return -1;
    dmabuf_piece first;
    unsigned n = count_pieces(s, va, va + size, &first, why, why_len);
    if (n == 0)
        return -1;
    gdu_gpu_stats *g = gdu_shim_gpu(s, first.subdevice);
    if (g->mode != GDU_TPP_UNLOCKED) {
        snprintf(why, why_len, "GPU %s is not one the shim unlocks: libcuda's answer stands",
                 g->pci[0] ? g->pci : "?");
        return -1;
    }
    if (g->pci[0] == '\0') {
        snprintf(why, why_len, "RM did not say the GPU's PCI address: its device file is unknown");
        return -1;
    }
    int gpu_fd = s->ops.open_gpu_file(s->ops.ctx, g->pci);
    if (gpu_fd < 0) {
        snprintf(why, why_len, "cannot open the device file of GPU %s: %s", g->pci,
                 strerror(-gpu_fd));
        g->dmabuf_failures++;
        return -1;
    }
    uint32_t status = GDU_NV_OK;
    int fd = export_pieces(s, gpu_fd, first.client, va, va + size, n, &status, why, why_len);
    s->ops.close_file(s->ops.ctx, gpu_fd);
    if (fd < 0) {
        g->dmabuf_failures++;
        snprintf(g->dmabuf_why, sizeof g->dmabuf_why, "%s", why);
        /* The kernel's dma-buf support is off for this GPU (nv.c's
         * dma_buf_supported): no later export can work there. */
        if (status == GDU_NV_ERR_NOT_SUPPORTED)
            g->dmabuf_unsupported = true;
        return -1;
    }
    g->dmabuf_exports++;
    return fd;
}

int gdu_shim_export_dmabuf(gdu_shim *s, uint64_t va, uint64_t size, unsigned long long flags,
                           char *why, size_t why_len)
{
    why[0] = '\0';
    pthread_mutex_lock(&s->lock);
    int fd = export_locked(s, va, size, flags, why, why_len);
    pthread_mutex_unlock(&s->lock);
    if (fd >= 0)
        gdu_shim_log(s, GDU_LOG_DEBUG, "dma-buf of [0x%llx, +%llu) made by the shim: fd %d",
                     (unsigned long long)va, (unsigned long long)size, fd);
    else if (s->cfg.rdma_network)
        gdu_shim_log(s, GDU_LOG_INFO, "no dma-buf of [0x%llx, +%llu): %s", (unsigned long long)va,
                     (unsigned long long)size, why);
    return fd;
}

bool gdu_shim_stands_in_dma_buf(const gdu_shim *s) { return s->cfg.test_rdma_attr_zero; }
