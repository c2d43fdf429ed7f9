/* cufile_gate: what libcufile does with a GPU buffer: cuInit, a 16 MiB
 * cuMemAlloc buffer, cuFileDriverOpen, cuFileBufRegister, cuFileBufDeregister,
 * cuFileDriverClose, each through dlopen + dlsym as libcufile's users reach
 * it. Lines: STEP <call> <status>. Run with CUFILE_ENV_PATH_JSON pointing at a
 * config whose logging level is TRACE to see libcufile's reasons. */
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>

typedef struct {
    int err, cu_err;
} cufile_error;

static void *sym(void *h, const char *name)
{
    void *f = dlsym(h, name);
    if (f == NULL)
        printf("STEP %s missing\n", name);
    return f;
}

int main(void)
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
    cufile_error (*drv_open)(void) = (cufile_error(*)(void))sym(cufile, "cuFileDriverOpen");
    cufile_error (*reg)(const void *, size_t, int) =
        (cufile_error(*)(const void *, size_t, int))sym(cufile, "cuFileBufRegister");
    cufile_error (*dereg)(const void *) =
        (cufile_error(*)(const void *))sym(cufile, "cuFileBufDeregister");
    cufile_error (*drv_close)(void) = (cufile_error(*)(void))sym(cufile, "cuFileDriverClose_v2");
    if (drv_close == NULL)
        drv_close = (cufile_error(*)(void))sym(cufile, "cuFileDriverClose");
    if (!init || !retain || !set || !alloc || !drv_open || !reg || !dereg || !drv_close)
        return 1;
    void *ctx = NULL;
    unsigned long long ptr = 0;
    if (init(0) != 0 || retain(&ctx, 0) != 0 || set(ctx) != 0 || alloc(&ptr, 16 << 20) != 0) {
        printf("NOGPU: CUDA set-up failed\n");
        return 69;
    }
    cufile_error e = drv_open();
    printf("STEP cuFileDriverOpen %d %d\n", e.err, e.cu_err);
    e = reg((const void *)(size_t)ptr, 16 << 20, 0);
    printf("STEP cuFileBufRegister %d %d\n", e.err, e.cu_err);
    e = dereg((const void *)(size_t)ptr);
    printf("STEP cuFileBufDeregister %d %d\n", e.err, e.cu_err);
    e = drv_close();
    printf("STEP cuFileDriverClose %d %d\n", e.err, e.cu_err);
    return 0;
}
