/* A model of what the kernel does when nvidia-fs pins a GPU buffer for cuFile:
 * nvidia-fs rounds the buffer to 64 KiB GPU pages and calls
 * nvidia_p2p_get_pages_persistent(), which asks RM to find the one
 * ThirdPartyP2P (NV503C) registration of the calling process that holds the
 * range, and to map it through BAR1.
 *
 * Written from reading the sources; every rule in pin_model.c cites the
 * file:line it comes from: NVIDIA/gds-nvidia-fs 2.28.4 src/nvfs-core.c and
 * NVIDIA/open-gpu-kernel-modules tag 580.142 (kernel-open/nvidia/nv-p2p.c,
 * src/nvidia/src/kernel/gpu/bus/p2p.c, third_party_p2p.c,
 * third_party_p2p_ctrl.c).
 *
 * The model answers, for the ThirdPartyP2P state of one process and a buffer
 * (address, length): pages found, or the errno nvidia-fs would get and why.
 * It is pure: no I/O, no allocation; the caller describes the state. */
#ifndef GDUNLOCK_PINMODEL_PIN_MODEL_H
#define GDUNLOCK_PINMODEL_PIN_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* nvidia-fs's GPU page (GPU_PAGE_SIZE, nvfs-core.h:242) and RM's
 * NVRM_P2P_PAGESIZE_BIG_64K. */
#define GDU_PIN_PAGE ((uint64_t)64 * 1024)
/* BAR1 RM keeps free of P2P mappings (CLI_THIRD_PARTY_P2P_BAR1_RESERVE,
 * generated g_third_party_p2p_nvoc.h:89, used at p2p.c:1030). */
#define GDU_PIN_BAR1_RESERVE ((uint64_t)36 << 20)

/* Linux's ENOTSUPP (524), the kernel-internal errno nv-p2p.c maps
 * NV_ERR_NOT_SUPPORTED to (nv-p2p.c:71); not EOPNOTSUPP (95). */
#define GDU_PIN_ENOTSUPP 524

/* One REGISTER_VIDMEM that RM holds: its btree node is
 * [address, address + size - 1] (third_party_p2p.c:508-510). */
typedef struct {
    uint32_t memory; /* hMemory */
    uint64_t address, size, offset;
} gdu_pin_vidmem;

/* One ThirdPartyP2P object. */
typedef struct {
    uint32_t gpu;        /* the caller's id of the GPU under whose subdevice it is */
    uint32_t pid;        /* the process of the client that made it (pidClientList) */
    unsigned n_vaspaces; /* VA spaces registered with it */
    const gdu_pin_vidmem *vidmem;
    size_t n_vidmem;
} gdu_pin_object;

/* What RM knows of one GPU on this path. */
typedef struct {
    uint32_t gpu;
    uint64_t bar1_bytes;   /* BAR1 size; 0: unknown (the budget is not checked) */
    uint64_t mapped_bytes; /* BAR1 already mapped for P2P on it */
    /* RM's count of the BAR1 no process maps now (rm/rm_bar1_info.h: every
     * process's pins, CPU mappings, USERD, the console taken); 0 unknown. */
    uint64_t bar1_available;
    bool no_rm_object; /* RM made no internal ThirdPartyP2P for it (p2p.c:1417) */
    bool apm;          /* confidential computing (APM) is on (p2p.c:1364) */
} gdu_pin_gpu;

typedef struct {
    uint32_t pid; /* the process that calls cuFile (nvidia-fs runs in its context) */
    const gdu_pin_object *objects;
    size_t n_objects;
    const gdu_pin_gpu *gpus;
    size_t n_gpus;
} gdu_pin_state;

/* Why a buffer is or is not found. */
typedef enum {
    GDU_PIN_FOUND = 0,
    GDU_PIN_BAD_LENGTH,     /* length 0 or the range wraps: nvidia-fs refuses it */
    GDU_PIN_NOT_REGISTERED, /* no registration of the process holds the address */
    GDU_PIN_NO_VASPACE,     /* the object holding it has no VA space registered */
    GDU_PIN_MANY_VASPACES,  /* the object holding it has two or more VA spaces */
    GDU_PIN_SPANS,          /* the range runs past its registration into another one */
    GDU_PIN_PAST_END,       /* the range runs past its registration */
    GDU_PIN_TWO_OBJECTS,    /* two objects of the process hold the range */
    GDU_PIN_NOT_SUPPORTED,  /* RM has no internal object for the GPU, or APM is on */
    GDU_PIN_BAR1_FULL,      /* the BAR1 budget does not hold the range */
} gdu_pin_rule;

typedef struct {
    gdu_pin_rule rule;
    int err;                /* 0, or the negative errno nvidia_p2p_get_pages_persistent returns */
    uint32_t nv_status;     /* RM's status behind err (0 when found) */
    const char *where;      /* the source line of the deciding rule */
    uint64_t start, length; /* the range nvidia-fs asks for (64 KiB rounded) */
    uint32_t gpu;           /* the GPU of the deciding object (found: where the pages are) */
    size_t object;          /* index into state->objects of the deciding object (SIZE_MAX: none) */
    uint32_t memory;        /* the registration's hMemory (0: none) */
    uint64_t pages;         /* found: 64 KiB pages */
    unsigned n_vaspaces;    /* of the deciding object */
    uint64_t bar1_bytes, mapped_bytes; /* of its GPU, for BAR1_FULL */
    uint64_t bar1_available;           /* RM's count of its unused BAR1, 0 unknown */
} gdu_pin_verdict;

/* Runs the lookup for the buffer [gpuvaddr, gpuvaddr + size). */
void gdu_pin_lookup(const gdu_pin_state *st, uint64_t gpuvaddr, uint64_t size,
                    gdu_pin_verdict *out);

/* One line saying what the verdict means and the fix, into buf. Returns buf. */
const char *gdu_pin_explain(const gdu_pin_verdict *v, char *buf, size_t len);

/* Short stable name of a rule ("found", "many-vaspaces", ...), for JSON. */
const char *gdu_pin_rule_name(gdu_pin_rule r);

/* Bytes of BAR1 still pinnable on a GPU whose BAR1 is bar1_bytes with
 * mapped_bytes already mapped for P2P (0 when nothing fits). */
uint64_t gdu_pin_bar1_budget(uint64_t bar1_bytes, uint64_t mapped_bytes);

/* The budget of one GPU: gdu_pin_bar1_budget of its size and this process's
 * mappings, and, where RM's count of the unused BAR1 is known, no more than
 * that less the reserve, since other processes' pins and mappings take from
 * the same BAR1. UINT64_MAX when nothing is known. */
uint64_t gdu_pin_gpu_budget(const gdu_pin_gpu *g);

#endif
