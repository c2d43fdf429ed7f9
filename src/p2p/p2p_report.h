/* Everything `gdunlock p2p` found, shared by its collector (p2p_collect.c:
 * the snapshot's answers, the measurements, the verdicts) and its two forms,
 * the tables in p2pBandwidthLatencyTest's layout (p2p_table.c) and the JSON
 * document (p2p_json.c), which the CLI writes. */
#ifndef GDUNLOCK_P2P_P2P_REPORT_H
#define GDUNLOCK_P2P_P2P_REPORT_H

#include "p2p/p2p_bench.h"
#include "p2p/p2p_reason.h"

#include <stdint.h>
#include <stdio.h>

typedef struct gdu_p2p_gpu {
    int ordinal; /* CUDA device ordinal */
    char name[128];
    char pci_bus_id[16]; /* "0000:1b:00.0" */
    uint64_t memory_bytes;
    int cc_major, cc_minor;
} gdu_p2p_gpu;

/* CUDA's answers for an ordered pair (src -> dst); -1 where it did not answer. */
typedef struct gdu_p2p_cuda_pair {
    int can_access;
    int performance_rank;
    int access_supported;
    int native_atomics;
    int cuda_array_access;
} gdu_p2p_cuda_pair;

typedef struct gdu_p2p_pair_report {
    gdu_p2p_cuda_pair cuda;
    int rm_known;
    gdu_p2p_rm_caps rm;
    gdu_p2p_facts facts;
    gdu_p2p_verdict verdict; /* off the diagonal */
    char unlock_advice[640]; /* the unlock plan for this pair (gdu_unlock_pair_advice), "" none */
    gdu_p2p_verdict route[GDU_P2P_ROUTES]; /* each route's reason, once measured */
} gdu_p2p_pair_report;

typedef struct gdu_p2p_report {
    int n;
    gdu_p2p_gpu gpu[GDU_P2P_MAX_GPUS];
    int rm_known[GDU_P2P_MAX_GPUS];
    uint32_t rm_gpu_id[GDU_P2P_MAX_GPUS];
    uint64_t bar1_bytes[GDU_P2P_MAX_GPUS]; /* 0 = unknown */
    char rm_error[256];                    /* why the RM caps are missing; "" when read */
    gdu_p2p_pair_report pair[GDU_P2P_MAX_GPUS][GDU_P2P_MAX_GPUS];
    gdu_p2p_bench_config bench;
    int measured;          /* results holds a complete run */
    char bench_error[256]; /* why the run stopped; "" when it did not */
    gdu_p2p_results results;
    char date[32];          /* UTC, ISO 8601 */
    char command_line[512]; /* "gdunlock p2p --gpus 0,1 ...", for results files */
} gdu_p2p_report;

/* Human tables in p2pBandwidthLatencyTest's layout; colour adds ANSI colours. */
void gdu_p2p_print_report(FILE *out, const gdu_p2p_report *r, int colour);

/* One matrix: title line, "D\D" header row of GPU ordinals, then each row's
 * medians with decimals digits, and, when spread is set, each cell's
 * [min..max] under it. Unmeasured cells print as "-". */
void gdu_p2p_print_matrix(FILE *out, const char *title, const gdu_p2p_matrix *m,
                          const int *ordinals, int decimals, int spread);

/* The report as a JSON document (jansson); NULL on out of memory. The caller
 * frees it with json_decref. */
struct json_t *gdu_p2p_report_json(const gdu_p2p_report *r);

#endif
