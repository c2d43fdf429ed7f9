/* Gathers the capability part of the p2p report: CUDA's view of each GPU and
 * pair, the RM's P2P caps through our own RM client, and the verdicts. */
#include "p2p/p2p_collect.h"

#include "facts/pair_facts.h"
#include "facts/rm_p2p_caps.h"

#include <stdio.h>
#include <string.h>

int gdu_p2p_collect_cuda(gdu_p2p_report *r, const gdu_cuda *cu, const int *ordinals, int n,
                         char *why, size_t why_len)
{
    r->n = n;
    for (int i = 0; i < n; i++)
        if (gdu_p2p_gpu_query(cu, ordinals[i], &r->gpu[i], why, why_len) != 0)
            return -1;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            gdu_p2p_facts_init(&r->pair[i][j].facts);
            if (gdu_p2p_cuda_pair_query(cu, ordinals[i], ordinals[j], &r->pair[i][j].cuda, why,
                                        why_len) != 0)
                return -1;
        }
    return 0;
}

/* RM gpuIds of our GPUs, matched by PCI domain/bus/device. */
static void match_rm_ids(gdu_p2p_report *r, const gdu_rm_gpu *rm, size_t count)
{
    for (int i = 0; i < r->n; i++)
        for (size_t k = 0; k < count; k++)
            if (rm[k].domain == r->gpu[i].domain && rm[k].bus == r->gpu[i].bus &&
                rm[k].device == r->gpu[i].device) {
                r->rm_known[i] = 1;
                r->rm_gpu_id[i] = rm[k].gpu_id;
            }
}

void gdu_p2p_collect_rm(gdu_p2p_report *r)
{
    gdu_rm_client client;
    gdu_rm_gpu rm[GDU_RM_MAX_GPUS];
    size_t count = 0;
    char why[256];
    if (gdu_rm_client_open(&client, NULL, NULL, why, sizeof why) != 0) {
        snprintf(r->rm_error, sizeof r->rm_error, "%s", why);
        return;
    }
    if (gdu_rm_attached_gpus(&client, rm, GDU_RM_MAX_GPUS, &count, why, sizeof why) != 0) {
        snprintf(r->rm_error, sizeof r->rm_error, "%s", why);
        gdu_rm_client_close(&client);
        return;
    }
    match_rm_ids(r, rm, count);
    for (int i = 0; i < r->n; i++)
        for (int j = 0; j < r->n; j++) {
            gdu_p2p_pair_report *p = &r->pair[i][j];
            if (i == j || !r->rm_known[i] || !r->rm_known[j])
                continue;
            if (gdu_rm_p2p_caps(&client, r->rm_gpu_id[i], r->rm_gpu_id[j], &p->rm, why,
                                sizeof why) == 0)
                p->rm_known = 1;
            else if (r->rm_error[0] == '\0')
                snprintf(r->rm_error, sizeof r->rm_error, "%s", why);
        }
    for (int i = 0; i < r->n; i++)
        if (!r->rm_known[i] && r->rm_error[0] == '\0')
            snprintf(r->rm_error, sizeof r->rm_error, "GPU %s is not among the RM's attached GPUs",
                     r->gpu[i].pci_bus_id);
    gdu_rm_client_close(&client);
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
            if (i == j) {
                if (r->measured)
                    decide_routes(r, i, j);
                continue;
            }
            const gdu_p2p_gpu_facts a = {r->gpu[i].name, r->gpu[i].memory_bytes,
                                         r->gpu[i].cc_major};
            const gdu_p2p_gpu_facts b = {r->gpu[j].name, r->gpu[j].memory_bytes,
                                         r->gpu[j].cc_major};
            const gdu_p2p_answers answers = {gdu_tri_of(p->cuda.can_access),
                                             gdu_tri_of(p->cuda.native_atomics), p->rm_known,
                                             p->rm};
            gdu_p2p_facts_answers(&a, &b, &answers, f);
            if (r->measured) {
                const gdu_p2p_results *res = &r->results;
                f->enable_failed = res->enable_failed[i][j] ? GDU_TRI_YES : GDU_TRI_NO;
                f->data_corrupt =
                    res->corrupt[GDU_P2P_MODE_ENABLED][i][j] ? GDU_TRI_YES : GDU_TRI_NO;
            }
            gdu_p2p_reason(f, &p->verdict);
            if (r->measured)
                decide_routes(r, i, j);
        }
}

int gdu_p2p_collect(gdu_p2p_report *r, const gdu_cuda *cu, const int *ordinals, int n, int measure,
                    char *why, size_t why_len)
{
    if (gdu_p2p_collect_cuda(r, cu, ordinals, n, why, why_len) != 0)
        return -1;
    if (n > 1)
        gdu_p2p_collect_rm(r);
    gdu_p2p_collect_platform(r, "/");
    char bench_why[256];
    if (measure) {
        if (gdu_p2p_bench_run(cu, ordinals, n, &r->bench, &r->results, bench_why,
                              sizeof bench_why) == 0)
            r->measured = 1;
        else
            snprintf(r->bench_error, sizeof r->bench_error, "%s", bench_why);
    }
    gdu_p2p_decide(r);
    return 0;
}
