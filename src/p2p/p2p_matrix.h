/* Square matrices of measurements in p2pBandwidthLatencyTest's layout: row =
 * source GPU, column = destination GPU, diagonal = copy within one GPU. Each
 * cell keeps the median of its samples and their spread. */
#ifndef GDUNLOCK_P2P_P2P_MATRIX_H
#define GDUNLOCK_P2P_P2P_MATRIX_H

#include <stddef.h>

#define GDU_P2P_MAX_GPUS 16

typedef struct gdu_p2p_stat {
    int valid; /* 0: not measured */
    double median, min, max;
} gdu_p2p_stat;

typedef struct gdu_p2p_matrix {
    int n;
    gdu_p2p_stat cell[GDU_P2P_MAX_GPUS][GDU_P2P_MAX_GPUS];
} gdu_p2p_matrix;

/* Median (mean of the middle two for an even count), min and max of
 * samples[0..count); sorts samples in place. count 0 gives an invalid stat. */
gdu_p2p_stat gdu_p2p_stat_of(double *samples, size_t count);

#endif
