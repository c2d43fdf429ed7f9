/* GPU checks of the I/O engine, printing PASS/FAIL/SKIP lines for
 * tests/gpu/io.sh:
 *   io-roundtrip-<mode>: GPU -> file -> GPU byte-exact through the pipeline
 *     backend (unaligned batch write, then reads buffered and O_DIRECT);
 *   io-vmm: the same read into cuMemCreate/cuMemMap memory;
 *   io-many-extents: 3000 small extents in one batch (a loader's pattern);
 *   io-auto / io-cufile: which backend AUTO and CUFILE pick here, and why.
 * usage: io_gpu_roundtrip DIR [GPU]. Without a GPU it prints SKIP and exits 0. */
#include "cuda/cuda_api.h"
#include "gdunlock/io.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const gdu_cuda *cu;
static int failures;
static int gpu;

static void result(int ok, const char *check, const char *detail)
{
    printf("%s %s: %s\n", ok ? "PASS" : "FAIL", check, detail);
    fflush(stdout);
    failures += !ok;
}

static uint8_t pattern(uint64_t x) { return (uint8_t)(((x + 17) * 0x9E3779B97F4A7C15ull) >> 56); }

static gdu_io_engine *engine(gdu_io_backend b, gdu_io_direct direct, char *why, size_t len)
{
    gdu_io_options o;
    gdu_io_options_default(&o, NULL, 0);
    o.backend = b;
    o.direct = direct;
    o.device = gpu;
    gdu_io_engine *e = NULL;
    return gdu_io_engine_create(&o, &e, why, len) == 0 ? e : NULL;
}

/* Reads [0, size) of path into dev with the engine; 1 if byte-exact. */
static int read_back(gdu_io_engine *e, const char *path, gdu_CUdeviceptr dev, uint64_t size,
                     uint8_t *host, char *why, size_t len)
{
    gdu_io_file *f = NULL;
    if (gdu_io_open(e, path, GDU_IO_READ, &f, why, len) != 0)
        return 0;
    cu->cuMemsetD8(dev, 0, size);
    cu->cuCtxSynchronize(); /* legacy-stream memset before non-blocking copies */
    uint64_t done = 0;
    int r = gdu_io_read(f, 0, size, (void *)(uintptr_t)dev, &done, why, len);
    if (r == 0 && done != size)
        snprintf(why, len, "read %llu of %llu bytes", (unsigned long long)done,
                 (unsigned long long)size);
    int ok = r == 0 && done == size;
    if (ok) {
        cu->cuMemcpyDtoH(host, dev, size);
        for (uint64_t i = 0; ok && i < size; i++)
            if (host[i] != pattern(i)) {
                snprintf(why, len, "byte %llu differs", (unsigned long long)i);
                ok = 0;
            }
    }
    if (ok)
        snprintf(why, len, "%llu bytes exact; %s", (unsigned long long)size, gdu_io_file_reason(f));
    gdu_io_close(f);
    return ok;
}

static void roundtrip(const char *dir, gdu_CUdeviceptr src, gdu_CUdeviceptr dst, uint64_t size,
                      uint8_t *host)
{
    char path[4096], why[512] = "";
    snprintf(path, sizeof path, "%s/io-roundtrip.bin", dir);
    gdu_io_engine *e = engine(GDU_IO_BACKEND_PIPELINE, GDU_IO_DIRECT_ON, why, sizeof why);
    if (e == NULL) {
        result(0, "io-roundtrip-write", why);
        return;
    }
    gdu_io_file *f = NULL;
    int ok = gdu_io_open(e, path, GDU_IO_WRITE | GDU_IO_CREATE | GDU_IO_TRUNCATE, &f, why,
                         sizeof why) == 0;
    if (ok) {
        /* Unaligned pieces, one batch. */
        uint64_t cut1 = 4097, cut2 = size / 2 + 333;
        gdu_io_extent x[3] = {
            {.offset = 0, .length = cut1, .mem = (void *)(uintptr_t)src},
            {.offset = cut1, .length = cut2 - cut1, .mem = (void *)(uintptr_t)(src + cut1)},
            {.offset = cut2, .length = size - cut2, .mem = (void *)(uintptr_t)(src + cut2)},
        };
        gdu_io_request *r = NULL;
        uint64_t bytes = 0;
        ok = gdu_io_submit(f, GDU_IO_OP_WRITE, x, 3, NULL, NULL, &r) == 0 &&
             gdu_io_wait(r, &bytes, why, sizeof why) == 0 && bytes == size &&
             gdu_io_sync(f, why, sizeof why) == 0;
        if (ok)
            snprintf(why, sizeof why, "%llu bytes GPU -> file; %s", (unsigned long long)size,
                     gdu_io_file_reason(f));
        gdu_io_close(f);
    }
    result(ok, "io-roundtrip-write", why);
    gdu_io_engine_destroy(e);
    int fd = open(path, O_RDONLY);
    if (fd >= 0) { /* the O_DIRECT read must come from the disk, not the cache */
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
    }
    static const struct {
        gdu_io_direct mode;
        const char *name;
    } modes[] = {
        {GDU_IO_DIRECT_ON, "io-roundtrip-read-direct"},
        {GDU_IO_DIRECT_OFF, "io-roundtrip-read-buffered"},
    };
    for (size_t m = 0; m < 2; m++) {
        e = engine(GDU_IO_BACKEND_PIPELINE, modes[m].mode, why, sizeof why);
        ok = e != NULL && read_back(e, path, dst, size, host, why, sizeof why);
        result(ok, modes[m].name, why);
        gdu_io_engine_destroy(e);
    }
    unlink(path);
}

static void vmm_read(const char *dir, uint64_t size, uint8_t *host)
{
    char path[4096], why[512] = "";
    snprintf(path, sizeof path, "%s/io-vmm.bin", dir);
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    for (uint64_t i = 0; i < size; i++)
        host[i] = pattern(i);
    int ok = fd >= 0 && write(fd, host, size) == (ssize_t)size;
    if (fd >= 0)
        close(fd);
    gdu_CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = GDU_CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = GDU_CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = gpu;
    size_t gran = 0, bytes;
    gdu_CUmemGenericAllocationHandle h = 0;
    gdu_CUdeviceptr va = 0;
    ok = ok &&
         cu->cuMemGetAllocationGranularity(&gran, &prop, GDU_CU_MEM_ALLOC_GRANULARITY_MINIMUM) == 0;
    bytes = gran ? (size + gran - 1) / gran * gran : size;
    ok = ok && cu->cuMemCreate(&h, bytes, &prop, 0) == 0 &&
         cu->cuMemAddressReserve(&va, bytes, gran, 0, 0) == 0 &&
         cu->cuMemMap(va, bytes, 0, h, 0) == 0;
    gdu_CUmemAccessDesc acc = {{GDU_CU_MEM_LOCATION_TYPE_DEVICE, gpu},
                               GDU_CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    ok = ok && cu->cuMemSetAccess(va, bytes, &acc, 1) == 0;
    if (!ok) {
        result(0, "io-vmm", "VMM allocation failed");
    } else {
        gdu_io_engine *e = engine(GDU_IO_BACKEND_PIPELINE, GDU_IO_DIRECT_AUTO, why, sizeof why);
        ok = e != NULL && read_back(e, path, va, size, host, why, sizeof why);
        result(ok, "io-vmm", why);
        gdu_io_engine_destroy(e);
        cu->cuMemUnmap(va, bytes);
    }
    if (va)
        cu->cuMemAddressFree(va, bytes);
    if (h)
        cu->cuMemRelease(h);
    unlink(path);
}

/* A checkpoint loader's pattern: thousands of small tensors in one batch. */
static void many_extents(const char *dir, gdu_CUdeviceptr dev, uint64_t size, uint8_t *host)
{
    char path[4096], why[512] = "";
    snprintf(path, sizeof path, "%s/io-many.bin", dir);
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    for (uint64_t i = 0; i < size; i++)
        host[i] = pattern(i);
    int ok = fd >= 0 && write(fd, host, size) == (ssize_t)size;
    if (fd >= 0)
        close(fd);
    enum { N = 3000 };
    gdu_io_extent *x = calloc(N, sizeof *x);
    uint64_t off = 0, rng = 12345;
    size_t n = 0;
    for (; x != NULL && n < N && off < size; n++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        uint64_t len = 1 + rng % (64u << 10);
        if (off + len > size)
            len = size - off;
        x[n] = (gdu_io_extent){.offset = off, .length = len, .mem = (void *)(uintptr_t)(dev + off)};
        off += len;
    }
    gdu_io_engine *e = engine(GDU_IO_BACKEND_PIPELINE, GDU_IO_DIRECT_AUTO, why, sizeof why);
    gdu_io_file *f = NULL;
    ok = ok && e != NULL && gdu_io_open(e, path, GDU_IO_READ, &f, why, sizeof why) == 0;
    if (ok) {
        cu->cuMemsetD8(dev, 0, size);
        cu->cuCtxSynchronize(); /* legacy-stream memset before non-blocking copies */
        gdu_io_request *r = NULL;
        uint64_t bytes = 0;
        ok = gdu_io_submit(f, GDU_IO_OP_READ, x, n, NULL, NULL, &r) == 0 &&
             gdu_io_wait(r, &bytes, why, sizeof why) == 0 && bytes == off;
        cu->cuMemcpyDtoH(host, dev, off);
        for (uint64_t i = 0; ok && i < off; i++)
            ok = host[i] == pattern(i);
        snprintf(why, sizeof why, "%zu extents, %llu bytes %s", n, (unsigned long long)off,
                 ok ? "exact" : "WRONG or failed");
        gdu_io_close(f);
    }
    result(ok, "io-many-extents", why);
    gdu_io_engine_destroy(e);
    free(x);
    unlink(path);
}

/* Which backend AUTO and an explicit CUFILE choose on this machine: both
 * outcomes pass as long as the reason is named and data that moves is right. */
static void backend_choice(const char *dir, gdu_CUdeviceptr dev, uint64_t size, uint8_t *host)
{
    char path[4096], why[512] = "";
    snprintf(path, sizeof path, "%s/io-auto.bin", dir);
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    for (uint64_t i = 0; i < size; i++)
        host[i] = pattern(i);
    if (fd < 0 || write(fd, host, size) != (ssize_t)size) {
        result(0, "io-auto", "cannot write the test file");
        if (fd >= 0)
            close(fd);
        return;
    }
    close(fd);
    gdu_io_engine *e = engine(GDU_IO_BACKEND_AUTO, GDU_IO_DIRECT_AUTO, why, sizeof why);
    if (e != NULL) {
        printf("INFO io-auto engine: %s\n", gdu_io_engine_reason(e));
        int ok = read_back(e, path, dev, size, host, why, sizeof why);
        result(ok, "io-auto", why);
        gdu_io_engine_destroy(e);
    } else {
        result(0, "io-auto", why);
    }
    e = engine(GDU_IO_BACKEND_CUFILE, GDU_IO_DIRECT_AUTO, why, sizeof why);
    if (e == NULL) {
        char text[600];
        snprintf(text, sizeof text, "cuFile cannot be used here: %s", why);
        result(why[0] != '\0', "io-cufile", text);
    } else {
        gdu_io_file *f = NULL;
        if (gdu_io_open(e, path, GDU_IO_READ, &f, why, sizeof why) != 0) {
            char text[600];
            snprintf(text, sizeof text, "cuFile refuses the file, named: %s", why);
            result(strstr(why, "CU_FILE") != NULL, "io-cufile", text);
        } else {
            gdu_io_close(f);
            int ok = read_back(e, path, dev, size, host, why, sizeof why);
            result(ok, "io-cufile", why);
        }
        gdu_io_engine_destroy(e);
    }
    unlink(path);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: io_gpu_roundtrip DIR [GPU]\n");
        return 64;
    }
    gpu = argc > 2 ? atoi(argv[2]) : 0;
    char why[256] = "";
    cu = gdu_cuda_load(why, sizeof why);
    gdu_CUdevice dev;
    gdu_CUcontext ctx = NULL;
    if (cu == NULL || cu->cuDeviceGet(&dev, gpu) != 0 ||
        cu->cuDevicePrimaryCtxRetain(&ctx, dev) != 0) {
        printf("SKIP io-gpu: no usable GPU %d: %s\n", gpu, why[0] ? why : "cuDeviceGet failed");
        return 0;
    }
    cu->cuCtxSetCurrent(ctx);
    const uint64_t size = (257ull << 20) + 12345;
    uint8_t *host = malloc(size);
    gdu_CUdeviceptr a = 0, b = 0;
    if (host == NULL || cu->cuMemAlloc(&a, size) != 0 || cu->cuMemAlloc(&b, size) != 0) {
        printf("FAIL io-gpu: cannot allocate %llu bytes on the GPU and host\n",
               (unsigned long long)size);
        return 1;
    }
    for (uint64_t i = 0; i < size; i++)
        host[i] = pattern(i);
    cu->cuMemcpyHtoD(a, host, size);
    roundtrip(argv[1], a, b, size, host);
    vmm_read(argv[1], 64ull << 20, host);
    many_extents(argv[1], b, 96ull << 20, host);
    backend_choice(argv[1], b, 32ull << 20, host);
    cu->cuMemFree(a);
    cu->cuMemFree(b);
    free(host);
    cu->cuDevicePrimaryCtxRelease(dev);
    return failures ? 1 : 0;
}
