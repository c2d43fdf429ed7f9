/* cuFile backend: the driver opened once per engine, nvidia-fs detected from
 * the driver properties, files registered by descriptor, and chunks moved
 * between the file and caller (device) memory through a bounded ring of
 * registered device buffers.
 *
 * Why a ring: nvidia-fs pins a registered buffer through BAR1 (the kernel's
 * persistent pin, src/pinmodel/pin_model.h). A GeForce without Resizable BAR
 * has 256 MiB of BAR1, about 220 MiB pinnable: a checkpoint's destination
 * cannot be registered, and must never be. The engine registers at most the
 * budget, in buffers of its chunk size, reads into them and copies on to the
 * destination on the GPU (device to device, far faster than the storage). */
#include "io/io_internal.h"
#include "rm/rm_bar1_info.h"
#include "pinmodel/pin_model.h"
#include "util/pci_addr.h"
#include "util/pci_resource.h"
#include "util/text.h"
#include "util/units.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    gdu_CUdeviceptr buf;
    gdu_CUstream stream; /* the copies between this buffer and caller memory */
    bool registered;
} ring_slot;

struct gdu_io_ring {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    size_t slot_bytes;
    size_t n;
    ring_slot *slots;
    size_t *free; /* indexes of idle slots, free_n of them */
    size_t free_n;
    uint64_t registered;
    char note[GDU_IO_WHY]; /* what it registered and why that much */
};

static const char *nvfs_proc_dir(void)
{
    const char *d = getenv("GDUNLOCK_NVFS_PROC");
    return d != NULL && *d ? d : "/proc/driver/nvidia-fs";
}

bool gdu_io_nvfs_present(void) { return access(nvfs_proc_dir(), F_OK) == 0; }

int gdu_io_cufile_engine_init(gdu_io_engine *e, char *why, size_t len)
{
    char lwhy[GDU_IO_WHY] = "";
    e->cf = gdu_cufile_load(lwhy, sizeof lwhy);
    if (e->cf == NULL) {
        snprintf(why, len, "%s", lwhy);
        return -ENODEV;
    }
    gdu_CUcontext prev = NULL;
    int r = gdu_io_cuda_enter(e, &prev, why, len);
    if (r != 0)
        return r;
    char text[128];
    gdu_CUfileError st = e->cf->cuFileDriverOpen();
    if (st.err != GDU_CU_FILE_SUCCESS) {
        snprintf(why, len, "cuFileDriverOpen: %s", gdu_cufile_status_text(st, text, sizeof text));
        r = -ENODEV;
    } else {
        e->cufile_open = true;
        /* Room to spare in case a newer libcufile's struct has grown. */
        union {
            gdu_CUfileDrvProps p;
            unsigned char room[1024];
        } buf;
        memset(&buf, 0, sizeof buf);
        st = e->cf->cuFileDriverGetProperties(&buf.p);
        const gdu_CUfileDrvProps props = buf.p;
        /* Compat mode reports nvfs version 0.0; /proc/driver/nvidia-fs exists
         * only while the kernel module is loaded. */
        char version[512];
        snprintf(version, sizeof version, "%s/version", nvfs_proc_dir());
        e->nvfs_loaded = (st.err == GDU_CU_FILE_SUCCESS && props.nvfs.major_version != 0) ||
                         access(version, F_OK) == 0;
        if (e->nvfs_loaded)
            snprintf(why, len, "nvidia-fs %u.%u", props.nvfs.major_version,
                     props.nvfs.minor_version);
        else
            snprintf(why, len, "nvidia-fs not loaded (cuFile compat mode only)");
    }
    gdu_cuda_ctx_restore(e->cu, prev);
    return r;
}

static void ring_fini(gdu_io_engine *e)
{
    struct gdu_io_ring *g = e->ring;
    if (g == NULL)
        return;
    for (size_t i = 0; i < g->n; i++) {
        if (g->slots[i].registered)
            e->cf->cuFileBufDeregister((const void *)(uintptr_t)g->slots[i].buf);
        if (g->slots[i].stream != NULL)
            e->cu->cuStreamDestroy(g->slots[i].stream);
        if (g->slots[i].buf != 0)
            e->cu->cuMemFree(g->slots[i].buf);
    }
    pthread_cond_destroy(&g->cond);
    pthread_mutex_destroy(&g->lock);
    free(g->slots);
    free(g->free);
    free(g);
    e->ring = NULL;
}

void gdu_io_cufile_engine_fini(gdu_io_engine *e)
{
    ring_fini(e);
    if (e->cufile_open)
        e->cf->cuFileDriverClose();
    e->cufile_open = false;
}

/* The engine's GPU as a PCI address ("0000:1b:00.0"); -1 when CUDA or the
 * spelling is unknown. */
static int engine_pci(gdu_io_engine *e, char addr[GDU_PCI_ADDR_SIZE])
{
    char id[32] = "";
    if (e->cu->cuDeviceGetPCIBusId(id, (int)sizeof id, e->primary.dev) != GDU_CUDA_SUCCESS ||
        gdu_pci_addr_normalize(id, addr, GDU_PCI_ADDR_SIZE) != 0)
        return -1;
    return 0;
}

/* The size test setting name stands for: 1 with *v and src ("NAME=value")
 * set, 0 when it is unset, -1 when it is not a size above 0. */
static int test_size(const char *name, uint64_t *v, char *src, size_t len)
{
    const char *text = getenv(name);
    if (text == NULL || !*text)
        return 0;
    if (gdu_parse_size(text, v) != 0 || *v == 0 || *v > INT64_MAX)
        return -1;
    snprintf(src, len, "%s=%s", name, text);
    return 1;
}

/* BAR1 of the engine's GPU: $GDUNLOCK_TEST_BAR1, else the second memory BAR
 * (the first is BAR0's registers) in sysfs; 0 unknown, -1 a bad setting.
 * src says where it came from. */
static int64_t bar1_bytes(const char *addr, char *src, size_t len)
{
    uint64_t v = 0;
    int test = test_size("GDUNLOCK_TEST_BAR1", &v, src, len);
    if (test != 0)
        return test < 0 ? -1 : (int64_t)v;
    if (addr == NULL)
        return 0;
    snprintf(src, len, "/sys/bus/pci/devices/%s/resource", addr);
    return (int64_t)gdu_pci_bar1_read(addr);
}

/* RM's count of the BAR1 no process maps now, shared by every process
 * (other programs' pins and CPU mappings take from it): a moment's figure
 * the ring must fit in too. $GDUNLOCK_TEST_BAR1_AVAILABLE (a test setting),
 * else RM through a client of our own (rm/rm_bar1_info.h), not asked
 * while $GDUNLOCK_TEST_BAR1 simulates another BAR1. 0 unknown (src says
 * why), -1 a bad setting. */
static int64_t bar1_available(const char *addr, char *src, size_t len)
{
    uint64_t v = 0;
    int test = test_size("GDUNLOCK_TEST_BAR1_AVAILABLE", &v, src, len);
    if (test != 0)
        return test < 0 ? -1 : (int64_t)v;
    const char *simulated = getenv("GDUNLOCK_TEST_BAR1");
    if (simulated != NULL && *simulated) {
        snprintf(src, len, "not asked: GDUNLOCK_TEST_BAR1 simulates another BAR1");
        return 0;
    }
    if (addr == NULL) {
        snprintf(src, len, "the GPU's PCI address is unknown");
        return 0;
    }
    gdu_rm_bar1 b;
    char why[128] = "";
    if (gdu_rm_bar1_of(addr, &gdu_rm_kernel_calls, &b, why, sizeof why) != 0 || b.available == 0) {
        snprintf(src, len, "RM did not say: %s", why[0] ? why : "no figure");
        return 0;
    }
    snprintf(src, len, "RM");
    return b.available > INT64_MAX ? INT64_MAX : (int64_t)b.available;
}

/* One buffer of the ring, allocated, given a stream and registered. */
static int ring_slot_init(gdu_io_engine *e, ring_slot *s, size_t bytes, char *why, size_t len)
{
    char text[128];
    gdu_CUresult r = e->cu->cuMemAlloc(&s->buf, bytes);
    if (r != GDU_CUDA_SUCCESS) {
        s->buf = 0;
        snprintf(why, len, "cuMemAlloc of a %zu-byte cuFile buffer: %s", bytes,
                 gdu_cuda_result_name(r));
        return -ENOMEM;
    }
    r = e->cu->cuStreamCreate(&s->stream, 0);
    if (r != GDU_CUDA_SUCCESS) {
        s->stream = NULL;
        snprintf(why, len, "cuStreamCreate: %s", gdu_cuda_result_name(r));
        return -EIO;
    }
    gdu_CUfileError st = e->cf->cuFileBufRegister((const void *)(uintptr_t)s->buf, bytes, 0);
    if (st.err != GDU_CU_FILE_SUCCESS) {
        snprintf(why, len, "cuFileBufRegister of %zu bytes: %s", bytes,
                 gdu_cufile_status_text(st, text, sizeof text));
        return -ENOTSUP;
    }
    s->registered = true;
    return 0;
}

/* A ring of n free slots of slot bytes, none registered yet; NULL without
 * memory. */
static struct gdu_io_ring *ring_new(size_t n, size_t slot)
{
    struct gdu_io_ring *g = calloc(1, sizeof *g);
    if (g == NULL || (g->slots = calloc(n, sizeof *g->slots)) == NULL ||
        (g->free = calloc(n, sizeof *g->free)) == NULL) {
        if (g != NULL)
            free(g->slots);
        free(g);
        return NULL;
    }
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->cond, NULL);
    g->slot_bytes = slot;
    return g;
}

/* Allocates and registers e's ring's n slots with cuFile, in e's context.
 * Returns 0, or a negative errno with why in note, the ring taken down. */
static int ring_register(gdu_io_engine *e, size_t n, char *note, size_t len)
{
    struct gdu_io_ring *g = e->ring;
    char why[GDU_IO_WHY] = "";
    gdu_CUcontext prev = NULL;
    int r = gdu_io_cuda_enter(e, &prev, why, sizeof why);
    for (size_t i = 0; r == 0 && i < n; i++) {
        g->n++;
        r = ring_slot_init(e, &g->slots[i], g->slot_bytes, why, sizeof why);
        if (r == 0) {
            g->free[g->free_n++] = i;
            g->registered += g->slot_bytes;
        }
    }
    if (r != 0) {
        snprintf(note, len, "%s", why);
        ring_fini(e);
    }
    gdu_cuda_ctx_restore(e->cu, prev);
    return r;
}

int gdu_io_cufile_ring_init(gdu_io_engine *e, char *note, size_t len)
{
    char src[96] = "", avail_src[160] = "";
    char addr[GDU_PCI_ADDR_SIZE];
    bool addr_known = engine_pci(e, addr) == 0;
    int64_t bar1 = bar1_bytes(addr_known ? addr : NULL, src, sizeof src);
    if (bar1 < 0) {
        snprintf(note, len, "GDUNLOCK_TEST_BAR1=%s is invalid: expected a size such as 256M",
                 getenv("GDUNLOCK_TEST_BAR1"));
        return -EINVAL;
    }
    int64_t available = bar1_available(addr_known ? addr : NULL, avail_src, sizeof avail_src);
    if (available < 0) {
        snprintf(note, len,
                 "GDUNLOCK_TEST_BAR1_AVAILABLE=%s is invalid: expected a size such as 200M",
                 getenv("GDUNLOCK_TEST_BAR1_AVAILABLE"));
        return -EINVAL;
    }
    /* Unknown: as small as a GeForce without Resizable BAR. */
    uint64_t assumed = bar1 > 0 ? (uint64_t)bar1 : (uint64_t)256 << 20;
    gdu_pin_gpu gpu = {.bar1_bytes = assumed, .bar1_available = (uint64_t)available};
    uint64_t budget = gdu_pin_gpu_budget(&gpu);
    char rm[sizeof avail_src + 64];
    if (available > 0)
        snprintf(rm, sizeof rm, "; %" PRIu64 " MiB of it unused by any process (%s)",
                 (uint64_t)available >> 20, avail_src);
    else
        snprintf(rm, sizeof rm, "; unused BAR1 unknown, %s", avail_src);
    size_t slot = (e->opt.chunk_size + GDU_PIN_PAGE - 1) / GDU_PIN_PAGE * GDU_PIN_PAGE;
    size_t n = e->opt.workers;
    if (n > budget / slot)
        n = (size_t)(budget / slot);
    if (n == 0) {
        snprintf(note, len,
                 "BAR1 budget of %" PRIu64 " bytes (BAR1 %" PRIu64 " bytes, %s%s) holds "
                 "no %zu-byte cuFile buffer",
                 budget, assumed, bar1 > 0 ? src : "unknown", rm, slot);
        return -ENOSPC;
    }
    struct gdu_io_ring *g = ring_new(n, slot);
    if (g == NULL)
        return -ENOMEM;
    e->ring = g;
    int r = ring_register(e, n, note, len);
    if (r == 0) {
        int at = snprintf(g->note, sizeof g->note,
                          "ring of %zu x %zu KiB registered buffers (%" PRIu64 " MiB of a %" PRIu64
                          " MiB BAR1 budget; BAR1 %" PRIu64 " MiB%s%.95s",
                          n, slot >> 10, g->registered >> 20, budget >> 20, assumed >> 20,
                          bar1 > 0 ? " from " : ", unknown: assumed", bar1 > 0 ? src : "");
        /* RM's figure last, cut short where the note is full. */
        if (at > 0 && (size_t)at < sizeof g->note)
            snprintf(g->note + at, sizeof g->note - (size_t)at, "%s)", rm);
        snprintf(note, len, "%s", g->note);
    }
    return r;
}

const char *gdu_io_cufile_ring_note(const gdu_io_engine *e)
{
    return e->ring != NULL ? e->ring->note : "";
}

uint64_t gdu_io_cufile_ring_registered(const gdu_io_engine *e)
{
    return e->ring != NULL ? e->ring->registered : 0;
}

static size_t ring_take(struct gdu_io_ring *g)
{
    pthread_mutex_lock(&g->lock);
    while (g->free_n == 0)
        pthread_cond_wait(&g->cond, &g->lock);
    size_t i = g->free[--g->free_n];
    pthread_mutex_unlock(&g->lock);
    return i;
}

static void ring_give(struct gdu_io_ring *g, size_t i)
{
    pthread_mutex_lock(&g->lock);
    g->free[g->free_n++] = i;
    pthread_cond_signal(&g->cond);
    pthread_mutex_unlock(&g->lock);
}

/* libcufile opens every file registered with it a second time, by the name
 * readlink gives for /proc/PID/fd/N, with the descriptor's flags, O_DIRECT
 * added or taken away (libcufile 1.15.1: "local fd failed to be created given
 * the user fd"), and reads through that descriptor where it cannot use the
 * one it was given (compat mode, unaligned requests). A file deleted or
 * replaced by rename since it was opened has no such name (readlink says
 * "PATH (deleted)"): libcufile fails with CU_FILE_GETNEWFD_FAILED, and a name
 * that led to another file would have it read that one. 0 when the name of
 * fd leads to fd's file, else -ENOTSUP with why. */
static int named_here(int fd, char *why, size_t len)
{
    char link[64], name[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, name, sizeof name - 1);
    struct stat mine, there;
    if (n < 0 || fstat(fd, &mine) != 0) {
        snprintf(why, len,
                 "cannot read the file's name from %s: %s (libcufile opens a file "
                 "again by that name)",
                 link, strerror(errno));
        return -ENOTSUP;
    }
    name[n] = '\0';
    if (stat(name, &there) == 0 && there.st_dev == mine.st_dev && there.st_ino == mine.st_ino)
        return 0;
    char shown[128];
    snprintf(why, len,
             "deleted or replaced since it was opened, and libcufile opens a file again by its "
             "name (%s); the pipeline backend reads it through its descriptor",
             gdu_text_shorten(name, 100, shown, sizeof shown));
    return -ENOTSUP;
}

int gdu_io_cufile_register(gdu_io_file *f, const char *path, char *why, size_t len)
{
    gdu_io_engine *e = f->engine;
    int r = named_here(f->fd, why, len);
    gdu_CUcontext prev = NULL;
    if (r == 0)
        r = gdu_io_cuda_enter(e, &prev, why, len);
    if (r != 0)
        return r;
    f->dfd = open(path, (f->flags & GDU_IO_WRITE ? ((f->flags & GDU_IO_READ) ? O_RDWR : O_WRONLY)
                                                 : O_RDONLY) |
                            O_DIRECT | O_CLOEXEC);
    gdu_CUfileDescr d;
    memset(&d, 0, sizeof d);
    d.type = GDU_CU_FILE_HANDLE_TYPE_OPAQUE_FD;
    d.handle.fd = f->dfd >= 0 ? f->dfd : f->fd;
    gdu_CUfileError st = e->cf->cuFileHandleRegister(&f->cf_handle, &d);
    gdu_cuda_ctx_restore(e->cu, prev);
    if (st.err != GDU_CU_FILE_SUCCESS) {
        f->cf_handle = NULL;
        char text[128];
        snprintf(why, len, "%s", gdu_cufile_status_text(st, text, sizeof text));
        r = -ENOTSUP;
    } else if ((r = named_here(f->fd, why, len)) != 0) { /* renamed while libcufile opened it */
        gdu_io_cufile_deregister(f);
    }
    if (r != 0 && f->dfd >= 0) {
        close(f->dfd);
        f->dfd = -1;
    }
    return r;
}

void gdu_io_cufile_deregister(gdu_io_file *f)
{
    if (f->cf_handle != NULL)
        f->engine->cf->cuFileHandleDeregister(f->cf_handle);
    f->cf_handle = NULL;
}

/* One cuFileRead/cuFileWrite of n bytes at off through the ring buffer,
 * retried on EINTR; bytes moved, or a negative errno with why. */
static ssize_t ring_io(gdu_io_file *f, gdu_io_op op, gdu_CUdeviceptr buf, size_t n, uint64_t off,
                       char *why, size_t len)
{
    const gdu_cufile *cf = f->engine->cf;
    for (;;) {
        ssize_t r =
            op == GDU_IO_OP_READ
                ? cf->cuFileRead(f->cf_handle, (void *)(uintptr_t)buf, n, (off_t)off, 0)
                : cf->cuFileWrite(f->cf_handle, (const void *)(uintptr_t)buf, n, (off_t)off, 0);
        if (r >= 0)
            return r;
        const char *what = op == GDU_IO_OP_READ ? "cuFileRead" : "cuFileWrite";
        if (r == -1) {
            int err = errno;
            if (err == EINTR)
                continue;
            snprintf(why, len, "%s at offset %" PRIu64 ": %s", what, off, strerror(err));
            return err > 0 ? -err : -EIO;
        }
        snprintf(why, len, "%s at offset %" PRIu64 ": %s", what, off,
                 gdu_cufile_error_name((int)r));
        return -EIO;
    }
}

/* A device-to-device copy on the slot's stream, waited for. */
static int ring_copy(gdu_io_engine *e, ring_slot *s, gdu_CUdeviceptr dst, gdu_CUdeviceptr src,
                     size_t n, char *why, size_t len)
{
    gdu_CUresult r = e->cu->cuMemcpyDtoDAsync(dst, src, n, s->stream);
    if (r == GDU_CUDA_SUCCESS)
        r = e->cu->cuStreamSynchronize(s->stream);
    if (r == GDU_CUDA_SUCCESS)
        return 0;
    snprintf(why, len, "copy between a cuFile buffer and caller memory: %s",
             gdu_cuda_result_name(r));
    return -EIO;
}

int gdu_io_cufile_chunk(gdu_io_file *f, gdu_io_op op, const gdu_io_chunk *c, uint64_t *good,
                        char *why, size_t len)
{
    gdu_io_engine *e = f->engine;
    struct gdu_io_ring *g = e->ring;
    size_t i = ring_take(g);
    ring_slot *s = &g->slots[i];
    gdu_CUdeviceptr mem = (gdu_CUdeviceptr)(uintptr_t)c->mem;
    uint64_t got = 0;
    int rc = 0;
    *good = 0;
    while (rc == 0 && got < c->length) {
        size_t n = c->length - got < g->slot_bytes ? (size_t)(c->length - got) : g->slot_bytes;
        if (op == GDU_IO_OP_READ) {
            ssize_t r = ring_io(f, op, s->buf, n, c->offset + got, why, len);
            if (r <= 0) {
                rc = (int)r;
                break; /* 0: end of file */
            }
            rc = ring_copy(e, s, mem + got, s->buf, (size_t)r, why, len);
            got += rc == 0 ? (uint64_t)r : 0;
        } else {
            rc = ring_copy(e, s, s->buf, mem + got, n, why, len);
            for (size_t put = 0; rc == 0 && put < n;) {
                ssize_t r = ring_io(f, op, s->buf + put, n - put, c->offset + got + put, why, len);
                if (r == 0) {
                    snprintf(why, len, "cuFileWrite at offset %" PRIu64 " made no progress",
                             c->offset + got + put);
                    r = -EIO;
                }
                if (r < 0)
                    rc = (int)r;
                else
                    put += (size_t)r;
            }
            got += rc == 0 ? n : 0;
        }
        *good = got;
    }
    ring_give(g, i);
    return rc;
}
