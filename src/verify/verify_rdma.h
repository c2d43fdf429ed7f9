/* gdunlock verify --rdma: GPUDirect RDMA on this machine's RDMA adapter,
 * through rdma-core's libibverbs loaded at run time (never linked: most
 * machines have no adapter). On one port, a queue pair connected to itself
 * RDMA-writes a pattern from host memory into a registered GPU buffer and
 * RDMA-reads it back into other host memory; every byte is compared.
 * Nothing here prints. */
#ifndef GDUNLOCK_VERIFY_VERIFY_RDMA_H
#define GDUNLOCK_VERIFY_VERIFY_RDMA_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum { GDU_VERIFY_RDMA_MAX_DEVICES = 16 };

typedef enum {
    GDU_VERIFY_RDMA_NO_LIBRARY = 0, /* no usable verbs library */
    GDU_VERIFY_RDMA_NO_DEVICE,      /* the library finds no RDMA device */
    GDU_VERIFY_RDMA_NO_PORT,        /* devices, but none with an active port */
    GDU_VERIFY_RDMA_NO_GPU,         /* no libcuda or no such GPU */
    GDU_VERIFY_RDMA_STEP_FAILED,    /* a verbs or CUDA call failed: cause names it */
    GDU_VERIFY_RDMA_MISMATCH,       /* the transfer completed with wrong bytes */
    GDU_VERIFY_RDMA_PASS,           /* every byte came back */
} gdu_verify_rdma_outcome;

/* How the adapter is given the GPU buffer (docs/rdma-model.md): auto is
 * NCCL's order, the DMA-BUF route where CUDA says the GPU exports dma-bufs
 * (attribute 124) and the verbs library registers them, else peer memory. */
typedef enum {
    GDU_VERIFY_RDMA_ROUTE_AUTO = 0,
    GDU_VERIFY_RDMA_ROUTE_PEER_MEMORY, /* ibv_reg_mr on the device address (nvidia-peermem) */
    GDU_VERIFY_RDMA_ROUTE_DMA_BUF,     /* ibv_reg_dmabuf_mr on a dma-buf of the buffer */
} gdu_verify_rdma_route;

typedef struct gdu_verify_rdma_options {
    const char *library; /* the verbs library; NULL: GDUNLOCK_IBVERBS, else libibverbs.so.1 */
    int gpu;             /* CUDA ordinal */
    size_t size;         /* bytes moved each way */
    gdu_verify_rdma_route route;
} gdu_verify_rdma_options;

typedef struct gdu_verify_rdma_result {
    gdu_verify_rdma_outcome outcome;
    char library[256]; /* the verbs library asked for */
    char cause[384];   /* why it stopped, naming what is missing */
    char fix[384];
    char devices[GDU_VERIFY_RDMA_MAX_DEVICES][64];
    int n_devices;
    /* Where the loopback ran, once a port was found. */
    char device[64];
    int port;
    const char *link_layer; /* "InfiniBand" or "Ethernet" */
    unsigned lid;
    int gid_index; /* -1: no GRH (InfiniBand with a LID) */
    char gpu_name[128];
    char gpu_pci[32];
    int gpu_direct_rdma; /* CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED, as this process reads it */
    int dma_buf;         /* CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, likewise */
    const char *route;   /* how the adapter reached GPU memory */
    size_t size;
    uint64_t bytes_compared;
    uint64_t mismatch_offset; /* MISMATCH: the first byte that differs */
    unsigned char wrote, read_back;
} gdu_verify_rdma_result;

/* Runs the loopback as opts say. Fills out; never fails. */
void gdu_verify_rdma(const gdu_verify_rdma_options *opts, gdu_verify_rdma_result *out);

/* The route --route names ("auto", "peer-memory", "dma-buf"), or -1. */
int gdu_verify_rdma_route_parse(const char *name);

/* The outcome's stable name for the error document: "no-verbs-library",
 * "no-rdma-device", "no-active-port", "no-gpu", "rdma-step-failed" (PASS and
 * MISMATCH are verdicts, not errors: "PASS", "FAIL"). */
const char *gdu_verify_rdma_code(gdu_verify_rdma_outcome o);

/* A transfer's report (PASS or MISMATCH) on GPU gpu: the JSON document's
 * body (NULL without memory), and the same as text on out. */
json_t *gdu_verify_rdma_json(const gdu_verify_rdma_result *r, int gpu);
void gdu_verify_rdma_print(FILE *out, const gdu_verify_rdma_result *r, int gpu);

#endif
