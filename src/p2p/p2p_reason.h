/* Why a GPU pair has (or lacks) P2P, and what to do about it, from the pair's
 * facts (facts/pair_facts.h), for doctor and gdunlock p2p alike. Covers the
 * four driver locks of the BAR1/mailbox article (ReBAR, architecture HAL,
 * GMMU aperture, SKU) and the system causes (ACS, IOMMU, topology, chipset,
 * registry keys). */
#ifndef GDUNLOCK_P2P_P2P_REASON_H
#define GDUNLOCK_P2P_P2P_REASON_H

#include "facts/pair_facts.h"
#include "p2p/p2p_route.h"

#include <stdbool.h>
#include <stdint.h>

typedef enum gdu_p2p_cause {
    GDU_P2P_CAUSE_NONE = 0,      /* P2P works */
    GDU_P2P_CAUSE_SKU_LOCK,      /* GeForce: mailbox P2P locked per product, no BAR1 fallback */
    GDU_P2P_CAUSE_ARCH_HAL,      /* the driver has no BAR1 P2P for this architecture */
    GDU_P2P_CAUSE_REBAR,         /* BAR1 smaller than memory: ReBAR off */
    GDU_P2P_CAUSE_GMMU_APERTURE, /* mapping peer memory failed (PEER aperture lock) */
    GDU_P2P_CAUSE_REGKEY,        /* a driver registry key disables it */
    GDU_P2P_CAUSE_TOPOLOGY,      /* across CPU sockets / I/O hubs */
    GDU_P2P_CAUSE_CHIPSET,       /* the RM does not trust this root complex for P2P */
    GDU_P2P_CAUSE_ACS,           /* ACS redirects P2P requests on the path */
    GDU_P2P_CAUSE_IOMMU,         /* an IOMMU translates device DMA */
    GDU_P2P_CAUSE_DRIVER,        /* RM allows it but CUDA refuses: user/kernel driver mismatch */
    GDU_P2P_CAUSE_UNKNOWN,
} gdu_p2p_cause;

typedef struct gdu_p2p_verdict {
    bool undetermined;   /* neither CUDA nor the RM answered for the pair: no verdict */
    gdu_p2p_link link;   /* the path peer copies take (NONE: staged through host) */
    gdu_p2p_cause cause; /* why there is no P2P (NONE when it works) */
    char reason[384];    /* one or two sentences with the evidence */
    char fix[640];       /* what a user can do; empty when nothing is needed */
    char warning[256];   /* works, but something costs speed or safety; may be empty */
} gdu_p2p_verdict;

/* The pair's verdict; undetermined when neither CUDA nor the RM answered. */
void gdu_p2p_reason(const gdu_p2p_facts *facts, gdu_p2p_verdict *verdict);

/* A GeForce pair refused for a driver lock (SKU, architecture HAL, GMMU
 * aperture, ReBAR): its fix becomes advice, the unlock plan that applies
 * and the command (unlockplan/unlock_plan.h, gdu_unlock_pair_advice). Other
 * verdicts, and an empty advice, are left alone. */
void gdu_p2p_verdict_name_unlock(gdu_p2p_verdict *verdict, const gdu_p2p_facts *facts,
                                 const char *advice);

/* The verdict's class: "NVLink" (C2C included), "BAR1", "PCIe", "staged
 * only", or "unknown" when undetermined. */
const char *gdu_p2p_verdict_class(const gdu_p2p_verdict *verdict);

/* Why one route (p2p_route.h) came out as it did, from the pair's facts:
 * cause NONE for OK; for NO_PEER the pair's own refusal; for FAULT and WRONG
 * the lock or system cause the facts point to (on GeForce an SM fault where
 * the copy engine works is the GMMU's PEER-aperture lock). within_gpu: the
 * route ran inside one GPU (the diagonal), where P2P facts do not apply.
 * NOT_RUN gets cause UNKNOWN and "not measured". */
void gdu_p2p_route_reason(const gdu_p2p_facts *facts, int within_gpu, gdu_p2p_route route,
                          gdu_p2p_route_state state, gdu_p2p_verdict *verdict);

/* "sku_lock", "rebar", ... stable ids for JSON and fixtures; "none" for NONE. */
const char *gdu_p2p_cause_id(gdu_p2p_cause cause);

#endif
