/* gdunlock p2p's report: each pair's answers and facts from a snapshot of
 * the machine (facts/snapshot.h, the collection doctor judges too), the
 * measurements, and the verdicts. */
#ifndef GDUNLOCK_P2P_P2P_COLLECT_H
#define GDUNLOCK_P2P_P2P_COLLECT_H

#include "facts/snapshot.h"
#include "p2p/p2p_report.h"

/* The whole report for the given CUDA ordinals: the GPUs, CUDA's and the
 * RM's answers and each pair's facts from the snapshot, then, when cu is
 * given, the measurements of r->bench (a failed run leaves its cause in
 * r->bench_error), and the verdicts. Returns 0, or -ENOENT with why when an
 * ordinal is not among the snapshot's CUDA devices. */
int gdu_p2p_collect(gdu_p2p_report *r, const gdu_snapshot *s, const gdu_cuda *cu,
                    const int *ordinals, int n, char *why, size_t why_len);

/* The first part alone: GPUs, answers and facts from the snapshot. */
int gdu_p2p_collect_facts(gdu_p2p_report *r, const gdu_snapshot *s, const int *ordinals, int n,
                          char *why, size_t why_len);

/* Each pair's verdict from its facts (with the measurements, once made) and
 * each route's reason. */
void gdu_p2p_decide(gdu_p2p_report *r);

/* True when a measurement failed: copied data was wrong on any route, an SM
 * kernel faulted inside one GPU, or the SM kernels did not load. An SM
 * fault between GPUs is a finding with its reason, like a refused pair. */
int gdu_p2p_measurement_failed(const gdu_p2p_report *r);

#endif
