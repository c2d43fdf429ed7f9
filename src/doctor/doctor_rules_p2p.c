/* Per GPU pair: the P2P verdict (the p2p layer's reasoning over the facts
 * its gatherer takes from doctor's system view) and a finding with the
 * evidence. */
#include "doctor/doctor.h"
#include "doctor/doctor_pcie.h"
#include "facts/pair_facts.h"
#include "unlockplan/unlock_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const gdu_live_pair *live_pair(const gdu_snapshot *sys, const gdu_gpu_view *a,
                                      const gdu_gpu_view *b)
{
    if (a->cuda == NULL || b->cuda == NULL)
        return NULL;
    return gdu_live_pair_find(&sys->live, a->cuda->ordinal, b->cuda->ordinal);
}

/* Which of the four driver locks of the BAR1/mailbox analysis a cause is. */
static const char *lock_name(gdu_p2p_cause c)
{
    switch (c) {
    case GDU_P2P_CAUSE_REBAR:
        return "ReBAR lock (BAR1 smaller than memory)";
    case GDU_P2P_CAUSE_ARCH_HAL:
        return "architecture HAL lock (no BAR1 P2P for this chip)";
    case GDU_P2P_CAUSE_GMMU_APERTURE:
        return "GMMU aperture lock (PEER aperture refused)";
    case GDU_P2P_CAUSE_SKU_LOCK:
        return "SKU lock (P2P disabled for this product)";
    default:
        return NULL;
    }
}

static void rm_evidence(const gdu_live_pair *lp, const gdu_snapshot *sys, gdu_finding *f)
{
    if (lp == NULL || !lp->rm_known) {
        gdu_finding_evidence(f, "RM P2P caps: not available%s%s", sys->live.rm_why[0] ? ": " : "",
                             sys->live.rm_why);
        return;
    }
    char line[256];
    size_t used = (size_t)snprintf(line, sizeof line, "RM P2P caps 0x%x (%s):", lp->rm.caps,
                                   gdu_p2p_link_name(gdu_p2p_caps_link(lp->rm.caps)));
    for (unsigned i = 0; i < GDU_P2P_CAPS_INDEX_COUNT && used < sizeof line; i++)
        used +=
            (size_t)snprintf(line + used, sizeof line - used, " %s=%s", gdu_p2p_caps_index_name(i),
                             gdu_p2p_caps_status_id(lp->rm.status[i]));
    gdu_finding_evidence(f, "%s", line);
}

static void regkey_evidence(const gdu_snapshot *sys, gdu_finding *f)
{
    static const char *const keys[] = {"RMForceP2PType", "RMPcieP2PType", "ForceP2P"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        unsigned long v;
        if (gdu_registry_dword(sys->driver.registry_dwords, keys[i], &v) == 0)
            gdu_finding_evidence(f, "NVreg_RegistryDwords sets %s=0x%lx", keys[i], v);
    }
}

/* The stock driver binds BAR1 P2P for Hopper and Blackwell only; on those a
 * GeForce pair may get it from registry keys once BAR1 covers all memory. */
static void arch_evidence(const gdu_p2p_facts *facts, const gdu_p2p_verdict *v, gdu_finding *f)
{
    if (v->link != GDU_P2P_LINK_NONE || facts->geforce != GDU_TRI_YES || facts->cc_major == 0)
        return;
    if (facts->cc_major >= 9)
        gdu_finding_evidence(f,
                             "compute %d.x has the driver's BAR1 P2P code: with ReBAR covering "
                             "all memory, try NVreg_RegistryDwords=\"RMForceP2PType=1;"
                             "RMPcieP2PType=1\" before a patched driver",
                             facts->cc_major);
    else
        gdu_finding_evidence(f,
                             "compute %d.x: the stock driver has no BAR1 P2P for this "
                             "architecture (HAL lock); registry keys alone cannot enable it",
                             facts->cc_major);
}

/* Why neither CUDA nor the RM answered for a pair. */
static const char *unanswered_why(const gdu_snapshot *sys)
{
    return sys->live.origin == GDU_LIVE_ABSENT ? "the capture has no live answers"
           : !sys->live.cuda_ok                ? sys->live.cuda_why
                                               : "CUDA does not list both GPUs";
}

static void pair_finding(const gdu_snapshot *sys, const gdu_gpu_view *a, const gdu_gpu_view *b,
                         const gdu_p2p_pair *p, const gdu_p2p_facts *facts,
                         const gdu_unlock_pair *unlock, gdu_report *r)
{
    char id[48];
    snprintf(id, sizeof id, "p2p.gpu%d-gpu%d", a->index, b->index);
    const gdu_p2p_verdict *v = &p->verdict;
    gdu_status st = v->undetermined                  ? GDU_ST_UNKNOWN
                    : v->cause != GDU_P2P_CAUSE_NONE ? GDU_ST_FAIL
                    : v->warning[0]                  ? GDU_ST_WARN
                                                     : GDU_ST_OK;
    gdu_finding *f = gdu_report_add(r, id, "p2p", st, "P2P GPU%d<->GPU%d: %s", a->index, b->index,
                                    gdu_p2p_verdict_class(v));
    gdu_finding_evidence(f, "%s", v->reason);
    if (v->undetermined)
        gdu_finding_evidence(f, "not asked: %s", unanswered_why(sys));
    const gdu_live_pair *lp = live_pair(sys, a, b);
    gdu_finding_evidence(f, "cuDeviceCanAccessPeer: %s",
                         facts->cuda_can_access == GDU_TRI_YES  ? "1"
                         : facts->cuda_can_access == GDU_TRI_NO ? "0"
                                                                : "unknown");
    rm_evidence(lp, sys, f);
    gdu_finding_evidence(f, "PCIe path %s, IOMMU %s", gdu_path_kind_name(p->path.kind),
                         gdu_iommu_mode_name(sys->iommu.mode));
    gdu_path_bridge_evidence(sys, &p->path, f);
    const char *lock = lock_name(v->cause);
    if (lock != NULL)
        gdu_finding_evidence(f, "lock: %s", lock);
    regkey_evidence(sys, f);
    arch_evidence(facts, v, f);
    if (unlock != NULL && facts->geforce == GDU_TRI_YES && v->cause != GDU_P2P_CAUSE_NONE)
        gdu_finding_evidence(f, "unlock plan: %s ('gdunlock p2p unlock --check')",
                             gdu_unlock_plan_name(unlock->plan));
    if (v->warning[0])
        gdu_finding_evidence(f, "%s", v->warning);
    if (v->fix[0])
        gdu_finding_fix(f, "%s", v->fix);
}

void gdu_doctor_rules_p2p(const gdu_snapshot *sys, const gdu_gpu_view *gpus, size_t n,
                          gdu_report *r)
{
    if (n < 2)
        return;
    r->pairs = calloc(n * (n - 1) / 2, sizeof *r->pairs);
    gdu_unlock_check *unlock = malloc(sizeof *unlock);
    if (r->pairs == NULL) {
        free(unlock);
        return;
    }
    if (unlock != NULL) /* without memory for it, the verdicts go without the plan */
        gdu_unlock_check_run(sys, unlock);
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++) {
            gdu_p2p_pair *p = &r->pairs[r->n_pairs++];
            gdu_p2p_facts facts;
            p->a = gpus[i].index;
            p->b = gpus[j].index;
            gdu_pair_facts(sys, &gpus[i], &gpus[j], &facts, &p->path);
            gdu_p2p_reason(&facts, &p->verdict);
            char advice[640] = "";
            if (unlock != NULL)
                gdu_unlock_pair_advice(unlock, gpus[i].bdf, gpus[j].bdf, advice, sizeof advice);
            gdu_p2p_verdict_name_unlock(&p->verdict, &facts, advice);
            pair_finding(sys, &gpus[i], &gpus[j], p, &facts,
                         unlock ? gdu_unlock_find_pair(unlock, gpus[i].bdf, gpus[j].bdf) : NULL, r);
        }
    free(unlock);
}
