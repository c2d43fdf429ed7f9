#include "cuda/cufile_api.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static gdu_cufile g_cufile;
static const gdu_cufile *g_loaded;
static char g_why[512];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static const char *const default_names[] = {
    "libcufile.so.0",
    "libcufile.so",
    "/usr/local/cuda/lib64/libcufile.so.0",
};

/* Tries each candidate; on failure g_why lists every name with dlerror's text
 * of the last one, so a user sees where we looked. */
static void *open_library(void)
{
    const char *env = getenv("GDUNLOCK_LIBCUFILE");
    if (env != NULL && env[0] != '\0') {
        void *h = dlopen(env, RTLD_NOW | RTLD_LOCAL);
        if (h == NULL)
            snprintf(g_why, sizeof g_why, "GDUNLOCK_LIBCUFILE=%s cannot be loaded: %s", env,
                     dlerror());
        return h;
    }
    const char *last_error = "";
    for (size_t i = 0; i < sizeof default_names / sizeof default_names[0]; i++) {
        void *h = dlopen(default_names[i], RTLD_NOW | RTLD_LOCAL);
        if (h != NULL)
            return h;
        last_error = dlerror();
    }
    snprintf(g_why, sizeof g_why,
             "libcufile.so.0 not found (tried libcufile.so.0, libcufile.so, "
             "/usr/local/cuda/lib64/libcufile.so.0; set GDUNLOCK_LIBCUFILE to its path): %s",
             last_error ? last_error : "");
    return NULL;
}

static void load_once(void)
{
    void *h = open_library();
    if (h == NULL)
        return;
    gdu_cufile *t = &g_cufile;
    t->handle = h;
    struct link_map *map = NULL;
    if (dlinfo(h, RTLD_DI_LINKMAP, &map) == 0 && map != NULL && map->l_name != NULL)
        snprintf(t->path, sizeof t->path, "%s", map->l_name);
#define GDU_CUFILE_RESOLVE(name, sym, ret, params)                                                 \
    *(void **)(&t->name) = dlsym(h, sym);                                                          \
    if (t->name == NULL) {                                                                         \
        snprintf(g_why, sizeof g_why, "%s lacks %s (libcufile too old?)", t->path, sym);           \
        return;                                                                                    \
    }
    GDU_CUFILE_FUNCTIONS(GDU_CUFILE_RESOLVE)
#undef GDU_CUFILE_RESOLVE
    *(void **)(&t->cuFileDriverClose) = dlsym(h, "cuFileDriverClose_v2");
    if (t->cuFileDriverClose == NULL)
        *(void **)(&t->cuFileDriverClose) = dlsym(h, "cuFileDriverClose");
    if (t->cuFileDriverClose == NULL) {
        snprintf(g_why, sizeof g_why, "%s lacks cuFileDriverClose", t->path);
        return;
    }
    *(void **)(&t->cuFileGetVersion) = dlsym(h, "cuFileGetVersion");
    g_loaded = t;
}

const gdu_cufile *gdu_cufile_load(char *why, size_t why_len)
{
    pthread_once(&g_once, load_once);
    if (g_loaded == NULL && why != NULL && why_len > 0)
        snprintf(why, why_len, "%s", g_why);
    return g_loaded;
}

struct error_name {
    int value;
    const char *name;
};

static const struct error_name error_names[] = {
    {GDU_CU_FILE_SUCCESS, "CU_FILE_SUCCESS"},
    {GDU_CU_FILE_DRIVER_NOT_INITIALIZED, "CU_FILE_DRIVER_NOT_INITIALIZED"},
    {GDU_CU_FILE_DRIVER_INVALID_PROPS, "CU_FILE_DRIVER_INVALID_PROPS"},
    {GDU_CU_FILE_DRIVER_UNSUPPORTED_LIMIT, "CU_FILE_DRIVER_UNSUPPORTED_LIMIT"},
    {GDU_CU_FILE_DRIVER_VERSION_MISMATCH, "CU_FILE_DRIVER_VERSION_MISMATCH"},
    {GDU_CU_FILE_DRIVER_VERSION_READ_ERROR, "CU_FILE_DRIVER_VERSION_READ_ERROR"},
    {GDU_CU_FILE_DRIVER_CLOSING, "CU_FILE_DRIVER_CLOSING"},
    {GDU_CU_FILE_PLATFORM_NOT_SUPPORTED, "CU_FILE_PLATFORM_NOT_SUPPORTED"},
    {GDU_CU_FILE_IO_NOT_SUPPORTED, "CU_FILE_IO_NOT_SUPPORTED"},
    {GDU_CU_FILE_DEVICE_NOT_SUPPORTED, "CU_FILE_DEVICE_NOT_SUPPORTED"},
    {GDU_CU_FILE_NVFS_DRIVER_ERROR, "CU_FILE_NVFS_DRIVER_ERROR"},
    {GDU_CU_FILE_CUDA_DRIVER_ERROR, "CU_FILE_CUDA_DRIVER_ERROR"},
    {GDU_CU_FILE_CUDA_POINTER_INVALID, "CU_FILE_CUDA_POINTER_INVALID"},
    {GDU_CU_FILE_CUDA_MEMORY_TYPE_INVALID, "CU_FILE_CUDA_MEMORY_TYPE_INVALID"},
    {GDU_CU_FILE_CUDA_POINTER_RANGE_ERROR, "CU_FILE_CUDA_POINTER_RANGE_ERROR"},
    {GDU_CU_FILE_CUDA_CONTEXT_MISMATCH, "CU_FILE_CUDA_CONTEXT_MISMATCH"},
    {GDU_CU_FILE_INVALID_MAPPING_SIZE, "CU_FILE_INVALID_MAPPING_SIZE"},
    {GDU_CU_FILE_INVALID_MAPPING_RANGE, "CU_FILE_INVALID_MAPPING_RANGE"},
    {GDU_CU_FILE_INVALID_FILE_TYPE, "CU_FILE_INVALID_FILE_TYPE"},
    {GDU_CU_FILE_INVALID_FILE_OPEN_FLAG, "CU_FILE_INVALID_FILE_OPEN_FLAG"},
    {GDU_CU_FILE_DIO_NOT_SET, "CU_FILE_DIO_NOT_SET"},
    {GDU_CU_FILE_INVALID_VALUE, "CU_FILE_INVALID_VALUE"},
    {GDU_CU_FILE_MEMORY_ALREADY_REGISTERED, "CU_FILE_MEMORY_ALREADY_REGISTERED"},
    {GDU_CU_FILE_MEMORY_NOT_REGISTERED, "CU_FILE_MEMORY_NOT_REGISTERED"},
    {GDU_CU_FILE_PERMISSION_DENIED, "CU_FILE_PERMISSION_DENIED"},
    {GDU_CU_FILE_DRIVER_ALREADY_OPEN, "CU_FILE_DRIVER_ALREADY_OPEN"},
    {GDU_CU_FILE_HANDLE_NOT_REGISTERED, "CU_FILE_HANDLE_NOT_REGISTERED"},
    {GDU_CU_FILE_HANDLE_ALREADY_REGISTERED, "CU_FILE_HANDLE_ALREADY_REGISTERED"},
    {GDU_CU_FILE_DEVICE_NOT_FOUND, "CU_FILE_DEVICE_NOT_FOUND"},
    {GDU_CU_FILE_INTERNAL_ERROR, "CU_FILE_INTERNAL_ERROR"},
    {GDU_CU_FILE_GETNEWFD_FAILED, "CU_FILE_GETNEWFD_FAILED"},
    {GDU_CU_FILE_NVFS_SETUP_ERROR, "CU_FILE_NVFS_SETUP_ERROR"},
    {GDU_CU_FILE_IO_DISABLED, "CU_FILE_IO_DISABLED"},
    {GDU_CU_FILE_BATCH_SUBMIT_FAILED, "CU_FILE_BATCH_SUBMIT_FAILED"},
    {GDU_CU_FILE_GPU_MEMORY_PINNING_FAILED, "CU_FILE_GPU_MEMORY_PINNING_FAILED"},
    {GDU_CU_FILE_BATCH_FULL, "CU_FILE_BATCH_FULL"},
    {GDU_CU_FILE_ASYNC_NOT_SUPPORTED, "CU_FILE_ASYNC_NOT_SUPPORTED"},
};

const char *gdu_cufile_error_name(int err)
{
    static __thread char buf[80];
    int value = err < 0 ? -err : err;
    const char *name = "CU_FILE_UNKNOWN_ERROR";
    for (size_t i = 0; i < sizeof error_names / sizeof error_names[0]; i++)
        if (error_names[i].value == value)
            name = error_names[i].name;
    snprintf(buf, sizeof buf, "%s (%d)", name, value);
    return buf;
}

const char *gdu_cufile_status_text(gdu_CUfileError e, char *buf, size_t len)
{
    if (e.err == GDU_CU_FILE_CUDA_DRIVER_ERROR)
        snprintf(buf, len, "%s, CUDA %s", gdu_cufile_error_name(e.err),
                 gdu_cuda_result_name(e.cu_err));
    else
        snprintf(buf, len, "%s", gdu_cufile_error_name(e.err));
    return buf;
}
