/* What one verify --rdma run holds, shared by its setup (verify_rdma.c), its
 * transfer (verify_rdma_loop.c) and its result (verify_rdma_result.c); not
 * part of the verify API. */
#ifndef GDUNLOCK_VERIFY_VERIFY_RDMA_INTERNAL_H
#define GDUNLOCK_VERIFY_VERIFY_RDMA_INTERNAL_H

#include "cuda/cuda_ctx.h"
#include "verify/verify_ibv_api.h"
#include "verify/verify_internal.h"
#include "verify/verify_rdma.h"

#include <stdbool.h>

typedef struct gdu_verify_rdma_run {
    const gdu_ibv *ibv;
    const gdu_verify_rdma_options *opts;
    gdu_verify_rdma_result *r;
    /* the adapter: an open device and its first active port */
    gdu_ibv_context *ctx;
    gdu_ibv_port_attr port_attr;
    gdu_ibv_gid gid;
    /* the GPU buffer */
    const gdu_cuda *cu;
    gdu_cuda_ctx primary;
    gdu_verify_devbuf gpu;
    /* the loopback's verbs objects and host buffers */
    gdu_ibv_pd *pd;
    gdu_ibv_mr *gpu_mr, *src_mr, *sink_mr;
    gdu_ibv_cq *cq;
    gdu_ibv_qp *qp;
    unsigned char *src, *sink;
} gdu_verify_rdma_run;

/* Records a refusal into r: its outcome, the cause and the fix. */
void gdu_verify_rdma_refuse(gdu_verify_rdma_result *r, gdu_verify_rdma_outcome why, const char *fix,
                            const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Records a failed step: the cause (naming the call, and its errno where it
 * gives one) and the fix. Returns -1. */
int gdu_verify_rdma_step_failed(gdu_verify_rdma_run *run, const char *fix, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* PD, registrations, CQ, the self-connected RC QP, the write, the read
 * and the comparison; sets r->outcome. run->ctx, the port and the GPU
 * buffer are ready. */
void gdu_verify_rdma_loopback(gdu_verify_rdma_run *run);
/* Releases what gdu_verify_rdma_loopback made. */
void gdu_verify_rdma_loopback_release(gdu_verify_rdma_run *run);

#endif
