/* Feasibility study of a userspace BAR1 window between GPUs (issue 15), in
 * small steps, each printed as PASS/FAIL/SKIP lines for tests/gpu/p2p.sh and
 * recorded (statuses, addresses, numbers) in a JSON file:
 *   1  map one of GPU A's allocations (our own RM client, our own video
 *      memory) for the CPU through BAR1; CPU writes and reads it back, a
 *      fresh mapping sees the same bytes; CPU rates beside cuMemcpy's;
 *   2  loopback: RM's own answer to describing that mapping as I/O memory
 *      (what cuMemHostRegister(CU_MEMHOSTREGISTER_IOMEMORY) asks RM), then
 *      cuMemHostRegister(IOMEMORY) on GPU A itself and copies through it;
 *   3  two GPUs: GPU B registers GPU A's window and reaches A's memory with
 *      copies, SM stores and loads, and a pointer chase through it.
 * A refused step is a result: its exact status and the driver source line
 * that refuses it (p2p_window.h) are recorded, and the study stops there.
 * Only memory allocated here is touched; transfers start at 4 KiB and grow
 * only after the smaller one came back right; no driver or device setting
 * is changed.
 * usage: p2p_window [--gpus A[,B]] [--size N] [--out FILE.json]
 * Exit 0 (the lines say what happened), 2 bad arguments. */
#include "cuda/cuda_api.h"
#include "p2p/p2p_kernels.h"
#include "util/clock.h"
#include "util/pattern.h"
#include "p2p/p2p_sm_pattern.h"
#include "p2p_window_study.h"
#include "rm_bar1.h"
#include "rm/rm_p2p_caps.h"

#include "driverabi/nv_card_info.h"
#include "driverabi/nv_status.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { CAP_SYS_ADMIN_BIT = 21, CHASE_NODES = 4096, CHASE_STRIDE = 256, CHASE_HOPS = 2000 };

static const gdu_cuda *cu;
static json_t *record; /* what the JSON file gets */

/* Where the driver is: the real one unless tests/unit/test_p2p_window_program.c
 * points these at its fake RM (the program is compiled into that test). */
static gdu_rm_ioctl_fn window_ioctl;        /* NULL: the real ioctl */
static const char *window_ctl;              /* NULL: /dev/nvidiactl */
static const char *window_dev_dir = "/dev"; /* where nvidia<minor> lives */

static void line(const char *kind, const char *check, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void line(const char *kind, const char *check, const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    printf("%s %s: %s\n", kind, check, text);
    fflush(stdout);
    json_array_append_new(
        json_object_get(record, "lines"),
        json_pack("{s:s, s:s, s:s}", "result", kind, "check", check, "text", text));
}

static void fact(const char *key, json_t *value)
{
    json_object_set_new(json_object_get(record, "facts"), key, value);
}

static double gbps(size_t bytes, double seconds)
{
    return seconds > 0 ? (double)bytes / seconds / 1e9 : 0;
}

/* A whole /proc file as text (NULL on failure); the caller frees it. */
static char *read_proc(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while (buf != NULL && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len < 4096) {
            char *bigger = realloc(buf, cap *= 2);
            if (bigger == NULL)
                free(buf);
            buf = bigger;
        }
    }
    fclose(f);
    if (buf != NULL)
        buf[len] = '\0';
    return buf;
}

/* One GPU of the study. */
struct gpu {
    int ordinal;
    gdu_CUdevice dev;
    gdu_CUcontext ctx;
    unsigned domain, bus, slot;
    const gdu_rm_card *card;
    uint32_t gpu_id;
    gdu_rm_device rm;
    char dev_path[256];
};

struct study {
    gdu_rm_client client;
    gdu_rm_card cards[GDU_NV_MAX_DEVICES];
    size_t ncards;
    struct gpu g[2];
    int n;
    size_t size;
    gdu_rm_vidmem mem; /* GPU A's video memory, mapped for the CPU */
    unsigned char *host, *back;
    int sys_admin, io_pfnmap;
};

static const char *cu_name(gdu_CUresult r) { return gdu_cuda_result_name(r); }

/* Byte offset of the first difference of a and b over n, or -1. */
static long long differs(const unsigned char *a, const unsigned char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return (long long)i;
    return -1;
}

/* The GPU's primary context (it attaches the GPU and holds its device file
 * open, which RM wants before it lets our client open the device) and PCI
 * address. */
static int setup_cuda(struct study *s, int k, int ordinal)
{
    struct gpu *g = &s->g[k];
    int v = 0;
    g->ordinal = ordinal;
    gdu_CUresult r = cu->cuDeviceGet(&g->dev, ordinal);
    if (r == GDU_CUDA_SUCCESS)
        r = cu->cuDevicePrimaryCtxRetain(&g->ctx, g->dev);
    if (r != GDU_CUDA_SUCCESS) {
        g->ctx = NULL;
        line("FAIL", "p2p-window-setup", "GPU %d: %s", ordinal, cu_name(r));
        return -1;
    }
    cu->cuDeviceGetAttribute(&v, GDU_CU_ATTR_PCI_DOMAIN_ID, g->dev);
    g->domain = (unsigned)v;
    cu->cuDeviceGetAttribute(&v, GDU_CU_ATTR_PCI_BUS_ID, g->dev);
    g->bus = (unsigned)v;
    cu->cuDeviceGetAttribute(&v, GDU_CU_ATTR_PCI_DEVICE_ID, g->dev);
    g->slot = (unsigned)v;
    return 0;
}

/* The GPU in the driver's card info and RM's attached list, and opened in our client. */
static int setup_rm(struct study *s, int k, const gdu_rm_gpu *attached, size_t nattached)
{
    struct gpu *g = &s->g[k];
    int ordinal = g->ordinal;
    char why[256];
    g->card = gdu_rm_card_find(s->cards, s->ncards, g->domain, g->bus, g->slot);
    for (size_t i = 0; i < nattached; i++)
        if (attached[i].domain == g->domain && attached[i].bus == g->bus &&
            attached[i].device == g->slot)
            g->gpu_id = attached[i].gpu_id;
    if (g->card == NULL || g->gpu_id == 0) {
        line("FAIL", "p2p-window-setup", "GPU %d (%04x:%02x:%02x) is not in the driver's %s",
             ordinal, g->domain, g->bus, g->slot, g->card == NULL ? "card info" : "attached GPUs");
        return -1;
    }
    snprintf(g->dev_path, sizeof g->dev_path, "%s/nvidia%u", window_dev_dir, g->card->minor);
    uint32_t st = 0;
    if (gdu_rm_device_open(&s->client, g->gpu_id, &g->rm, &st, why, sizeof why) != 0) {
        line("FAIL", "p2p-window-setup", "GPU %d: %s", ordinal, why);
        return -1;
    }
    char key[32];
    snprintf(key, sizeof key, "gpu%d", k);
    fact(key,
         json_pack("{s:i, s:s, s:I, s:I, s:I, s:I, s:I, s:I}", "ordinal", ordinal, "device",
                   g->dev_path, "rm_gpu_id", (json_int_t)g->gpu_id, "card_gpu_id",
                   (json_int_t)g->card->gpu_id, "bar0_bus_address", (json_int_t)g->card->bar0_addr,
                   "bar1_bus_address", (json_int_t)g->card->bar1_addr, "bar1_bytes",
                   (json_int_t)g->card->bar1_size, "device_instance",
                   (json_int_t)g->rm.device_instance));
    return 0;
}

static int setup(struct study *s, const int *ordinals, int n)
{
    char why[256];
    const gdu_rm_calls calls = {window_ioctl ? window_ioctl : gdu_rm_kernel_calls.ioctl_call,
                                gdu_rm_kernel_calls.close_call};
    if (gdu_rm_client_open(&s->client, window_ctl, &calls, why, sizeof why) != 0) {
        line("SKIP", "p2p-window", "no RM client: %s", why);
        return -1;
    }
    gdu_rm_gpu attached[GDU_RM_MAX_GPUS];
    size_t nattached = 0;
    for (int k = 0; k < n; k++)
        if (setup_cuda(s, k, ordinals[k]) != 0)
            return -1;
    if (gdu_rm_cards(&s->client, s->cards, GDU_NV_MAX_DEVICES, &s->ncards, why, sizeof why) != 0 ||
        gdu_rm_attached_gpus(&s->client, attached, GDU_RM_MAX_GPUS, &nattached, why, sizeof why) !=
            0) {
        line("FAIL", "p2p-window-setup", "%s", why);
        return -1;
    }
    for (int k = 0; k < n; k++)
        if (setup_rm(s, k, attached, nattached) != 0)
            return -1;
    s->n = n;
    char *status = read_proc("/proc/self/status");
    s->sys_admin = status ? gdu_proc_status_cap(status, CAP_SYS_ADMIN_BIT) : -1;
    free(status);
    fact("cap_sys_admin", s->sys_admin < 0 ? json_null() : json_boolean(s->sys_admin));
    return 0;
}

/* Step 1: GPU A's memory for the CPU through BAR1. */
static int step1(struct study *s)
{
    struct gpu *a = &s->g[0];
    char why[256];
    uint32_t st = 0;
    if (gdu_rm_vidmem_alloc(&s->client, &a->rm, s->size, &s->mem, &st, why, sizeof why) != 0 ||
        gdu_rm_vidmem_map(&s->client, &a->rm, &s->mem, a->dev_path, &st, why, sizeof why) != 0) {
        line("FAIL", "p2p-window-1-map", "%s", why);
        fact("step1_status", json_string(gdu_nv_status_name(st)));
        return -1;
    }
    const gdu_rm_card *which = NULL;
    int bar = -1;
    int in_bar = gdu_rm_cards_bar_of(s->cards, s->ncards, s->mem.bus_addr, s->size, &which, &bar);
    char flags[128] = "?";
    char *smaps = read_proc("/proc/self/smaps");
    if (smaps == NULL || gdu_smaps_vmflags(smaps, (uintptr_t)s->mem.cpu, flags, sizeof flags) != 0)
        snprintf(flags, sizeof flags, "?");
    free(smaps);
    s->io_pfnmap =
        strcmp(flags, "?") == 0 ? -1 : gdu_vmflags_has(flags, "io") && gdu_vmflags_has(flags, "pf");
    fact("mapping",
         json_pack("{s:I, s:I, s:I, s:s, s:b, s:I}", "bytes", (json_int_t)s->size, "bus_address",
                   (json_int_t)s->mem.bus_addr, "fb_offset", (json_int_t)s->mem.fb_offset,
                   "vm_flags", flags, "in_gpu_bar", in_bar, "bus_address_minus_bar1",
                   (json_int_t)(s->mem.bus_addr - a->card->bar1_addr)));
    int own_bar1 = in_bar && which == a->card && bar == 1;
    line(
        own_bar1 ? "PASS" : "FAIL", "p2p-window-1-map",
        "%zu KiB of GPU %d's video memory (offset 0x%llx) mapped for the CPU at bus address 0x%llx "
        "(%s; BAR1 0x%llx + 0x%llx), VmFlags: %s",
        s->size >> 10, a->ordinal, (unsigned long long)s->mem.fb_offset,
        (unsigned long long)s->mem.bus_addr, own_bar1 ? "inside its BAR1" : "NOT inside its BAR1",
        (unsigned long long)a->card->bar1_addr,
        (unsigned long long)(s->mem.bus_addr - a->card->bar1_addr), flags);
    if (!own_bar1)
        return -1;

    /* CPU writes, reads back: 4 KiB first, then all of it. */
    volatile unsigned char *win = s->mem.cpu;
    size_t sizes[] = {4096, s->size};
    double tw = 0, tr = 0;
    for (size_t k = 0; k < 2; k++) {
        size_t n = sizes[k];
        gdu_pattern_fill(s->host, 0, n, 0x57494e31 + k); /* "WIN1" */
        double t0 = gdu_now_seconds();
        memcpy((void *)win, s->host, n);
        __sync_synchronize();
        double t1 = gdu_now_seconds();
        memcpy(s->back, (const void *)win, n);
        double t2 = gdu_now_seconds();
        long long bad = differs(s->host, s->back, n);
        if (bad >= 0) {
            line("FAIL", "p2p-window-1-cpu",
                 "%zu bytes written through BAR1 read back wrong at "
                 "byte %lld",
                 n, bad);
            return -1;
        }
        tw = t1 - t0;
        tr = t2 - t1;
    }
    /* A fresh mapping (new file, new RM mapping) sees the bytes: they live in
     * the GPU's memory, not in a CPU-side copy. */
    gdu_rm_vidmem_unmap(&s->client, &a->rm, &s->mem);
    if (gdu_rm_vidmem_map(&s->client, &a->rm, &s->mem, a->dev_path, &st, why, sizeof why) != 0) {
        line("FAIL", "p2p-window-1-cpu", "mapping again: %s", why);
        return -1;
    }
    memcpy(s->back, s->mem.cpu, s->size);
    long long bad = differs(s->host, s->back, s->size);

    /* cuMemcpy of the same size from and to the same (pageable) host buffers. */
    double th = 0, td = 0;
    gdu_CUdeviceptr d = 0;
    cu->cuCtxSetCurrent(a->ctx);
    if (cu->cuMemAlloc(&d, s->size) == GDU_CUDA_SUCCESS) {
        double t0 = gdu_now_seconds();
        cu->cuMemcpyHtoD(d, s->host, s->size);
        double t1 = gdu_now_seconds();
        cu->cuMemcpyDtoH(s->back, d, s->size);
        double t2 = gdu_now_seconds();
        th = t1 - t0;
        td = t2 - t1;
        cu->cuMemFree(d);
    }
    fact("step1_cpu", json_pack("{s:f, s:f, s:f, s:f}", "cpu_write_gbps", gbps(s->size, tw),
                                "cpu_read_gbps", gbps(s->size, tr), "cumemcpy_htod_gbps",
                                gbps(s->size, th), "cumemcpy_dtoh_gbps", gbps(s->size, td)));
    line(bad < 0 ? "PASS" : "FAIL", "p2p-window-1-cpu",
         "CPU wrote and read back 4 KiB, then %zu KiB through BAR1, a fresh mapping %s; CPU write "
         "%.3f GB/s, read %.4f GB/s through the window vs cuMemcpy HtoD %.2f GB/s, DtoH %.2f GB/s "
         "(pageable, same size)",
         s->size >> 10, bad < 0 ? "read the same bytes" : "read DIFFERENT bytes", gbps(s->size, tw),
         gbps(s->size, tr), gbps(s->size, th), gbps(s->size, td));
    return bad < 0 ? 0 : -1;
}

/* Copy-engine copies between GPU k's own memory and the registered window
 * dptr (device-to-device, so that the GPU's copy engine, not the CPU, moves
 * the bytes). The window holds s->host (what the CPU wrote last); the GPU
 * reads 4 KiB, 64 KiB, then all of it; then it writes a second pattern that
 * the CPU reads back through its mapping. */
static int copies(struct study *s, int k, const char *check, gdu_CUdeviceptr dptr)
{
    size_t sizes[] = {4096, 64u << 10, s->size};
    double t_read = 0, t_write = 0;
    gdu_CUdeviceptr local = 0;
    cu->cuCtxSetCurrent(s->g[k].ctx);
    gdu_CUresult r = cu->cuMemAlloc(&local, s->size);
    for (size_t i = 0; r == GDU_CUDA_SUCCESS && i < 3; i++) {
        size_t n = sizes[i] < s->size ? sizes[i] : s->size;
        double t0 = gdu_now_seconds();
        r = cu->cuMemcpyDtoD(local, dptr, n);
        if (r == GDU_CUDA_SUCCESS)
            r = cu->cuCtxSynchronize();
        t_read = gdu_now_seconds() - t0;
        if (r == GDU_CUDA_SUCCESS)
            r = cu->cuMemcpyDtoH(s->back, local, n);
        if (r == GDU_CUDA_SUCCESS && differs(s->host, s->back, n) >= 0) {
            line("FAIL", check, "GPU %d read %zu bytes through the window: wrong data",
                 s->g[k].ordinal, n);
            cu->cuMemFree(local);
            return -1;
        }
    }
    long long bad = -2;
    if (r == GDU_CUDA_SUCCESS) {
        gdu_pattern_fill(s->host, 0, s->size, 0x57494e32); /* "WIN2" */
        r = cu->cuMemcpyHtoD(local, s->host, s->size);
        double t0 = gdu_now_seconds();
        if (r == GDU_CUDA_SUCCESS)
            r = cu->cuMemcpyDtoD(dptr, local, s->size);
        if (r == GDU_CUDA_SUCCESS)
            r = cu->cuCtxSynchronize();
        t_write = gdu_now_seconds() - t0;
        if (r == GDU_CUDA_SUCCESS) {
            memcpy(s->back, s->mem.cpu, s->size);
            bad = differs(s->host, s->back, s->size);
        }
    }
    if (local)
        cu->cuMemFree(local);
    line(bad == -1 ? "PASS" : "FAIL", check,
         "GPU %d's copy engine read 4 KiB, 64 KiB, %zu KiB through the window (%.2f GB/s, wall "
         "clock), wrote %zu KiB that the CPU read back %s (%.2f GB/s)%s%s",
         s->g[k].ordinal, s->size >> 10, gbps(s->size, t_read), s->size >> 10,
         bad == -1 ? "exact" : "WRONG or not at all", gbps(s->size, t_write),
         r == GDU_CUDA_SUCCESS ? "" : "; ", r == GDU_CUDA_SUCCESS ? "" : cu_name(r));
    return bad == -1 ? 0 : -1;
}

/* RM's answer and cuMemHostRegister's for GPU g registering the window. */
static int register_window(struct study *s, int k, const char *step, gdu_CUdeviceptr *dptr)
{
    struct gpu *g = &s->g[k];
    char why[256], check[48];
    uint32_t st = GDU_NV_ERR_GENERIC;
    snprintf(check, sizeof check, "p2p-window-%s-rm", step);
    int rc = gdu_rm_probe_io_memory(&s->client, &g->rm, g->dev_path, s->mem.cpu, s->size, &st, why,
                                    sizeof why);
    const gdu_rm_card *which;
    int bar;
    gdu_p2p_window_facts f = {.status = st,
                              .vma_io_pfnmap = s->io_pfnmap,
                              .in_gpu_bar = gdu_rm_cards_bar_of(
                                  s->cards, s->ncards, s->mem.bus_addr, s->size, &which, &bar),
                              .sys_admin = s->sys_admin};
    gdu_p2p_window_refusal why_not;
    char key[32];
    snprintf(key, sizeof key, "step%s_rm", step);
    if (rc == 0) {
        line("PASS", check, "RM accepts GPU %d's BAR1 mapping as I/O memory of GPU %d",
             s->g[0].ordinal, g->ordinal);
        fact(key, json_pack("{s:s}", "status", gdu_nv_status_name(st)));
    } else if (rc != -EIO) {
        line("FAIL", check, "%s", why);
        return -1;
    } else {
        gdu_p2p_window_refusal_of(&f, &why_not);
        fact(key, json_pack("{s:s, s:s?, s:s?, s:s}", "status", gdu_nv_status_name(st), "check",
                            why_not.check, "source", why_not.source, "why", why_not.why));
        line(why_not.known ? "PASS" : "FAIL", check,
             "RM refuses GPU %d's BAR1 mapping as I/O memory of GPU %d: %s, %s at %s "
             "(open-gpu-kernel-modules 580.142): %s",
             s->g[0].ordinal, g->ordinal, gdu_nv_status_name(st),
             why_not.check ? why_not.check : "?", why_not.source ? why_not.source : "?",
             why_not.why);
    }

    snprintf(check, sizeof check, "p2p-window-%s-cuda", step);
    cu->cuCtxSetCurrent(g->ctx);
    gdu_CUresult r = cu->cuMemHostRegister(
        s->mem.cpu, s->size, GDU_CU_MEMHOSTREGISTER_IOMEMORY | GDU_CU_MEMHOSTREGISTER_DEVICEMAP);
    snprintf(key, sizeof key, "step%s_cuda", step);
    fact(key, json_string(cu_name(r)));
    if (r != GDU_CUDA_SUCCESS) {
        line(rc != 0 ? "PASS" : "FAIL", check, "cuMemHostRegister(IOMEMORY) on GPU %d %s: %s",
             g->ordinal, rc != 0 ? "refuses too" : "refuses although RM accepted", cu_name(r));
        return -1;
    }
    r = cu->cuMemHostGetDevicePointer(dptr, s->mem.cpu, 0);
    line(r == GDU_CUDA_SUCCESS ? "PASS" : "FAIL", check,
         "cuMemHostRegister(IOMEMORY) on GPU %d accepts the window%s%s", g->ordinal,
         r == GDU_CUDA_SUCCESS ? "" : "; cuMemHostGetDevicePointer: ",
         r == GDU_CUDA_SUCCESS ? "" : cu_name(r));
    if (r != GDU_CUDA_SUCCESS) {
        cu->cuMemHostUnregister(s->mem.cpu);
        return -1;
    }
    return 0;
}

/* Step 3's SM part on GPU B: copy kernels through the window both ways and
 * a pointer chase through nodes in GPU A's memory. */
static void step3_sm(struct study *s, gdu_CUdeviceptr win)
{
    struct gpu *b = &s->g[1];
    gdu_p2p_kernels k;
    cu->cuCtxSetCurrent(b->ctx);
    char why[256];
    int sms = 0;
    cu->cuDeviceGetAttribute(&sms, GDU_CU_ATTR_MULTIPROCESSOR_COUNT, b->dev);
    if (gdu_p2p_kernels_load(cu, sms, &k, why, sizeof why) != GDU_CUDA_SUCCESS) {
        line("FAIL", "p2p-window-3-sm", "%s", why);
        return;
    }
    gdu_CUdeviceptr local = 0, state = 0;
    gdu_CUstream st = NULL;
    gdu_CUresult r = cu->cuMemAlloc(&local, s->size);
    if (r == GDU_CUDA_SUCCESS)
        r = cu->cuMemAlloc(&state, 256);
    if (r == GDU_CUDA_SUCCESS)
        r = cu->cuStreamCreate(&st, GDU_CU_STREAM_NON_BLOCKING);
    /* SM loads: window -> local, checked against what the window holds. */
    memcpy(s->host, s->mem.cpu, s->size);
    double t0 = gdu_now_seconds();
    if (r == GDU_CUDA_SUCCESS)
        r = gdu_p2p_launch_copy(cu, &k, st, local, win, s->size);
    if (r == GDU_CUDA_SUCCESS)
        r = cu->cuStreamSynchronize(st);
    double t_load = gdu_now_seconds() - t0;
    if (r == GDU_CUDA_SUCCESS)
        r = cu->cuMemcpyDtoH(s->back, local, s->size);
    long long bad = r == GDU_CUDA_SUCCESS ? differs(s->host, s->back, s->size) : -2;
    /* SM stores: the fill kernel's pattern into the window, read by the CPU. */
    long long bad_store = -2;
    double t_store = 0;
    if (bad == -1) {
        t0 = gdu_now_seconds();
        r = gdu_p2p_launch_fill(cu, &k, st, win, s->size, 0x57494e33);
        if (r == GDU_CUDA_SUCCESS)
            r = cu->cuStreamSynchronize(st);
        t_store = gdu_now_seconds() - t0;
        if (r == GDU_CUDA_SUCCESS) {
            for (size_t w = 0; w < s->size / 4; w++) {
                uint32_t v = gdu_p2p_sm_word(0x57494e33, w);
                memcpy(s->host + 4 * w, &v, 4);
            }
            memcpy(s->back, s->mem.cpu, s->size);
            bad_store = differs(s->host, s->back, s->size);
        }
    }
    /* Pointer chase: nodes in the window, written by the CPU as GPU B's addresses. */
    double lat_us = 0;
    int chase_ok = 0;
    size_t nodes = s->size / CHASE_STRIDE < CHASE_NODES ? s->size / CHASE_STRIDE : CHASE_NODES;
    if (bad == -1 && bad_store == -1 && nodes >= 2) {
        unsigned char *w = s->mem.cpu;
        for (size_t n = 0; n < nodes; n++) {
            uint64_t next = win + ((n * 7 + 1) % nodes) * CHASE_STRIDE; /* 7 is prime to nodes */
            memcpy(w + n * CHASE_STRIDE, &next, sizeof next);
        }
        uint64_t at = win, end = 0, want = win;
        for (int h = 0; h < CHASE_HOPS; h++)
            want = win + (((want - win) / CHASE_STRIDE * 7 + 1) % nodes) * CHASE_STRIDE;
        r = cu->cuMemcpyHtoD(state, &at, sizeof at);
        t0 = gdu_now_seconds();
        if (r == GDU_CUDA_SUCCESS)
            r = gdu_p2p_launch_chase(cu, &k, st, state, CHASE_HOPS);
        if (r == GDU_CUDA_SUCCESS)
            r = cu->cuStreamSynchronize(st);
        lat_us = (gdu_now_seconds() - t0) * 1e6 / CHASE_HOPS;
        if (r == GDU_CUDA_SUCCESS)
            r = cu->cuMemcpyDtoH(&end, state, sizeof end);
        chase_ok = r == GDU_CUDA_SUCCESS && end == want;
    }
    fact("step3_sm", json_pack("{s:s, s:f, s:f, s:f}", "result", cu_name(r), "sm_load_gbps",
                               gbps(s->size, t_load), "sm_store_gbps", gbps(s->size, t_store),
                               "chase_us_per_load", lat_us));
    line(bad == -1 && bad_store == -1 && chase_ok ? "PASS" : "FAIL", "p2p-window-3-sm",
         "GPU %d's SM loads from GPU %d's memory through the window: %s (%.2f GB/s, one launch, "
         "wall clock); SM stores: %s (%.2f GB/s); pointer chase %s, %.3f us per load (%d loads, "
         "wall clock incl. the launch)%s%s",
         b->ordinal, s->g[0].ordinal, bad == -1 ? "exact" : "WRONG", gbps(s->size, t_load),
         bad_store == -1 ? "exact" : "WRONG or not run", gbps(s->size, t_store),
         chase_ok ? "ended on the right node" : "FAILED", lat_us, CHASE_HOPS,
         r == GDU_CUDA_SUCCESS ? "" : "; stopped at ", r == GDU_CUDA_SUCCESS ? "" : cu_name(r));
    if (st)
        cu->cuStreamDestroy(st);
    if (local)
        cu->cuMemFree(local);
    if (state)
        cu->cuMemFree(state);
    gdu_p2p_kernels_unload(cu, &k);
}

static void run(struct study *s)
{
    if (step1(s) != 0) {
        line("SKIP", "p2p-window-2", "step 1 failed: nothing to register");
        return;
    }
    gdu_CUdeviceptr dptr = 0;
    if (register_window(s, 0, "2", &dptr) != 0) {
        line("SKIP", "p2p-window-2-copy", "step 2 refused: no loopback copy");
        line("SKIP", "p2p-window-3",
             "step 2 refused; the refusing check covers every attached GPU's BARs, whichever "
             "GPU registers the range (the study stops at the first refusal)");
        return;
    }
    int ok = copies(s, 0, "p2p-window-2-copy", dptr) == 0;
    cu->cuCtxSetCurrent(s->g[0].ctx);
    cu->cuMemHostUnregister(s->mem.cpu);
    if (!ok) {
        line("SKIP", "p2p-window-3", "step 2's copies failed");
        return;
    }
    if (s->n < 2) {
        line("SKIP", "p2p-window-3",
             "one GPU: GPU B reaching GPU A through the window needs two "
             "(nvidia-h200-x2)");
        return;
    }
    memcpy(s->host, s->mem.cpu, s->size); /* what the window holds now */
    if (register_window(s, 1, "3", &dptr) != 0)
        return;
    if (copies(s, 1, "p2p-window-3-copy", dptr) == 0)
        step3_sm(s, dptr);
    cu->cuCtxSetCurrent(s->g[1].ctx);
    cu->cuMemHostUnregister(s->mem.cpu);
}

static void teardown(struct study *s)
{
    if (s->mem.hmemory)
        gdu_rm_vidmem_free(&s->client, &s->g[0].rm, &s->mem);
    gdu_rm_client_close(&s->client); /* frees the devices too */
    for (int k = 0; k < 2; k++)
        if (s->g[k].ctx)
            cu->cuDevicePrimaryCtxRelease(s->g[k].dev);
}

int main(int argc, char **argv)
{
    int ordinals[2] = {0, 1}, n = -1;
    size_t size = 2u << 20;
    const char *out = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--gpus") == 0 && i + 1 < argc) {
            n = sscanf(argv[++i], "%d,%d", &ordinals[0], &ordinals[1]);
        } else if (strcmp(argv[i], "--size") == 0 && i + 1 < argc) {
            size = (size_t)strtoull(argv[++i], NULL, 0);
        } else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
            out = argv[++i];
        } else {
            fprintf(stderr, "usage: p2p_window [--gpus A[,B]] [--size N] [--out FILE.json]\n");
            return 2;
        }
    }
    if (size == 0 || size % (64u << 10) != 0 || size > (256u << 20)) {
        fprintf(stderr, "p2p_window: --size must be a multiple of 64 KiB up to 256 MiB\n");
        return 2;
    }
    record = json_pack("{s:s, s:I, s:[], s:{}}", "study", "userspace BAR1 window (issue 15)",
                       "bytes", (json_int_t)size, "lines", "facts");
    char why[256];
    cu = gdu_cuda_load(why, sizeof why);
    int count = 0;
    if (cu == NULL || cu->cuDeviceGetCount(&count) != GDU_CUDA_SUCCESS || count == 0) {
        line("SKIP", "p2p-window", "no CUDA GPU here: %s", cu ? "device count 0" : why);
    } else {
        if (n < 0)
            n = count >= 2 ? 2 : 1;
        struct study *s = calloc(1, sizeof *s);
        if (s == NULL)
            return 1;
        s->client.fd = -1;
        s->size = size;
        s->host = malloc(size);
        s->back = malloc(size);
        if (s->host != NULL && s->back != NULL && setup(s, ordinals, n > count ? count : n) == 0)
            run(s);
        teardown(s);
        free(s->host);
        free(s->back);
        free(s);
    }
    if (out != NULL && json_dump_file(record, out, JSON_INDENT(2)) != 0)
        fprintf(stderr, "p2p_window: cannot write %s\n", out);
    json_decref(record);
    return 0;
}
