/* verify --rdma's transfer: on one port, an RC queue pair connected to
 * itself (its own LID or GID and QP number) RDMA-writes a pattern from a
 * host buffer into the registered GPU buffer, then RDMA-reads the GPU
 * buffer into another host buffer, which is compared with the pattern.
 * The GPU buffer is registered by one of two routes (docs/rdma-model.md):
 * (a) plain ibv_reg_mr on its device address, where the kernel's
 * peer-memory client (nvidia-peermem) gives the adapter GPU pages; (b)
 * ibv_reg_dmabuf_mr on a dma-buf of the buffer from
 * cuMemGetHandleForAddressRange (under `gdunlock run --rdma` on a GeForce,
 * the shim's). The choice is NCCL's unless --route names one. */
#include "util/pattern.h"
#include "verify/verify_rdma_internal.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum {
    LOOP_COMPLETION_TIMEOUT_S = 10, /* far above RC's own retry budget (timeout 14, 7 retries) */
    LOOP_PAGE = 4096,
};

static const char adapter_fix[] =
    "check the adapter with 'rdma link show' and the kernel log (dmesg); the verbs provider "
    "(ibverbs-providers) must match the kernel driver";
static const char path_fix[] =
    "the adapter could not reach GPU memory: 'gdunlock doctor' names what blocks the RDMA "
    "route (peer-memory client, ACS, IOMMU on the GPU-adapter path)";

static const char route_peer_memory[] =
    "peer memory: ibv_reg_mr on a cuMemAlloc address (nvidia-peermem)";
static const char route_dma_buf[] =
    "dma-buf: ibv_reg_dmabuf_mr on cuMemGetHandleForAddressRange's dma-buf of a cuMemAlloc "
    "buffer";

/* errno after a call that returns NULL; never 0 (a provider may not set it). */
static int errno_or(int fallback) { return errno != 0 ? errno : fallback; }

/* What lets ibv_reg_mr pin the range: for host memory the locked-memory
 * limit; for GPU memory a peer-memory client, and on a GPU that denies
 * GPUDirect RDMA (attribute 116 reads 0) the shim's answers first. */
static const char *reg_fix(const gdu_verify_rdma_run *run, bool gpu)
{
    if (!gpu)
        return "raise the locked-memory limit (ulimit -l unlimited, or memlock in "
               "/etc/security/limits.conf), or give a smaller --size";
    if (run->r->gpu_direct_rdma)
        return "ibv_reg_mr on GPU memory needs a peer-memory client: load nvidia-peermem (it "
               "loads only against MLNX_OFED's ib_core); 'gdunlock doctor' names what blocks "
               "the route";
    return "this GPU reports no GPUDirect RDMA (CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED "
           "= 0, as a GeForce does): run it under 'gdunlock run --rdma -- gdunlock verify "
           "--rdma', with nvidia-peermem loaded; 'gdunlock doctor' names what blocks the route";
}

static gdu_ibv_mr *reg(gdu_verify_rdma_run *run, void *addr, int access, const char *what)
{
    errno = 0;
    gdu_ibv_mr *mr = run->ibv->ibv_reg_mr(run->pd, addr, run->r->size, access);
    if (mr == NULL) {
        int err = errno_or(EINVAL);
        bool gpu = addr == (void *)(uintptr_t)run->gpu.ptr;
        gdu_verify_rdma_step_failed(run, reg_fix(run, gpu),
                                    "ibv_reg_mr (%s) of %zu bytes failed: %s (errno %d)", what,
                                    run->r->size, strerror(err), err);
    }
    return mr;
}

/* NCCL's order (transport/net_ib.cc: dma-buf where the GPU exports them and
 * the library registers them), unless --route names one. */
static bool wants_dma_buf(const gdu_verify_rdma_run *run)
{
    if (run->opts->route != GDU_VERIFY_RDMA_ROUTE_AUTO)
        return run->opts->route == GDU_VERIFY_RDMA_ROUTE_DMA_BUF;
    return run->r->dma_buf == 1 && run->ibv->ibv_reg_dmabuf_mr != NULL;
}

/* Route (b): a dma-buf of the GPU buffer, registered at the buffer's
 * address as its I/O virtual address, so that the RDMA operations name it
 * as on route (a); the descriptor is closed once registered, as NCCL does
 * (net.cc:953-955). */
static gdu_ibv_mr *reg_dma_buf(gdu_verify_rdma_run *run, int access)
{
    const gdu_verify_rdma_result *r = run->r;
    if (run->ibv->ibv_reg_dmabuf_mr == NULL) {
        gdu_verify_rdma_step_failed(run,
                                    "install rdma-core 34 or later, or take the peer-memory "
                                    "route (--route peer-memory)",
                                    "%s has no ibv_reg_dmabuf_mr", r->library);
        return NULL;
    }
    /* The kernel exports whole pages: those that hold the buffer (cuMemAlloc
     * maps whole 2 MiB pages, so they are all mapped); the adapter's range
     * starts at the buffer's offset in the first. */
    const uint64_t page = LOOP_PAGE;
    const uint64_t first = (uint64_t)run->gpu.ptr / page * page;
    const uint64_t span = ((uint64_t)run->gpu.ptr + r->size + page - 1) / page * page - first;
    int fd = -1;
    gdu_CUresult cr = run->cu->cuMemGetHandleForAddressRange(
        &fd, (gdu_CUdeviceptr)first, (size_t)span, GDU_CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
    if (cr != GDU_CUDA_SUCCESS || fd < 0) {
        gdu_verify_rdma_step_failed(
            run,
            r->dma_buf == 1
                ? "the kernel refused the export: 'gdunlock doctor' names what it lacks (dma-buf "
                  "support, the open kernel module)"
                : "this GPU's libcuda exports no dma-buf (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED "
                  "= 0, as a GeForce reads): run it under 'gdunlock run --rdma -- gdunlock "
                  "verify --rdma', where the shim makes the dma-buf",
            "cuMemGetHandleForAddressRange (a dma-buf of the GPU buffer's %llu bytes of pages) "
            "failed: %s",
            (unsigned long long)span, gdu_cuda_result_name(cr));
        return NULL;
    }
    errno = 0;
    gdu_ibv_mr *mr = run->ibv->ibv_reg_dmabuf_mr(run->pd, (uint64_t)run->gpu.ptr - first, r->size,
                                                 (uint64_t)run->gpu.ptr, fd, access);
    int err = errno_or(EINVAL);
    close(fd);
    if (mr == NULL)
        gdu_verify_rdma_step_failed(
            run,
            err == EOPNOTSUPP || err == EPROTONOSUPPORT
                ? "the adapter's kernel driver imports no dma-buf (Linux 5.12 or later and a "
                  "driver with dma-buf support, such as mlx5_ib): take the peer-memory route "
                  "(--route peer-memory) with nvidia-peermem loaded"
                : path_fix,
            "ibv_reg_dmabuf_mr (GPU buffer) of %zu bytes failed: %s (errno %d)", r->size,
            strerror(err), err);
    return mr;
}

/* PD, the three registrations, the host buffers (the source holds the
 * pattern, the sink zeros), a CQ and an RC QP. */
static int make_objects(gdu_verify_rdma_run *run, uint64_t seed)
{
    const size_t size = run->r->size;
    errno = 0;
    run->pd = run->ibv->ibv_alloc_pd(run->ctx);
    if (run->pd == NULL)
        return gdu_verify_rdma_step_failed(run, adapter_fix, "ibv_alloc_pd failed: %s",
                                           strerror(errno_or(ENOMEM)));
    const size_t rounded = (size + LOOP_PAGE - 1) / LOOP_PAGE * LOOP_PAGE;
    run->src = aligned_alloc(LOOP_PAGE, rounded);
    run->sink = aligned_alloc(LOOP_PAGE, rounded);
    if (run->src == NULL || run->sink == NULL)
        return gdu_verify_rdma_step_failed(run, "give a smaller --size",
                                           "two host buffers of %zu bytes: out of memory", size);
    gdu_pattern_fill(run->src, 0, size, seed);
    memset(run->sink, 0, size);
    const int remote =
        GDU_IBV_ACCESS_LOCAL_WRITE | GDU_IBV_ACCESS_REMOTE_WRITE | GDU_IBV_ACCESS_REMOTE_READ;
    bool dma_buf = wants_dma_buf(run);
    run->r->route = dma_buf ? route_dma_buf : route_peer_memory;
    run->gpu_mr = dma_buf ? reg_dma_buf(run, remote)
                          : reg(run, (void *)(uintptr_t)run->gpu.ptr, remote, "GPU buffer");
    if (run->gpu_mr == NULL ||
        (run->src_mr = reg(run, run->src, GDU_IBV_ACCESS_LOCAL_WRITE, "host source")) == NULL ||
        (run->sink_mr = reg(run, run->sink, GDU_IBV_ACCESS_LOCAL_WRITE, "host sink")) == NULL)
        return -1;
    errno = 0;
    run->cq = run->ibv->ibv_create_cq(run->ctx, 4, NULL, NULL, 0);
    if (run->cq == NULL)
        return gdu_verify_rdma_step_failed(run, adapter_fix, "ibv_create_cq failed: %s",
                                           strerror(errno_or(ENOMEM)));
    gdu_ibv_qp_init_attr init;
    memset(&init, 0, sizeof init);
    init.send_cq = init.recv_cq = run->cq;
    init.cap =
        (gdu_ibv_qp_cap){.max_send_wr = 2, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1};
    init.qp_type = GDU_IBV_QPT_RC;
    errno = 0;
    run->qp = run->ibv->ibv_create_qp(run->pd, &init);
    if (run->qp == NULL)
        return gdu_verify_rdma_step_failed(run, adapter_fix, "ibv_create_qp (RC) failed: %s",
                                           strerror(errno_or(ENOMEM)));
    return 0;
}

static int modify(gdu_verify_rdma_run *run, gdu_ibv_qp_attr *a, int mask, const char *state)
{
    int rc = run->ibv->ibv_modify_qp(run->qp, a, mask);
    if (rc == 0)
        return 0;
    return gdu_verify_rdma_step_failed(
        run,
        "check the port's link and address ('rdma link show', ibstat; on RoCE, GID index 0 "
        "must hold an address)",
        "ibv_modify_qp (%s) on %s port %d failed: %s (errno %d)", state, run->r->device,
        run->r->port, strerror(rc), rc);
}

/* INIT -> RTR -> RTS, its destination being itself. */
static int connect_self(gdu_verify_rdma_run *run)
{
    const gdu_verify_rdma_result *r = run->r;
    gdu_ibv_qp_attr a;
    memset(&a, 0, sizeof a);
    a.qp_state = GDU_IBV_QPS_INIT;
    a.port_num = (uint8_t)r->port;
    a.qp_access_flags =
        GDU_IBV_ACCESS_LOCAL_WRITE | GDU_IBV_ACCESS_REMOTE_WRITE | GDU_IBV_ACCESS_REMOTE_READ;
    if (modify(run, &a,
               GDU_IBV_QP_STATE | GDU_IBV_QP_PKEY_INDEX | GDU_IBV_QP_PORT | GDU_IBV_QP_ACCESS_FLAGS,
               "INIT") != 0)
        return -1;
    memset(&a, 0, sizeof a);
    a.qp_state = GDU_IBV_QPS_RTR;
    a.path_mtu = run->port_attr.active_mtu;
    a.dest_qp_num = run->qp->qp_num;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.dlid = (uint16_t)r->lid;
    a.ah_attr.port_num = (uint8_t)r->port;
    if (r->gid_index >= 0) {
        a.ah_attr.is_global = 1;
        a.ah_attr.grh.dgid = run->gid;
        a.ah_attr.grh.sgid_index = (uint8_t)r->gid_index;
        a.ah_attr.grh.hop_limit = 1;
    }
    if (modify(run, &a,
               GDU_IBV_QP_STATE | GDU_IBV_QP_AV | GDU_IBV_QP_PATH_MTU | GDU_IBV_QP_DEST_QPN |
                   GDU_IBV_QP_RQ_PSN | GDU_IBV_QP_MAX_DEST_RD_ATOMIC | GDU_IBV_QP_MIN_RNR_TIMER,
               "RTR") != 0)
        return -1;
    memset(&a, 0, sizeof a);
    a.qp_state = GDU_IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    return modify(run, &a,
                  GDU_IBV_QP_STATE | GDU_IBV_QP_TIMEOUT | GDU_IBV_QP_RETRY_CNT |
                      GDU_IBV_QP_RNR_RETRY | GDU_IBV_QP_SQ_PSN | GDU_IBV_QP_MAX_QP_RD_ATOMIC,
                  "RTS");
}

/* Waits for the one completion of what was posted, within a bound. */
static int wait_completion(gdu_verify_rdma_run *run, const char *what)
{
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    gdu_ibv_wc wc;
    for (;;) {
        memset(&wc, 0, sizeof wc);
        /* ibv_poll_cq, inline in verbs.h: the CQ's context's table. */
        int n = run->cq->context->ops.poll_cq(run->cq, 1, &wc);
        if (n < 0)
            return gdu_verify_rdma_step_failed(run, adapter_fix,
                                               "ibv_poll_cq after the %s failed (%d)", what, n);
        if (n > 0)
            break;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec >= LOOP_COMPLETION_TIMEOUT_S)
            return gdu_verify_rdma_step_failed(run, path_fix, "the %s did not complete within %d s",
                                               what, LOOP_COMPLETION_TIMEOUT_S);
        usleep(100);
    }
    if (wc.status == GDU_IBV_WC_SUCCESS)
        return 0;
    const char *status = run->ibv->ibv_wc_status_str(wc.status);
    return gdu_verify_rdma_step_failed(run, path_fix,
                                       "the %s completed with %s (status %d, vendor error 0x%x)",
                                       what, status ? status : "?", wc.status, wc.vendor_err);
}

/* One signalled RDMA operation between a host buffer and the GPU buffer. */
static int transfer(gdu_verify_rdma_run *run, int opcode, const gdu_ibv_mr *host, const char *what)
{
    gdu_ibv_sge sge = {.addr = (uint64_t)(uintptr_t)host->addr,
                       .length = (uint32_t)run->r->size,
                       .lkey = host->lkey};
    gdu_ibv_send_wr wr;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = (uint64_t)opcode;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = opcode;
    wr.send_flags = GDU_IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = (uint64_t)run->gpu.ptr;
    wr.wr.rdma.rkey = run->gpu_mr->rkey;
    gdu_ibv_send_wr *bad = NULL;
    /* ibv_post_send, inline in verbs.h: the QP's context's table. */
    int rc = run->qp->context->ops.post_send(run->qp, &wr, &bad);
    if (rc != 0)
        return gdu_verify_rdma_step_failed(run, adapter_fix,
                                           "ibv_post_send of the %s failed: %s (errno %d)", what,
                                           strerror(rc), rc);
    return wait_completion(run, what);
}

void gdu_verify_rdma_loopback(gdu_verify_rdma_run *run)
{
    gdu_verify_rdma_result *r = run->r;
    /* A seed of this run: a stale GPU buffer from an earlier one never passes. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    const uint64_t seed = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid();
    if (make_objects(run, seed) != 0 || connect_self(run) != 0 ||
        transfer(run, GDU_IBV_WR_RDMA_WRITE, run->src_mr, "RDMA write into GPU memory") != 0 ||
        transfer(run, GDU_IBV_WR_RDMA_READ, run->sink_mr, "RDMA read from GPU memory") != 0)
        return;
    uint64_t bad = gdu_pattern_check(run->sink, 0, r->size, seed);
    r->bytes_compared = bad == UINT64_MAX ? r->size : bad + 1;
    if (bad == UINT64_MAX) {
        r->outcome = GDU_VERIFY_RDMA_PASS;
        return;
    }
    r->outcome = GDU_VERIFY_RDMA_MISMATCH;
    r->mismatch_offset = bad;
    r->wrote = run->src[bad];
    r->read_back = run->sink[bad];
}

void gdu_verify_rdma_loopback_release(gdu_verify_rdma_run *run)
{
    const gdu_ibv *ibv = run->ibv;
    if (run->qp != NULL)
        ibv->ibv_destroy_qp(run->qp);
    if (run->cq != NULL)
        ibv->ibv_destroy_cq(run->cq);
    gdu_ibv_mr *mrs[] = {run->sink_mr, run->src_mr, run->gpu_mr};
    for (size_t i = 0; i < sizeof mrs / sizeof mrs[0]; i++)
        if (mrs[i] != NULL)
            ibv->ibv_dereg_mr(mrs[i]);
    if (run->pd != NULL)
        ibv->ibv_dealloc_pd(run->pd);
    free(run->src);
    free(run->sink);
    run->qp = NULL;
    run->cq = NULL;
    run->sink_mr = run->src_mr = run->gpu_mr = NULL;
    run->pd = NULL;
    run->src = run->sink = NULL;
}
