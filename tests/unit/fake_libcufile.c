/* A fake libcufile.so.0 for CPU tests of the engine's cuFile backend, used
 * with fake_libcuda.c (device memory is host memory). Behaviour comes from the
 * environment, read at each call:
 *   FAKE_CUFILE_NVFS_MAJOR  nvidia-fs major version reported (0: compat mode)
 *   FAKE_CUFILE_REGISTER    a CUfileOpError cuFileHandleRegister returns (e.g. 5027)
 *   FAKE_CUFILE_FAIL_AT     a file offset whose read/write fails with CU_FILE_IO_ERROR
 *   FAKE_CUFILE_BAR1_LIMIT  bytes of buffers registered at once past which
 *                           cuFileBufRegister fails, as pinning past BAR1 does
 * Reads and writes move at most 1 MiB per call, so callers must loop.
 * fake_cufile_registered() says what is registered now and at most. */
#include "cuda/cufile_api.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define MAX_PER_CALL (1u << 20)
#define FAKE_IO_ERROR 5040 /* beyond what our table names: "unknown" is fine */

/* cuFile takes unaligned requests on an O_DIRECT descriptor; the fake reads
 * and writes through a buffered descriptor of its own, opened as libcufile
 * opens its "local fd": by the name readlink gives for /proc/PID/fd/N, with
 * the given descriptor's flags less O_DIRECT. A file deleted or replaced since
 * it was opened has no such name ("PATH (deleted)"): CU_FILE_GETNEWFD_FAILED. */
typedef struct {
    int fd;
} fake_handle;

static long env_long(const char *name, long fallback)
{
    const char *v = getenv(name);
    return v != NULL && *v ? strtol(v, NULL, 0) : fallback;
}

static gdu_CUfileError status(int err) { return (gdu_CUfileError){err, 0}; }

gdu_CUfileError cuFileDriverOpen(void) { return status(0); }
gdu_CUfileError cuFileDriverClose_v2(void) { return status(0); }
gdu_CUfileError cuFileGetVersion(int *v)
{
    *v = 1150;
    return status(0);
}

gdu_CUfileError cuFileDriverGetProperties(gdu_CUfileDrvProps *p)
{
    p->nvfs.major_version = (unsigned)env_long("FAKE_CUFILE_NVFS_MAJOR", 0);
    p->nvfs.minor_version = 0;
    return status(0);
}

gdu_CUfileError cuFileHandleRegister(gdu_CUfileHandle *fh, gdu_CUfileDescr *d)
{
    long err = env_long("FAKE_CUFILE_REGISTER", 0);
    if (err != 0)
        return status((int)err);
    if (d->type != GDU_CU_FILE_HANDLE_TYPE_OPAQUE_FD || d->fs_ops != NULL)
        return status(GDU_CU_FILE_INVALID_VALUE);
    fake_handle *h = malloc(sizeof *h);
    if (h == NULL)
        return status(GDU_CU_FILE_INTERNAL_ERROR);
    char link[64], name[4096];
    snprintf(link, sizeof link, "/proc/%d/fd/%d", (int)getpid(), d->handle.fd);
    ssize_t n = readlink(link, name, sizeof name - 1);
    int flags = fcntl(d->handle.fd, F_GETFL);
    if (n < 0 || flags < 0) {
        free(h);
        return status(GDU_CU_FILE_INVALID_VALUE);
    }
    name[n] = '\0';
    h->fd = open(name, (flags & ~O_DIRECT) | O_CLOEXEC);
    if (h->fd < 0) {
        free(h);
        return status(GDU_CU_FILE_GETNEWFD_FAILED);
    }
    *fh = h;
    return status(0);
}

void cuFileHandleDeregister(gdu_CUfileHandle fh)
{
    close(((fake_handle *)fh)->fd);
    free(fh);
}
/* Registered buffers (base, bytes), for the BAR1 limit and the peak. */
static struct {
    const void *base;
    size_t n;
} bufs[256];
static size_t registered, peak;
static pthread_mutex_t buf_lock = PTHREAD_MUTEX_INITIALIZER;

void fake_cufile_registered(size_t *now, size_t *most)
{
    pthread_mutex_lock(&buf_lock);
    *now = registered;
    *most = peak;
    peak = registered;
    pthread_mutex_unlock(&buf_lock);
}

gdu_CUfileError cuFileBufRegister(const void *base, size_t n, int flags)
{
    long limit = env_long("FAKE_CUFILE_BAR1_LIMIT", -1);
    pthread_mutex_lock(&buf_lock);
    int err = 0;
    size_t slot = 0;
    while (slot < 256 && bufs[slot].base != NULL)
        slot++;
    if (slot == 256 || (limit >= 0 && registered + n > (size_t)limit))
        err = GDU_CU_FILE_INTERNAL_ERROR;
    else {
        bufs[slot].base = base;
        bufs[slot].n = n;
        registered += n;
        peak = registered > peak ? registered : peak;
    }
    pthread_mutex_unlock(&buf_lock);
    return status(err);
}

gdu_CUfileError cuFileBufDeregister(const void *base)
{
    pthread_mutex_lock(&buf_lock);
    for (size_t i = 0; i < 256; i++)
        if (bufs[i].base == base && base != NULL) {
            registered -= bufs[i].n;
            bufs[i].base = NULL;
            break;
        }
    pthread_mutex_unlock(&buf_lock);
    return status(0);
}

static int fails(off_t off, size_t n)
{
    long at = env_long("FAKE_CUFILE_FAIL_AT", -1);
    return at >= 0 && at >= off && (size_t)(at - off) < n;
}

ssize_t cuFileRead(gdu_CUfileHandle fh, void *base, size_t size, off_t off, off_t base_off)
{
    size_t n = size < MAX_PER_CALL ? size : MAX_PER_CALL;
    if (fails(off, n))
        return -FAKE_IO_ERROR;
    return pread(((fake_handle *)fh)->fd, (char *)base + base_off, n, off);
}

ssize_t cuFileWrite(gdu_CUfileHandle fh, const void *base, size_t size, off_t off, off_t base_off)
{
    size_t n = size < MAX_PER_CALL ? size : MAX_PER_CALL;
    if (fails(off, n))
        return -FAKE_IO_ERROR;
    return pwrite(((fake_handle *)fh)->fd, (const char *)base + base_off, n, off);
}
