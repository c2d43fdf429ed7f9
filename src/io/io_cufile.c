/* cuFile backend: the driver opened once per engine, nvidia-fs detected from
 * the driver properties, files registered by descriptor, and chunks moved
 * straight between the file and caller (device) memory. */
#include "io/io_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    e->cu->cuCtxSetCurrent(prev);
    return r;
}

void gdu_io_cufile_engine_fini(gdu_io_engine *e)
{
    if (e->cufile_open)
        e->cf->cuFileDriverClose();
    e->cufile_open = false;
}

int gdu_io_cufile_register(gdu_io_file *f, const char *path, char *why, size_t len)
{
    gdu_io_engine *e = f->engine;
    f->dfd = open(path, (f->flags & GDU_IO_WRITE ? ((f->flags & GDU_IO_READ) ? O_RDWR : O_WRONLY)
                                                   : O_RDONLY) |
                            O_DIRECT | O_CLOEXEC);
    gdu_CUfileDescr d;
    memset(&d, 0, sizeof d);
    d.type = GDU_CU_FILE_HANDLE_TYPE_OPAQUE_FD;
    d.handle.fd = f->dfd >= 0 ? f->dfd : f->fd;
    gdu_CUcontext prev = NULL;
    int r = gdu_io_cuda_enter(e, &prev, why, len);
    if (r != 0)
        return r;
    gdu_CUfileError st = e->cf->cuFileHandleRegister(&f->cf_handle, &d);
    e->cu->cuCtxSetCurrent(prev);
    if (st.err == GDU_CU_FILE_SUCCESS)
        return 0;
    f->cf_handle = NULL;
    char text[128];
    snprintf(why, len, "%s", gdu_cufile_status_text(st, text, sizeof text));
    if (f->dfd >= 0)
        close(f->dfd);
    f->dfd = -1;
    return -ENOTSUP;
}

void gdu_io_cufile_deregister(gdu_io_file *f)
{
    if (f->cf_handle != NULL)
        f->engine->cf->cuFileHandleDeregister(f->cf_handle);
    f->cf_handle = NULL;
}

int gdu_io_cufile_chunk(gdu_io_file *f, gdu_io_op op, const gdu_io_chunk *c, uint64_t *good,
                        char *why, size_t len)
{
    const gdu_cufile *cf = f->engine->cf;
    uint64_t got = 0;
    *good = 0;
    while (got < c->length) {
        size_t n = (size_t)(c->length - got);
        ssize_t r = op == GDU_IO_OP_READ
                        ? cf->cuFileRead(f->cf_handle, c->mem, n, (off_t)(c->offset + got), (off_t)got)
                        : cf->cuFileWrite(f->cf_handle, c->mem, n, (off_t)(c->offset + got), (off_t)got);
        if (r < 0) {
            const char *what = op == GDU_IO_OP_READ ? "cuFileRead" : "cuFileWrite";
            if (r == -1) {
                int err = errno;
                if (err == EINTR)
                    continue;
                snprintf(why, len, "%s at offset %" PRIu64 ": %s", what, c->offset + got, strerror(err));
                return err > 0 ? -err : -EIO;
            }
            snprintf(why, len, "%s at offset %" PRIu64 ": %s", what, c->offset + got,
                     gdu_cufile_error_name((int)r));
            return -EIO;
        }
        if (r == 0) {
            if (op == GDU_IO_OP_WRITE) {
                snprintf(why, len, "cuFileWrite at offset %" PRIu64 " made no progress", c->offset + got);
                return -EIO;
            }
            break;
        }
        got += (uint64_t)r;
        *good = got;
    }
    return 0;
}
