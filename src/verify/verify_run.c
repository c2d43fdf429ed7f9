/* The verify run: gathers the evidence gdu_verify_decide judges.
 *
 * Order matters: nvidia-fs's stats are read before the first cuFile buffer
 * registration (registration is what maps GPU memory through BAR1) and after
 * the last read, while the buffers are still registered, so that the deltas
 * cover exactly this run's mappings and Registered_MiB still shows them. */
#include "cuda/cuda_ctx.h"
#include "cuda/cufile_api.h"
#include "util/open_regular.h"
#include "util/pattern.h"
#include "verify/verify_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Everything one run holds, released by run_cleanup. */
struct run {
    const gdu_cuda *cu;
    const gdu_cufile *cf;
    gdu_cuda_ctx primary; /* retained and current for the whole run */
    int fd;
    void *host;
    gdu_verify_devbuf src[GDU_VERIFY_MEM_COUNT], dst[GDU_VERIFY_MEM_COUNT];
    bool src_registered[GDU_VERIFY_MEM_COUNT], dst_registered[GDU_VERIFY_MEM_COUNT];
    bool driver_opened;
    gdu_CUfileHandle fh;
};

static int setup_cuda(struct run *run, gdu_verify_evidence *ev, char *why, size_t why_len)
{
    char text[GDU_VERIFY_TEXT];
    run->cu = gdu_cuda_load(text, sizeof text);
    if (!run->cu) {
        gdu_verify_call_set(&ev->cuda, false, -ENODEV, "libcuda: %s", text);
        snprintf(why, why_len, "%s", ev->cuda.text);
        return -ENODEV;
    }
    const gdu_cuda *cu = run->cu;
    int count = 0;
    gdu_CUresult r = cu->cuDeviceGetCount(&count);
    if (r != GDU_CUDA_SUCCESS || ev->gpu < 0 || ev->gpu >= count) {
        gdu_verify_call_set(&ev->cuda, false, r ? r : -ENODEV,
                            "GPU %d does not exist (%d GPU%s visible%s%s)", ev->gpu, count,
                            count == 1 ? "" : "s", r ? ": " : "", r ? gdu_cuda_result_name(r) : "");
        snprintf(why, why_len, "%s", ev->cuda.text);
        return -ENODEV;
    }
    r = gdu_cuda_ctx_enter(cu, ev->gpu, &run->primary, NULL, NULL, 0);
    if (r != GDU_CUDA_SUCCESS) {
        gdu_verify_call_set(&ev->cuda, false, r, "GPU %d: context: %s", ev->gpu,
                            gdu_cuda_result_name(r));
        snprintf(why, why_len, "%s", ev->cuda.text);
        return -ENODEV;
    }
    cu->cuDeviceGetName(ev->gpu_name, (int)sizeof ev->gpu_name, run->primary.dev);
    cu->cuDeviceGetPCIBusId(ev->gpu_pci, (int)sizeof ev->gpu_pci, run->primary.dev);
    gdu_verify_call_set(&ev->cuda, true, 0, "GPU %d %s (%s)", ev->gpu, ev->gpu_name, ev->gpu_pci);
    return 0;
}

/* Whether verify may write over the file st describes: a regular file, empty
 * or with --force. 0, or -errno with why. */
static int may_overwrite(const gdu_verify_options *opts, const struct stat *st, char *why,
                         size_t why_len)
{
    if (!S_ISREG(st->st_mode)) {
        snprintf(why, why_len, "%s is %s, not a regular file; verify only writes to regular files",
                 opts->path, gdu_file_kind(st->st_mode));
        return -EINVAL;
    }
    if (st->st_size > 0 && !opts->force) {
        snprintf(why, why_len,
                 "%s exists and is not empty; verify overwrites and removes it: pass --force "
                 "to allow that, or name a new file",
                 opts->path);
        return -EEXIST;
    }
    return 0;
}

/* Creates (or, with force, truncates) PATH, with O_DIRECT where the file
 * system accepts it: cuFile needs O_DIRECT for the direct path. What lies
 * at PATH now is checked again on the descriptor: a FIFO or someone's file
 * put there since check_target is refused, never blocked on or truncated
 * (-errno with why); a file that cannot be created is evidence (0). */
static int open_file(struct run *run, const gdu_verify_options *opts, gdu_verify_evidence *ev,
                     char *why, size_t why_len)
{
    const int flags = O_RDWR | O_CREAT | O_CLOEXEC;
    char text[GDU_VERIFY_TEXT];
    bool direct = true;
    int fd = gdu_open_regular(ev->path, flags | O_DIRECT, 0644, text, sizeof text);
    if (fd == -EINVAL) { /* the file system refuses O_DIRECT (or it is no regular file) */
        direct = false;
        fd = gdu_open_regular(ev->path, flags, 0644, text, sizeof text);
    }
    if (fd == -EINVAL || fd == -EISDIR) {
        snprintf(why, why_len, "%s; verify only writes to regular files", text);
        return -EINVAL;
    }
    if (fd < 0) {
        gdu_verify_call_set(&ev->file, false, fd, "cannot create %s", text);
        return 0;
    }
    struct stat st;
    int rc = fstat(fd, &st) == 0 ? may_overwrite(opts, &st, why, why_len) : -errno;
    if (rc == 0 && ftruncate(fd, 0) != 0)
        rc = -errno;
    if (rc != 0) {
        if (rc != -EEXIST)
            snprintf(why, why_len, "cannot truncate %s: %s", ev->path, strerror(-rc));
        close(fd);
        return rc;
    }
    run->fd = fd;
    if (direct)
        gdu_verify_call_set(&ev->file, true, 0, "%s opened with O_DIRECT", ev->path);
    else
        gdu_verify_call_set(&ev->file, true, 0,
                            "%s: the file system refuses O_DIRECT (EINVAL); opened buffered, so "
                            "cuFile cannot read it directly",
                            ev->path);
    return 0;
}

static void read_nvfs(const gdu_verify_options *opts, gdu_verify_evidence *ev, gdu_nvfs_stats *st,
                      bool *ok)
{
    const char *path = opts->nvfs_stats_path ? opts->nvfs_stats_path : GDU_NVFS_STATS_PATH;
    int rc = gdu_nvfs_stats_read(path, st, ev->nvfs_why, sizeof ev->nvfs_why);
    *ok = rc == 0;
    if (rc != 0 && ev->nvfs_errno == 0)
        ev->nvfs_errno = rc;
}

static void allocate_buffers(struct run *run, gdu_verify_evidence *ev)
{
    for (int m = 0; m < GDU_VERIFY_MEM_COUNT; m++) {
        char why[GDU_VERIFY_TEXT] = "";
        int rc = gdu_verify_devbuf_alloc(run->cu, run->primary.dev, (gdu_verify_mem)m, ev->size,
                                         &run->src[m], why, sizeof why);
        if (rc == 0)
            rc = gdu_verify_devbuf_alloc(run->cu, run->primary.dev, (gdu_verify_mem)m, ev->size,
                                         &run->dst[m], why, sizeof why);
        if (rc == 0)
            gdu_verify_call_set(&ev->buffers[m].alloc, true, 0,
                                "2 x %llu bytes at 64 KiB aligned addresses",
                                (unsigned long long)ev->size);
        else
            gdu_verify_call_set(&ev->buffers[m].alloc, false, rc, "%s", why);
        if (rc == -ENOTSUP)
            snprintf(ev->buffers[m].skipped, sizeof ev->buffers[m].skipped, "%s", why);
    }
}

static void open_cufile(struct run *run, gdu_verify_evidence *ev)
{
    char text[GDU_VERIFY_TEXT], status[160];
    run->cf = gdu_cufile_load(text, sizeof text);
    if (!run->cf) {
        gdu_verify_call_set(&ev->cufile_load, false, -ENOENT, "%s", text);
        return;
    }
    const gdu_cufile *cf = run->cf;
    snprintf(ev->cufile_library, sizeof ev->cufile_library, "%s", cf->path);
    gdu_verify_call_set(&ev->cufile_load, true, 0, "%s", cf->path);
    if (cf->cuFileGetVersion)
        cf->cuFileGetVersion(&ev->cufile_version);

    gdu_CUfileError e = cf->cuFileDriverOpen();
    run->driver_opened = e.err == GDU_CU_FILE_SUCCESS;
    bool open_ok = run->driver_opened || e.err == GDU_CU_FILE_DRIVER_ALREADY_OPEN;
    gdu_verify_call_set(&ev->driver_open, open_ok, e.err, "cuFileDriverOpen: %s",
                        gdu_cufile_status_text(e, status, sizeof status));
    if (!open_ok)
        return;

    gdu_CUfileDrvProps props;
    memset(&props, 0, sizeof props);
    e = cf->cuFileDriverGetProperties(&props);
    gdu_verify_call_set(&ev->driver_props, e.err == GDU_CU_FILE_SUCCESS, e.err,
                        "cuFileDriverGetProperties: %s",
                        gdu_cufile_status_text(e, status, sizeof status));
    if (e.err == GDU_CU_FILE_SUCCESS) {
        ev->nvfs_major = props.nvfs.major_version;
        ev->nvfs_minor = props.nvfs.minor_version;
        ev->compat_allowed = (props.nvfs.dcontrolflags >> GDU_CU_FILE_ALLOW_COMPAT_MODE) & 1u;
        ev->max_direct_io_size = props.nvfs.max_direct_io_size;
    }

    gdu_CUfileDescr descr;
    memset(&descr, 0, sizeof descr);
    descr.type = GDU_CU_FILE_HANDLE_TYPE_OPAQUE_FD;
    descr.handle.fd = run->fd;
    e = cf->cuFileHandleRegister(&run->fh, &descr);
    if (e.err != GDU_CU_FILE_SUCCESS)
        run->fh = NULL;
    gdu_verify_call_set(&ev->handle_register, e.err == GDU_CU_FILE_SUCCESS, e.err,
                        "cuFileHandleRegister(%s): %s", ev->path,
                        gdu_cufile_status_text(e, status, sizeof status));
}

/* cuFileRead/cuFileWrite return bytes moved, -1 with errno, or -CUfileOpError. */
static void record_io(gdu_verify_call *c, const char *op, ssize_t ret, int saved_errno,
                      uint64_t want)
{
    if (ret >= 0 && (uint64_t)ret == want)
        gdu_verify_call_set(c, true, 0, "%s: %llu bytes", op, (unsigned long long)want);
    else if (ret == -1)
        gdu_verify_call_set(c, false, -saved_errno, "%s: failed: %s", op, strerror(saved_errno));
    else if (ret < 0)
        gdu_verify_call_set(c, false, (int)-ret, "%s: %s", op, gdu_cufile_error_name((int)ret));
    else
        gdu_verify_call_set(c, false, 0, "%s: moved %lld of %llu bytes", op, (long long)ret,
                            (unsigned long long)want);
}

static void cufile_round_trip(struct run *run, gdu_verify_mem m, uint64_t seed,
                              gdu_verify_evidence *ev)
{
    const gdu_cuda *cu = run->cu;
    const gdu_cufile *cf = run->cf;
    gdu_verify_buffer *b = &ev->buffers[m];
    char status[160];
    const void *src = (const void *)(uintptr_t)run->src[m].ptr;
    void *dst = (void *)(uintptr_t)run->dst[m].ptr;

    gdu_pattern_fill(run->host, 0, ev->size, seed);
    gdu_CUresult r = cu->cuMemcpyHtoD(run->src[m].ptr, run->host, ev->size);
    if (r == GDU_CUDA_SUCCESS)
        r = cu->cuMemsetD8(run->dst[m].ptr, 0, ev->size);
    if (r != GDU_CUDA_SUCCESS) {
        gdu_verify_call_set(&b->write, false, r, "staging the pattern on the GPU: %s",
                            gdu_cuda_result_name(r));
        return;
    }

    gdu_CUfileError e = cf->cuFileBufRegister(src, ev->size, 0);
    run->src_registered[m] = e.err == GDU_CU_FILE_SUCCESS;
    if (run->src_registered[m]) {
        e = cf->cuFileBufRegister(dst, ev->size, 0);
        run->dst_registered[m] = e.err == GDU_CU_FILE_SUCCESS;
    }
    /* An unregistered buffer still works (cuFile bounces it), so go on either way. */
    gdu_verify_call_set(&b->buf_register, e.err == GDU_CU_FILE_SUCCESS, e.err,
                        "cuFileBufRegister: %s", gdu_cufile_status_text(e, status, sizeof status));

    errno = 0;
    ssize_t ret = cf->cuFileWrite(run->fh, src, ev->size, 0, 0);
    record_io(&b->write, "cuFileWrite", ret, errno, ev->size);
    if (!b->write.ok)
        return;
    errno = 0;
    ret = cf->cuFileRead(run->fh, dst, ev->size, 0, 0);
    record_io(&b->read, "cuFileRead", ret, errno, ev->size);
    if (!b->read.ok)
        return;
    memset(run->host, 0, ev->size);
    r = cu->cuMemcpyDtoH(run->host, run->dst[m].ptr, ev->size);
    if (r != GDU_CUDA_SUCCESS) {
        gdu_verify_call_set(&b->read, false, r, "copying the data back to the host: %s",
                            gdu_cuda_result_name(r));
        return;
    }
    b->compared = true;
    b->mismatch_offset = gdu_pattern_check(run->host, 0, ev->size, seed);
    b->integrity_ok = b->mismatch_offset == UINT64_MAX;
}

static void close_cufile(struct run *run)
{
    if (!run->cf)
        return;
    for (int m = 0; m < GDU_VERIFY_MEM_COUNT; m++) {
        if (run->src_registered[m])
            run->cf->cuFileBufDeregister((const void *)(uintptr_t)run->src[m].ptr);
        if (run->dst_registered[m])
            run->cf->cuFileBufDeregister((const void *)(uintptr_t)run->dst[m].ptr);
        run->src_registered[m] = run->dst_registered[m] = false;
    }
    if (run->fh)
        run->cf->cuFileHandleDeregister(run->fh);
    run->fh = NULL;
    if (run->driver_opened && run->cf->cuFileDriverClose)
        run->cf->cuFileDriverClose();
    run->driver_opened = false;
}

static void run_cleanup(struct run *run, const gdu_verify_options *opts, const char *path)
{
    close_cufile(run);
    for (int m = 0; m < GDU_VERIFY_MEM_COUNT; m++) {
        gdu_verify_devbuf_free(run->cu, &run->src[m]);
        gdu_verify_devbuf_free(run->cu, &run->dst[m]);
    }
    if (run->fd >= 0) { /* removed where PATH still names the file verify wrote */
        struct stat mine, there;
        if (!opts->keep && fstat(run->fd, &mine) == 0 && stat(path, &there) == 0 &&
            mine.st_dev == there.st_dev && mine.st_ino == there.st_ino)
            unlink(path);
        close(run->fd);
    }
    free(run->host);
    if (run->cu != NULL)
        gdu_cuda_ctx_release(run->cu, &run->primary);
}

/* Refuses what verify must not overwrite. */
static int check_target(const gdu_verify_options *opts, char *why, size_t why_len)
{
    struct stat st;
    if (stat(opts->path, &st) != 0) {
        int e = errno;
        if (e != ENOENT) {
            snprintf(why, why_len, "%s: %s", opts->path, strerror(e));
            return -e;
        }
        /* A new file: its directory must exist and be writable. */
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", opts->path);
        char *slash = strrchr(dir, '/');
        if (!slash)
            snprintf(dir, sizeof dir, ".");
        else
            slash[slash == dir ? 1 : 0] = '\0';
        if (access(dir, W_OK | X_OK) != 0) {
            e = errno;
            snprintf(why, why_len, "cannot create %s: %s: %s", opts->path, dir, strerror(e));
            return -e;
        }
        return 0;
    }
    return may_overwrite(opts, &st, why, why_len);
}

static void stage(const gdu_verify_options *opts, const char *what)
{
    if (opts->progress)
        opts->progress(opts->progress_user, what);
}

int gdu_verify_run(const gdu_verify_options *opts, gdu_verify_evidence *ev, char *why,
                   size_t why_len)
{
    gdu_verify_evidence_init(ev, opts);
    if (!opts->path || !opts->path[0] || ev->size > GDU_VERIFY_MAX_SIZE) {
        snprintf(why, why_len, "%s",
                 !opts->path || !opts->path[0] ? "no file named" : "size above 16 GiB");
        return -EINVAL;
    }
    int rc = check_target(opts, why, why_len);
    if (rc != 0)
        return rc;

    struct run run = {.fd = -1};
    stage(opts, "loading CUDA and opening the GPU");
    rc = setup_cuda(&run, ev, why, why_len);
    if (rc != 0)
        return rc;
    run.host = aligned_alloc(4096, ev->size);
    if (!run.host) {
        snprintf(why, why_len, "cannot allocate %llu bytes of host memory",
                 (unsigned long long)ev->size);
        run_cleanup(&run, opts, ev->path);
        return -ENOMEM;
    }
    rc = open_file(&run, opts, ev, why, why_len);
    if (rc != 0) {
        run_cleanup(&run, opts, ev->path);
        return rc;
    }
    if (ev->file.ok) {
        stage(opts, "allocating cuMemAlloc and VMM buffers");
        allocate_buffers(&run, ev);
        read_nvfs(opts, ev, &ev->stats_before, &ev->nvfs_before);
        gdu_verify_cufile_log log;
        gdu_verify_cufile_log_begin(&log);
        stage(opts, "opening cuFile and registering the file");
        open_cufile(&run, ev);
        uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
        if (ev->handle_register.ok)
            for (int m = 0; m < GDU_VERIFY_MEM_COUNT; m++)
                if (ev->buffers[m].alloc.ok) {
                    stage(opts, m == GDU_VERIFY_MEM_VMM
                                    ? "cuFile write + read back: VMM buffers"
                                    : "cuFile write + read back: cuMemAlloc buffers");
                    cufile_round_trip(&run, (gdu_verify_mem)m, seed + 0x1000u * (unsigned)(m + 1),
                                      ev);
                }
        read_nvfs(opts, ev, &ev->stats_after, &ev->nvfs_after);
        if (ev->nvfs_before && ev->nvfs_after)
            gdu_nvfs_stats_delta(&ev->stats_before, &ev->stats_after, &ev->delta);
        close_cufile(&run);
        gdu_verify_cufile_log_end(&log, ev->cufile_log, sizeof ev->cufile_log);
        const gdu_verify_devbuf *src = &run.src[GDU_VERIFY_MEM_CUMEMALLOC],
                                *dst = &run.dst[GDU_VERIFY_MEM_CUMEMALLOC];
        if (!ev->handle_register.ok) {
            stage(opts, "cuFile unusable: checking integrity through the I/O engine");
            if (ev->buffers[GDU_VERIFY_MEM_CUMEMALLOC].alloc.ok)
                gdu_verify_engine_check(opts, run.cu, src->ptr, dst->ptr, run.host, ev);
            else
                gdu_verify_call_set(&ev->engine, false, -ENOMEM,
                                    "no device buffer for the engine check");
        }
    }
    run_cleanup(&run, opts, ev->path);
    return 0;
}
