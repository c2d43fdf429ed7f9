/* The CPU-path integrity check: when cuFile cannot be used at all, verify
 * still proves that data makes the round trip GPU -> file -> GPU correctly,
 * through gdunlock's own I/O engine (pipeline backend: pread/pwrite, pinned
 * staging, async copies). Both sides use the device's primary context. */
#include "gdunlock/io.h"
#include "util/pattern.h"
#include "verify/verify_internal.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

/* Device -> file -> device through the engine, then compare on the host. */
static void round_trip(gdu_io_file *f, const gdu_cuda *cu, gdu_CUdeviceptr src, gdu_CUdeviceptr dst,
                       void *host, uint64_t size, gdu_verify_evidence *ev)
{
    char why[GDU_VERIFY_TEXT] = "";
    uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ 0xe9617e;
    gdu_pattern_fill(host, 0, size, seed);
    gdu_CUresult r = cu->cuMemcpyHtoD(src, host, size);
    if (r == GDU_CUDA_SUCCESS)
        r = cu->cuMemsetD8(dst, 0, size);
    if (r != GDU_CUDA_SUCCESS) {
        gdu_verify_call_set(&ev->engine, false, r, "staging the pattern on the GPU: %s",
                            gdu_cuda_result_name(r));
        return;
    }
    uint64_t done = 0;
    int rc = gdu_io_write(f, 0, size, (const void *)(uintptr_t)src, &done, why, sizeof why);
    if (rc == 0 && done != size)
        snprintf(why, sizeof why, "short write: %llu of %llu bytes", (unsigned long long)done,
                 (unsigned long long)size);
    if (rc == 0 && done == size)
        rc = gdu_io_sync(f, why, sizeof why);
    if (rc != 0 || done != size) {
        gdu_verify_call_set(&ev->engine, false, rc, "engine write: %s", why);
        return;
    }
    rc = gdu_io_read(f, 0, size, (void *)(uintptr_t)dst, &done, why, sizeof why);
    if (rc != 0 || done != size) {
        gdu_verify_call_set(&ev->engine, false, rc, "engine read: %s",
                            rc ? why : "short read: the file is shorter than what was written");
        return;
    }
    r = cu->cuMemcpyDtoH(host, dst, size);
    if (r != GDU_CUDA_SUCCESS) {
        gdu_verify_call_set(&ev->engine, false, r, "copying the data back: %s",
                            gdu_cuda_result_name(r));
        return;
    }
    uint64_t bad = gdu_pattern_check(host, 0, size, seed);
    ev->engine_integrity_ok = bad == UINT64_MAX;
    if (ev->engine_integrity_ok)
        gdu_verify_call_set(&ev->engine, true, 0, "wrote and read back %llu bytes, identical",
                            (unsigned long long)size);
    else
        gdu_verify_call_set(&ev->engine, true, 0,
                            "data read back differs from what was written, first at byte %llu",
                            (unsigned long long)bad);
}

void gdu_verify_engine_check(const gdu_verify_options *opts, const gdu_cuda *cu,
                             gdu_CUdeviceptr src, gdu_CUdeviceptr dst, void *host,
                             gdu_verify_evidence *ev)
{
    char why[GDU_VERIFY_TEXT] = "";
    gdu_io_options o;
    int rc = gdu_io_options_default(&o, why, sizeof why);
    if (rc != 0) {
        gdu_verify_call_set(&ev->engine, false, rc, "the I/O engine's settings: %s", why);
        return;
    }
    o.backend = GDU_IO_BACKEND_PIPELINE;
    o.device = opts->gpu;
    gdu_io_engine *e = NULL;
    rc = gdu_io_engine_create(&o, &e, why, sizeof why);
    if (rc != 0) {
        gdu_verify_call_set(&ev->engine, false, rc, "creating the I/O engine: %s", why);
        return;
    }
    gdu_io_file *f = NULL;
    rc = gdu_io_open(e, ev->path, GDU_IO_READ | GDU_IO_WRITE | GDU_IO_CREATE | GDU_IO_TRUNCATE, &f,
                     why, sizeof why);
    if (rc != 0) {
        gdu_verify_call_set(&ev->engine, false, rc, "opening %s through the I/O engine: %s",
                            ev->path, why);
    } else {
        snprintf(ev->engine_backend, sizeof ev->engine_backend, "%s",
                 gdu_io_backend_name(gdu_io_file_backend(f)));
        snprintf(ev->engine_reason, sizeof ev->engine_reason, "%s", gdu_io_file_reason(f));
        round_trip(f, cu, src, dst, host, ev->size, ev);
        gdu_io_close(f);
    }
    gdu_io_engine_destroy(e);
}
