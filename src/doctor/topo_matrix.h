/* The topology matrix of `gdunlock topo`: each GPU against every GPU, NVMe
 * controller and network card, as nvidia-smi topo -m labels the paths (X,
 * NV, PIX, PXB, PHB, NODE, SYS), and the mount points on each NVMe drive. */
#ifndef GDUNLOCK_DOCTOR_TOPO_MATRIX_H
#define GDUNLOCK_DOCTOR_TOPO_MATRIX_H

#include "facts/snapshot.h"

#include <jansson.h>
#include <stdio.h>

enum { GDU_TOPO_MAX_COLS = 48, GDU_TOPO_MAX_MOUNTS = 16 };

typedef enum { GDU_TOPO_GPU, GDU_TOPO_NVME, GDU_TOPO_NIC } gdu_topo_kind;

typedef struct gdu_topo_col {
    gdu_topo_kind kind;
    char name[24]; /* "GPU0", "nvme0", "eth0" / "NIC0" */
    char bdf[16];
    int numa_node;
    char detail[96];                       /* model, or network interface names */
    char mounts[GDU_TOPO_MAX_MOUNTS][128]; /* NVMe: mount points on its namespaces */
    size_t n_mounts;
} gdu_topo_col;

typedef struct gdu_topo {
    gdu_topo_col cols[GDU_TOPO_MAX_COLS];
    size_t n_cols, n_gpus;                              /* the first n_gpus columns are the rows */
    char cell[GDU_TOPO_MAX_COLS][GDU_TOPO_MAX_COLS][8]; /* [gpu row][col] */
} gdu_topo;

void gdu_topo_build(const gdu_snapshot *sys, gdu_topo *out);
json_t *gdu_topo_to_json(const gdu_topo *t);
/* The matrix, then each column's address, model and mounts, on out. */
void gdu_topo_print(FILE *out, const gdu_topo *t);

#endif
