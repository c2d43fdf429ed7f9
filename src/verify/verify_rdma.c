/* verify --rdma's setup: the verbs library, the first device with an active
 * port, the GPU and its buffer; then the loopback (verify_rdma_loop.c). */
#include "verify/verify_rdma.h"

#include "util/text.h"
#include "verify/verify_rdma_internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char install_fix[] =
    "install rdma-core's verbs library and the adapter's provider (apt-get install "
    "libibverbs1 ibverbs-providers)";

/* Every call verify makes, or the first the library lacks. */
static const char *load_table(void *lib, gdu_ibv *ibv)
{
#define GDU_IBV_LOAD(name, params, ret)                                                            \
    *(void **)&ibv->name = dlsym(lib, #name);                                                      \
    if (ibv->name == NULL)                                                                         \
        return #name;
    GDU_IBV_FUNCTIONS(GDU_IBV_LOAD)
#undef GDU_IBV_LOAD
    *(void **)&ibv->ibv_reg_dmabuf_mr = dlsym(lib, "ibv_reg_dmabuf_mr");
    return NULL;
}

/* The device list, its names recorded; NULL (refused) when there is none. */
static gdu_ibv_device **list_devices(const gdu_ibv *ibv, gdu_verify_rdma_result *r, int *n)
{
    *n = 0;
    errno = 0;
    gdu_ibv_device **list = ibv->ibv_get_device_list(n);
    int err = errno;
    for (int i = 0; list != NULL && i < *n && r->n_devices < GDU_VERIFY_RDMA_MAX_DEVICES; i++) {
        const char *name = ibv->ibv_get_device_name(list[i]);
        snprintf(r->devices[r->n_devices++], sizeof r->devices[0], "%s", name ? name : "?");
    }
    if (list != NULL && *n > 0)
        return list;
    if (list != NULL)
        ibv->ibv_free_device_list(list);
    gdu_verify_rdma_refuse(
        r, GDU_VERIFY_RDMA_NO_DEVICE,
        "install an InfiniBand or RoCE adapter, load its kernel driver (mlx5_ib for "
        "ConnectX) and its verbs provider (apt-get install ibverbs-providers); 'gdunlock "
        "doctor' shows what the kernel sees",
        "no RDMA device: ibv_get_device_list found none%s%s", list == NULL && err ? ": " : "",
        list == NULL && err ? strerror(err) : "");
    return NULL;
}

/* The first active port of ctx into run (0), or -1 with what was seen in
 * seen. */
static int active_port(gdu_verify_rdma_run *run, gdu_ibv_context *ctx, const char *name, char *seen,
                       size_t seen_len)
{
    gdu_ibv_device_attr dev;
    memset(&dev, 0, sizeof dev);
    int rc = run->ibv->ibv_query_device(ctx, &dev);
    if (rc != 0) {
        snprintf(seen, seen_len, "%s: ibv_query_device: %s", name, strerror(rc));
        return -1;
    }
    for (int p = 1; p <= dev.phys_port_cnt; p++) {
        /* The exported call fills the older, shorter port struct: zero ours
         * first, as verbs.h's inline wrapper does. */
        memset(&run->port_attr, 0, sizeof run->port_attr);
        rc = run->ibv->ibv_query_port(ctx, (uint8_t)p, &run->port_attr);
        if (rc == 0 && run->port_attr.state == GDU_IBV_PORT_ACTIVE) {
            run->r->port = p;
            return 0;
        }
        snprintf(seen, seen_len, "%s port %d: %s%s", name, p, rc ? "ibv_query_port: " : "state ",
                 rc                          ? strerror(rc)
                 : run->port_attr.state == 1 ? "DOWN"
                                             : "not ACTIVE");
    }
    if (dev.phys_port_cnt == 0)
        snprintf(seen, seen_len, "%s: no ports", name);
    return -1;
}

/* Opens the first device with an active port and learns its address. */
static int open_port(gdu_verify_rdma_run *run, gdu_ibv_device **list, int n)
{
    char seen[192] = "";
    for (int i = 0; i < n && run->ctx == NULL; i++) {
        const char *name = run->ibv->ibv_get_device_name(list[i]);
        errno = 0;
        gdu_ibv_context *ctx = run->ibv->ibv_open_device(list[i]);
        if (ctx == NULL) {
            snprintf(seen, sizeof seen, "%s: ibv_open_device: %s", name,
                     strerror(errno ? errno : ENODEV));
            continue;
        }
        if (active_port(run, ctx, name, seen, sizeof seen) == 0) {
            run->ctx = ctx;
            snprintf(run->r->device, sizeof run->r->device, "%s", name);
        } else {
            run->ibv->ibv_close_device(ctx);
        }
    }
    if (run->ctx == NULL) {
        gdu_verify_rdma_refuse(
            run->r, GDU_VERIFY_RDMA_NO_PORT,
            "bring a port up: connect its cable and check the link ('rdma link show', "
            "ibstat); an InfiniBand port needs a subnet manager (opensm) to become ACTIVE",
            "no RDMA device has an active port (%s)", seen);
        return -1;
    }
    return 0;
}

/* Its own address: the LID on InfiniBand; on Ethernet (RoCE), or without a
 * LID, GID index 0 in a global route header. */
static int port_address(gdu_verify_rdma_run *run)
{
    gdu_verify_rdma_result *r = run->r;
    bool ethernet = run->port_attr.link_layer == GDU_IBV_LINK_LAYER_ETHERNET;
    r->link_layer = ethernet ? "Ethernet" : "InfiniBand";
    r->lid = run->port_attr.lid;
    r->gid_index = -1;
    if (!ethernet && run->port_attr.lid != 0)
        return 0;
    r->gid_index = 0;
    int rc = run->ibv->ibv_query_gid(run->ctx, (uint8_t)r->port, 0, &run->gid);
    if (rc != 0)
        return gdu_verify_rdma_step_failed(
            run, "check the port's GID table ('rdma link show', show_gids)",
            "ibv_query_gid(%s port %d, index 0) failed: %s", r->device, r->port, strerror(rc));
    return 0;
}

/* One work request moves the whole buffer: it must fit the port's largest
 * message and a scatter entry's 32-bit length. */
static int message_fits(gdu_verify_rdma_run *run)
{
    const gdu_verify_rdma_result *r = run->r;
    uint64_t largest = run->port_attr.max_msg_sz != 0 ? run->port_attr.max_msg_sz : UINT32_MAX;
    if (r->size <= largest)
        return 0;
    return gdu_verify_rdma_step_failed(run, "give a smaller --size",
                                       "--size %zu exceeds %s port %d's largest message (%llu "
                                       "bytes)",
                                       r->size, r->device, r->port, (unsigned long long)largest);
}

/* The GPU, its primary context current, and a zeroed buffer of size bytes. */
static int setup_gpu(gdu_verify_rdma_run *run)
{
    gdu_verify_rdma_result *r = run->r;
    char why[256];
    run->cu = gdu_cuda_load(why, sizeof why);
    const char *fix = "install the NVIDIA driver, or name a GPU with --gpu";
    if (run->cu == NULL) {
        gdu_verify_rdma_refuse(r, GDU_VERIFY_RDMA_NO_GPU, fix, "libcuda: %s", why);
        return -1;
    }
    int count = 0;
    gdu_CUresult cr = run->cu->cuDeviceGetCount(&count);
    if (cr != GDU_CUDA_SUCCESS || run->opts->gpu < 0 || run->opts->gpu >= count) {
        gdu_verify_rdma_refuse(r, GDU_VERIFY_RDMA_NO_GPU, fix, "GPU %d does not exist (%d visible)",
                               run->opts->gpu, count);
        return -1;
    }
    cr = gdu_cuda_ctx_enter(run->cu, run->opts->gpu, &run->primary, NULL, why, sizeof why);
    if (cr != GDU_CUDA_SUCCESS)
        return gdu_verify_rdma_step_failed(run, "check the GPU with 'gdunlock doctor'",
                                           "GPU %d: %s", run->opts->gpu, why);
    run->cu->cuDeviceGetName(r->gpu_name, (int)sizeof r->gpu_name, run->primary.dev);
    run->cu->cuDeviceGetPCIBusId(r->gpu_pci, (int)sizeof r->gpu_pci, run->primary.dev);
    /* A GeForce reads 0 here unless the shim answers (gdunlock run --rdma). */
    run->cu->cuDeviceGetAttribute(&r->gpu_direct_rdma, GDU_CU_ATTR_GPU_DIRECT_RDMA_SUPPORTED,
                                  run->primary.dev);
    run->cu->cuDeviceGetAttribute(&r->dma_buf, GDU_CU_ATTR_DMA_BUF_SUPPORTED, run->primary.dev);
    int rc = gdu_verify_devbuf_alloc(run->cu, run->primary.dev, GDU_VERIFY_MEM_CUMEMALLOC, r->size,
                                     &run->gpu, why, sizeof why);
    if (rc == 0 && (cr = run->cu->cuMemsetD8(run->gpu.ptr, 0, r->size)) != GDU_CUDA_SUCCESS)
        snprintf(why, sizeof why, "cuMemsetD8: %s", gdu_cuda_result_name(cr));
    if (rc != 0 || cr != GDU_CUDA_SUCCESS)
        return gdu_verify_rdma_step_failed(run, "free GPU memory, or give a smaller --size",
                                           "GPU buffer of %zu bytes: %s", r->size, why);
    return 0;
}

static void release(gdu_verify_rdma_run *run)
{
    gdu_verify_rdma_loopback_release(run);
    if (run->cu != NULL) {
        gdu_verify_devbuf_free(run->cu, &run->gpu);
        gdu_cuda_ctx_leave(run->cu, &run->primary, NULL);
    }
    if (run->ctx != NULL)
        run->ibv->ibv_close_device(run->ctx);
}

static void run_with(const gdu_ibv *ibv, const gdu_verify_rdma_options *opts,
                     gdu_verify_rdma_result *r)
{
    gdu_verify_rdma_run run = {.ibv = ibv, .opts = opts, .r = r};
    int n = 0;
    gdu_ibv_device **list = list_devices(ibv, r, &n);
    if (list == NULL)
        return;
    int rc = open_port(&run, list, n);
    ibv->ibv_free_device_list(list); /* an open device outlives the list */
    if (rc == 0 && port_address(&run) == 0 && message_fits(&run) == 0 && setup_gpu(&run) == 0)
        gdu_verify_rdma_loopback(&run);
    release(&run);
}

/* --route's names, in gdu_verify_rdma_route's order. */
static const char *const route_names[] = {"auto", "peer-memory", "dma-buf"};

int gdu_verify_rdma_route_parse(const char *name)
{
    for (size_t i = 0; i < sizeof route_names / sizeof route_names[0]; i++)
        if (strcmp(name, route_names[i]) == 0)
            return (int)i;
    return -1;
}

void gdu_verify_rdma(const gdu_verify_rdma_options *opts, gdu_verify_rdma_result *out)
{
    memset(out, 0, sizeof *out);
    out->size = opts->size;
    const char *env = getenv("GDUNLOCK_IBVERBS");
    const char *path = opts->library != NULL   ? opts->library
                       : env != NULL && env[0] ? env
                                               : "libibverbs.so.1";
    /* The whole path is loaded; only its shown name is bounded, keeping
     * where it lies and what it is. */
    gdu_text_shorten(path, sizeof out->library - 1, out->library, sizeof out->library);
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        const char *error = dlerror();
        char why[160];
        gdu_text_shorten(error != NULL ? error : "not found", sizeof why - 1, why, sizeof why);
        gdu_verify_rdma_refuse(out, GDU_VERIFY_RDMA_NO_LIBRARY, install_fix,
                               "the verbs library %s cannot be loaded (%s)", out->library, why);
        return;
    }
    gdu_ibv ibv;
    const char *missing = load_table(lib, &ibv);
    if (missing != NULL)
        gdu_verify_rdma_refuse(out, GDU_VERIFY_RDMA_NO_LIBRARY, install_fix,
                               "%s lacks %s: not rdma-core's verbs library", out->library, missing);
    else
        run_with(&ibv, opts, out);
    dlclose(lib);
}
