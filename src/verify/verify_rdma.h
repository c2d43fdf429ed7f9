/* gdunlock verify --rdma: GPUDirect RDMA on this machine's RDMA adapter,
 * through rdma-core's libibverbs loaded at run time (never linked: most
 * machines have no adapter). Nothing here prints. */
#ifndef GDUNLOCK_VERIFY_VERIFY_RDMA_H
#define GDUNLOCK_VERIFY_VERIFY_RDMA_H

enum { GDU_VERIFY_RDMA_MAX_DEVICES = 16 };

typedef enum {
    GDU_VERIFY_RDMA_NO_LIBRARY = 0, /* no usable verbs library */
    GDU_VERIFY_RDMA_NO_DEVICE,      /* the library finds no RDMA device */
    GDU_VERIFY_RDMA_NOT_RUN,        /* devices found; the loopback transfer is not built yet */
} gdu_verify_rdma_outcome;

typedef struct gdu_verify_rdma_result {
    gdu_verify_rdma_outcome outcome;
    char library[256]; /* the verbs library asked for */
    char cause[384];   /* why it stopped, naming what is missing */
    char fix[384];
    char devices[GDU_VERIFY_RDMA_MAX_DEVICES][64];
    int n_devices;
} gdu_verify_rdma_result;

/* The verbs library to load: library (an explicit choice), else
 * GDUNLOCK_IBVERBS, else libibverbs.so.1. Fills out; never fails. */
void gdu_verify_rdma(const char *library, gdu_verify_rdma_result *out);

/* The outcome's stable name for the error document: "no-verbs-library",
 * "no-rdma-device", "rdma-loopback-not-built". */
const char *gdu_verify_rdma_code(gdu_verify_rdma_outcome o);

#endif
