#include "verify/verify_rdma.h"

#include "util/text.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* libibverbs' device list (infiniband/verbs.h): an opaque array of device
 * pointers, each named by ibv_get_device_name. */
typedef void *(*get_device_list_fn)(int *num);
typedef void (*free_device_list_fn)(void *list);
typedef const char *(*get_device_name_fn)(void *device);

static void refuse(gdu_verify_rdma_result *r, gdu_verify_rdma_outcome why, const char *fix,
                   const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void refuse(gdu_verify_rdma_result *r, gdu_verify_rdma_outcome why, const char *fix,
                   const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->cause, sizeof r->cause, fmt, ap);
    va_end(ap);
    snprintf(r->fix, sizeof r->fix, "%s", fix);
    r->outcome = why;
}

static void list_devices(void *lib, gdu_verify_rdma_result *r)
{
    get_device_list_fn get_list;
    free_device_list_fn free_list;
    get_device_name_fn name_of;
    *(void **)&get_list = dlsym(lib, "ibv_get_device_list");
    *(void **)&free_list = dlsym(lib, "ibv_free_device_list");
    *(void **)&name_of = dlsym(lib, "ibv_get_device_name");
    if (get_list == NULL || free_list == NULL || name_of == NULL) {
        refuse(r, GDU_VERIFY_RDMA_NO_LIBRARY,
               "install rdma-core's libibverbs1 (apt-get install libibverbs1 ibverbs-providers)",
               "%s lacks ibv_get_device_list: not rdma-core's verbs library", r->library);
        return;
    }
    int n = 0;
    errno = 0;
    void **list = get_list(&n);
    int err = errno;
    for (int i = 0; list != NULL && i < n && r->n_devices < GDU_VERIFY_RDMA_MAX_DEVICES; i++) {
        const char *name = name_of(list[i]);
        snprintf(r->devices[r->n_devices++], sizeof r->devices[0], "%s", name ? name : "?");
    }
    if (list != NULL)
        free_list(list);
    if (r->n_devices == 0) {
        refuse(r, GDU_VERIFY_RDMA_NO_DEVICE,
               "install an InfiniBand or RoCE adapter, load its kernel driver (mlx5_ib for "
               "ConnectX) and its verbs provider (apt-get install ibverbs-providers); 'gdunlock "
               "doctor' shows what the kernel sees",
               "no RDMA device: ibv_get_device_list found none%s%s",
               list == NULL && err ? ": " : "", list == NULL && err ? strerror(err) : "");
        return;
    }
    snprintf(r->cause, sizeof r->cause,
             "found %d RDMA device(s); this build of gdunlock does not yet run the loopback "
             "transfer (register a GPU buffer, RDMA-write a pattern, read it back)",
             r->n_devices);
    snprintf(r->fix, sizeof r->fix,
             "meanwhile check the route with 'gdunlock doctor' and NCCL's log (NCCL_DEBUG=INFO: "
             "\"GPU Direct RDMA Enabled\") under 'gdunlock run --rdma'");
    r->outcome = GDU_VERIFY_RDMA_NOT_RUN;
}

void gdu_verify_rdma(const char *library, gdu_verify_rdma_result *out)
{
    memset(out, 0, sizeof *out);
    const char *env = getenv("GDUNLOCK_IBVERBS");
    const char *path = library != NULL ? library : env != NULL && env[0] ? env : "libibverbs.so.1";
    /* The whole path is loaded; only its shown name is bounded, keeping
     * where it lies and what it is. */
    gdu_text_shorten(path, sizeof out->library - 1, out->library, sizeof out->library);
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        const char *error = dlerror();
        char why[160];
        gdu_text_shorten(error != NULL ? error : "not found", sizeof why - 1, why, sizeof why);
        refuse(out, GDU_VERIFY_RDMA_NO_LIBRARY,
               "install rdma-core's verbs library and the adapter's provider (apt-get install "
               "libibverbs1 ibverbs-providers)",
               "the verbs library %s cannot be loaded (%s)", out->library, why);
        return;
    }
    list_devices(lib, out);
    dlclose(lib);
}

const char *gdu_verify_rdma_code(gdu_verify_rdma_outcome o)
{
    return o == GDU_VERIFY_RDMA_NO_DEVICE ? "no-rdma-device"
           : o == GDU_VERIFY_RDMA_NOT_RUN ? "rdma-loopback-not-built"
                                          : "no-verbs-library";
}
