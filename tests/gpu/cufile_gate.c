/* cufile_gate [FILE]: what libcufile does with a GPU buffer: cuInit, a 16 MiB
 * cuMemAlloc buffer, cuFileDriverOpen, cuFileBufRegister, with FILE
 * cuFileHandleRegister and a 1 MiB cuFileRead (its bytes compared with the
 * file's), cuFileBufDeregister, cuFileDriverClose, each through dlopen + dlsym
 * as libcufile's users reach it. Lines: STEP <call> <status>; each call is
 * announced on stderr ("PHASE <call>"), where the shim's trace of libcufile
 * (GDUNLOCK_LOG=debug) goes too. Run with CUFILE_ENV_PATH_JSON pointing at a
 * config whose logging level is TRACE to see libcufile's reasons. */
#include "cuda/cufile_api.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static void phase(const char *call) { fprintf(stderr, "PHASE %s\n", call); }

static void *sym(void *h, const char *name)
{
    void *f = dlsym(h, name);
    if (f == NULL)
        printf("STEP %s missing\n", name);
    return f;
}

/* cuFileHandleRegister, a 1 MiB cuFileRead into ptr, the bytes compared. */
static void read_file(void *cuda, void *cufile, const char *path, unsigned long long ptr)
{
    gdu_CUfileError (*hreg)(void **, gdu_CUfileDescr *) =
        (gdu_CUfileError(*)(void **, gdu_CUfileDescr *))sym(cufile, "cuFileHandleRegister");
    void (*hdereg)(void *) = (void (*)(void *))sym(cufile, "cuFileHandleDeregister");
    ssize_t (*rd)(void *, void *, size_t, off_t, off_t) =
        (ssize_t(*)(void *, void *, size_t, off_t, off_t))sym(cufile, "cuFileRead");
    int (*dtoh)(void *, unsigned long long, size_t) =
        (int (*)(void *, unsigned long long, size_t))sym(cuda, "cuMemcpyDtoH_v2");
    int fd = open(path, O_RDONLY | O_DIRECT);
    if (fd < 0)
        fd = open(path, O_RDONLY);
    if (!hreg || !hdereg || !rd || !dtoh || fd < 0) {
        printf("STEP cuFileRead unavailable\n");
        return;
    }
    /* Type 1: CU_FILE_HANDLE_TYPE_OPAQUE_FD. The descriptor sits at offset 8
     * (the layout asserted in cufile_api.h): at offset 4, as this program
     * once put it, libcufile read descriptor 0 and answered 5018. */
    gdu_CUfileDescr d = {.type = 1, .handle.fd = fd};
    void *fh = NULL;
    phase("cuFileHandleRegister");
    gdu_CUfileError e = hreg(&fh, &d);
    printf("STEP cuFileHandleRegister %d %d\n", e.err, e.cu_err);
    if (e.err == 0) {
        phase("cuFileRead");
        ssize_t n = rd(fh, (void *)(size_t)ptr, 1 << 20, 0, 0);
        static char got[1 << 20], want[1 << 20];
        /* The file's bytes through a buffered descriptor: fd may be O_DIRECT,
         * which refuses this unaligned buffer. */
        int plain = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t w = plain >= 0 ? pread(plain, want, sizeof want, 0) : -1;
        if (plain >= 0)
            close(plain);
        const char *verdict = n != (1 << 20)                       ? "short-read"
                              : dtoh(got, ptr, sizeof got) != 0    ? "copy-back-failed"
                              : w != (ssize_t)sizeof want          ? "file-read-failed"
                              : memcmp(got, want, sizeof got) != 0 ? "bytes-differ"
                                                                   : "bytes-match";
        printf("STEP cuFileRead %zd %s\n", n, verdict);
        hdereg(fh);
    }
    close(fd);
}

int main(int argc, char **argv)
{
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    void *cufile = dlopen("libcufile.so.0", RTLD_NOW | RTLD_LOCAL);
    if (cuda == NULL || cufile == NULL) {
        printf("NOGPU: %s\n", dlerror());
        return 69;
    }
    int (*init)(unsigned) = (int (*)(unsigned))sym(cuda, "cuInit");
    int (*retain)(void **, int) = (int (*)(void **, int))sym(cuda, "cuDevicePrimaryCtxRetain");
    int (*set)(void *) = (int (*)(void *))sym(cuda, "cuCtxSetCurrent");
    int (*alloc)(unsigned long long *, size_t) =
        (int (*)(unsigned long long *, size_t))sym(cuda, "cuMemAlloc_v2");
    gdu_CUfileError (*drv_open)(void) = (gdu_CUfileError(*)(void))sym(cufile, "cuFileDriverOpen");
    gdu_CUfileError (*reg)(const void *, size_t, int) =
        (gdu_CUfileError(*)(const void *, size_t, int))sym(cufile, "cuFileBufRegister");
    gdu_CUfileError (*dereg)(const void *) =
        (gdu_CUfileError(*)(const void *))sym(cufile, "cuFileBufDeregister");
    gdu_CUfileError (*drv_close)(void) =
        (gdu_CUfileError(*)(void))sym(cufile, "cuFileDriverClose_v2");
    if (drv_close == NULL)
        drv_close = (gdu_CUfileError(*)(void))sym(cufile, "cuFileDriverClose");
    if (!init || !retain || !set || !alloc || !drv_open || !reg || !dereg || !drv_close)
        return 1;
    void *ctx = NULL;
    unsigned long long ptr = 0;
    if (init(0) != 0 || retain(&ctx, 0) != 0 || set(ctx) != 0 || alloc(&ptr, 16 << 20) != 0) {
        printf("NOGPU: CUDA set-up failed\n");
        return 69;
    }
    phase("cuFileDriverOpen");
    gdu_CUfileError e = drv_open();
    printf("STEP cuFileDriverOpen %d %d\n", e.err, e.cu_err);
    phase("cuFileBufRegister");
    e = reg((const void *)(size_t)ptr, 16 << 20, 0);
    printf("STEP cuFileBufRegister %d %d\n", e.err, e.cu_err);
    if (argc > 1)
        read_file(cuda, cufile, argv[1], ptr);
    phase("cuFileBufDeregister");
    e = dereg((const void *)(size_t)ptr);
    printf("STEP cuFileBufDeregister %d %d\n", e.err, e.cu_err);
    e = drv_close();
    printf("STEP cuFileDriverClose %d %d\n", e.err, e.cu_err);
    return 0;
}
