/* The p2p report: the pair's answers and facts from a snapshot of the
 * machine (the one collection doctor judges too), the measurements, and the
 * verdicts. */
#include "p2p/p2p_collect.h"

#include "unlockplan/unlock_plan.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gdu_p2p_collect_facts(gdu_p2p_report *r, const gdu_snapshot *s, const int *ordinals, int n,
                          char *why, size_t why_len)
{
    gdu_gpu_view views[GDU_P2P_MAX_GPUS];
    r->n = n;
    for (int i = 0; i < n; i++) {
        if (gdu_snapshot_gpu_by_ordinal(s, ordinals[i], &views[i]) != 0) {
            snprintf(why, why_len, "CUDA has no device %d", ordinals[i]);
            return -ENOENT;
        }
        const gdu_live_gpu *g = views[i].cuda;
        gdu_p2p_gpu *out = &r->gpu[i];
        *out = (gdu_p2p_gpu){.ordinal = g->ordinal,
                             .memory_bytes = g->total_mem,
                             .cc_major = g->cc_major,
                             .cc_minor = g->cc_minor};
        snprintf(out->name, sizeof out->name, "%s", g->name);
        snprintf(out->pci_bus_id, sizeof out->pci_bus_id, "%s", g->bdf);
        r->rm_known[i] = g->rm_known;
        r->rm_gpu_id[i] = g->rm_gpu_id;
        r->bar1_bytes[i] = views[i].bar1;
    }
    snprintf(r->rm_error, sizeof r->rm_error, "%s", s->live.rm_why);
    /* What `gdunlock p2p unlock` would do for each pair, for the verdicts' fixes. */
    gdu_unlock_check *unlock = malloc(sizeof *unlock);
    if (unlock != NULL)
        gdu_unlock_check_run(s, unlock);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            gdu_p2p_pair_report *p = &r->pair[i][j];
            p->cuda = (gdu_p2p_cuda_pair){-1, -1, -1, -1, -1};
            gdu_p2p_facts_init(&p->facts);
            if (i == j)
                continue;
            gdu_pair_facts(s, &views[i], &views[j], &p->facts, NULL);
            if (unlock != NULL)
                gdu_unlock_pair_advice(unlock, views[i].bdf, views[j].bdf, p->unlock_advice,
                                       sizeof p->unlock_advice);
            const gdu_live_pair *lp = gdu_live_pair_find(&s->live, ordinals[i], ordinals[j]);
            if (lp != NULL) {
                p->cuda =
                    (gdu_p2p_cuda_pair){lp->can_access, lp->performance_rank, lp->access_supported,
                                        lp->native_atomics, lp->cuda_array_access};
                p->rm_known = lp->rm_known;
                p->rm = lp->rm;
            }
        }
    free(unlock);
    return 0;
}

static int route_failed(gdu_p2p_route_state s)
{
    return s == GDU_P2P_ROUTE_FAULT || s == GDU_P2P_ROUTE_WRONG;
}

/* Each route's reason; a pair whose copy engines work while its SM routes
 * fail gets a warning, since NCCL's P2P transport uses SM loads and stores. */
static void decide_routes(gdu_p2p_report *r, int i, int j)
{
    gdu_p2p_pair_report *p = &r->pair[i][j];
    const gdu_p2p_results *res = &r->results;
    int sm_failed = 0;
    for (int k = 0; k < GDU_P2P_ROUTES; k++) {
        gdu_p2p_route_state st = res->route[k][i][j];
        gdu_p2p_route_reason(&p->facts, i == j, (gdu_p2p_route)k, st, &p->route[k]);
        gdu_p2p_verdict_name_unlock(&p->route[k], &p->facts, p->unlock_advice);
        sm_failed |= k != GDU_P2P_ROUTE_CE && route_failed(st);
    }
    if (i != j && sm_failed && p->verdict.cause == GDU_P2P_CAUSE_NONE)
        snprintf(p->verdict.warning, sizeof p->verdict.warning,
                 "copy-engine P2P works but SM loads/stores of the peer's memory do not (see the "
                 "routes): NCCL's P2P transport uses them; run NCCL with NCCL_P2P_DISABLE=1");
}

int gdu_p2p_measurement_failed(const gdu_p2p_report *r)
{
    const gdu_p2p_results *res = &r->results;
    if (!r->measured)
        return 0;
    if (res->buffers_corrupt != 0)
        return 1;
    int faulted = 0;
    for (int k = 0; k < GDU_P2P_ROUTES; k++)
        for (int i = 0; i < res->n; i++)
            for (int j = 0; j < res->n; j++) {
                gdu_p2p_route_state st = res->route[k][i][j];
                if (st == GDU_P2P_ROUTE_WRONG || (i == j && st == GDU_P2P_ROUTE_FAULT))
                    return 1;
                faulted |= st == GDU_P2P_ROUTE_FAULT;
            }
    /* An SM error without a faulted route: the kernels never ran. */
    return res->sm_run && res->sm_error[0] != '\0' && !faulted;
}

void gdu_p2p_decide(gdu_p2p_report *r)
{
    for (int i = 0; i < r->n; i++)
        for (int j = 0; j < r->n; j++) {
            gdu_p2p_pair_report *p = &r->pair[i][j];
            gdu_p2p_facts *f = &p->facts;
            if (i != j && r->measured) {
                const gdu_p2p_results *res = &r->results;
                f->enable_failed = res->enable_failed[i][j] ? GDU_TRI_YES : GDU_TRI_NO;
                f->data_corrupt =
                    res->corrupt[GDU_P2P_MODE_ENABLED][i][j] ? GDU_TRI_YES : GDU_TRI_NO;
            }
            if (i != j) {
                gdu_p2p_reason(f, &p->verdict);
                gdu_p2p_verdict_name_unlock(&p->verdict, f, p->unlock_advice);
            }
            if (r->measured)
                decide_routes(r, i, j);
        }
}

int gdu_p2p_collect(gdu_p2p_report *r, const gdu_snapshot *s, const gdu_cuda *cu,
                    const int *ordinals, int n, char *why, size_t why_len)
{
    int rc = gdu_p2p_collect_facts(r, s, ordinals, n, why, why_len);
    if (rc != 0)
        return rc;
    char bench_why[256];
    if (cu != NULL) {
        if (gdu_p2p_bench_run(cu, ordinals, n, &r->bench, &r->results, bench_why,
                              sizeof bench_why) == 0)
            r->measured = 1;
        else
            snprintf(r->bench_error, sizeof r->bench_error, "%s", bench_why);
    }
    gdu_p2p_decide(r);
    return 0;
}
