/* Fake libcufile for verify's CPU tests. FAKE_CUFILE selects what it does:
 *   compat   (default) no nvidia-fs (props 0.0); reads/writes with pread/pwrite
 *   5027     cuFileHandleRegister fails with 5027, as on the H200 machine
 *   direct   nvidia-fs 2.28: as compat, and cuFileBufRegister "maps BAR1" by
 *            copying $FAKE_NVFS_AFTER over the stats file $FAKE_NVFS_STATS
 *   corrupt  as direct, but cuFileRead flips one byte
 *   readfail as direct, but cuFileRead returns -CU_FILE_NVFS_DRIVER_ERROR
 * FAKE_CUFILE_HANG=1 makes cuFileRead sleep a minute (interruption tests).
 * Device pointers are host addresses (see test_verify_fake_cuda.c). */
#include "cuda/cufile_api.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *mode(void)
{
    const char *m = getenv("FAKE_CUFILE");
    return m ? m : "compat";
}

static bool is(const char *m) { return strcmp(mode(), m) == 0; }

static bool has_nvfs(void) { return is("direct") || is("corrupt") || is("readfail"); }

static gdu_CUfileError status(int err) { return (gdu_CUfileError){err, 0}; }

gdu_CUfileError cuFileDriverOpen(void) { return status(GDU_CU_FILE_SUCCESS); }

gdu_CUfileError cuFileDriverClose_v2(void) { return status(GDU_CU_FILE_SUCCESS); }

gdu_CUfileError cuFileGetVersion(int *version)
{
    *version = 1151;
    return status(GDU_CU_FILE_SUCCESS);
}

gdu_CUfileError cuFileDriverGetProperties(gdu_CUfileDrvProps *p)
{
    memset(p, 0, sizeof *p);
    if (has_nvfs()) {
        p->nvfs.major_version = 2;
        p->nvfs.minor_version = 28;
    }
    p->nvfs.dcontrolflags = 1u << GDU_CU_FILE_ALLOW_COMPAT_MODE;
    p->nvfs.max_direct_io_size = 16u << 20;
    return status(GDU_CU_FILE_SUCCESS);
}

struct handle {
    int fd;
};

/* Appends a line to the log named by CUFILE_LOGFILE_PATH, as libcufile does. */
static void log_line(const char *text)
{
    const char *path = getenv("CUFILE_LOGFILE_PATH");
    FILE *f = path && *path ? fopen(path, "a") : NULL;
    if (f) {
        fprintf(f, "\n%s\n", text);
        fclose(f);
    }
}

gdu_CUfileError cuFileHandleRegister(gdu_CUfileHandle *fh, gdu_CUfileDescr *d)
{
    if (is("5027")) {
        log_line("fake-cufile ERROR: udev property ID_FS_USAGE missing for the block device");
        return status(GDU_CU_FILE_HANDLE_NOT_REGISTERED);
    }
    struct handle *h = malloc(sizeof *h);
    if (!h)
        return status(GDU_CU_FILE_INTERNAL_ERROR);
    h->fd = d->handle.fd;
    *fh = h;
    return status(GDU_CU_FILE_SUCCESS);
}

void cuFileHandleDeregister(gdu_CUfileHandle fh) { free(fh); }

/* What nvidia-fs would count for the mapping: the "after" stats appear. */
static void advance_stats(void)
{
    const char *from = getenv("FAKE_NVFS_AFTER"), *to = getenv("FAKE_NVFS_STATS");
    if (!has_nvfs() || !from || !to)
        return;
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    char buf[4096];
    size_t n;
    while (in && out && (n = fread(buf, 1, sizeof buf, in)) > 0)
        fwrite(buf, 1, n, out);
    if (in)
        fclose(in);
    if (out)
        fclose(out);
}

gdu_CUfileError cuFileBufRegister(const void *base, size_t length, int flags)
{
    advance_stats();
    return status(GDU_CU_FILE_SUCCESS);
}

gdu_CUfileError cuFileBufDeregister(const void *base) { return status(GDU_CU_FILE_SUCCESS); }

ssize_t cuFileWrite(gdu_CUfileHandle fh, const void *base, size_t size, off_t off, off_t base_off)
{
    const struct handle *h = fh;
    size_t done = 0;
    while (done < size) {
        ssize_t r =
            pwrite(h->fd, (const char *)base + base_off + done, size - done, off + (off_t)done);
        if (r <= 0)
            return -1;
        done += (size_t)r;
    }
    return (ssize_t)done;
}

ssize_t cuFileRead(gdu_CUfileHandle fh, void *base, size_t size, off_t off, off_t base_off)
{
    if (getenv("FAKE_CUFILE_HANG"))
        sleep(60); /* for tests that interrupt verify mid-run */
    if (is("readfail"))
        return -GDU_CU_FILE_NVFS_DRIVER_ERROR;
    const struct handle *h = fh;
    size_t done = 0;
    while (done < size) {
        ssize_t r = pread(h->fd, (char *)base + base_off + done, size - done, off + (off_t)done);
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        done += (size_t)r;
    }
    if (is("corrupt") && done > 4097)
        ((char *)base)[base_off + 4097] ^= 0x20;
    return (ssize_t)done;
}
