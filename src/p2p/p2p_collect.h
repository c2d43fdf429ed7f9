/* The capability half of `gdunlock p2p`: CUDA's and the RM's answers and the verdicts. */
#ifndef GDUNLOCK_P2P_P2P_COLLECT_H
#define GDUNLOCK_P2P_P2P_COLLECT_H

#include "p2p/p2p_report.h"

/* The whole report for the given CUDA ordinals: CUDA's answers, the RM's
 * caps (two GPUs or more), the platform facts of this machine, the
 * measurements of r->bench when measure is set (a failed run leaves its
 * cause in r->bench_error), and the verdicts. Returns 0, or -1 with why
 * when querying the GPUs failed. */
int gdu_p2p_collect(gdu_p2p_report *r, const gdu_cuda *cu, const int *ordinals, int n, int measure,
                    char *why, size_t why_len);

/* GPU descriptions and CUDA pair attributes for the given ordinals; initialises
 * every pair's facts. Returns 0 or -1 with why. */
int gdu_p2p_collect_cuda(gdu_p2p_report *r, const gdu_cuda *cu, const int *ordinals, int n,
                         char *why, size_t why_len);

/* The RM's caps for each ordered pair; on failure r->rm_error says why and
 * the pairs stay without RM caps. */
void gdu_p2p_collect_rm(gdu_p2p_report *r);

/* Fills each pair's facts from the report (and the measurements, once made)
 * and computes its verdict and each route's reason. */
void gdu_p2p_decide(gdu_p2p_report *r);

/* True when a measurement failed: copied data was wrong on any route, an SM
 * kernel faulted inside one GPU, or the SM kernels did not load. An SM
 * fault between GPUs is a finding with its reason, like a refused pair. */
int gdu_p2p_measurement_failed(const gdu_p2p_report *r);

#endif
