/* The userspace BAR1 window between GPUs (issue 15), as far as it can be
 * decided without running it: which check of the driver refuses a BAR1
 * mapping as I/O memory (cuMemHostRegister(CU_MEMHOSTREGISTER_IOMEMORY) and
 * our own RM probe of the same, rm_bar1.h), named by its source lines in
 * open-gpu-kernel-modules 580.142, from RM's status and the facts around
 * it; and the facts' parsers. The steps themselves are run by the
 * feasibility program tests/gpu/p2p_window.c. */
#ifndef GDUNLOCK_TESTS_GPU_P2P_WINDOW_STUDY_H
#define GDUNLOCK_TESTS_GPU_P2P_WINDOW_STUDY_H

#include "rm_bar1.h"

#include <stddef.h>
#include <stdint.h>

typedef struct gdu_p2p_window_facts {
    uint32_t status;   /* RM's answer to describing the range as I/O memory */
    int vma_io_pfnmap; /* the CPU mapping is VM_IO and VM_PFNMAP (smaps "io" "pf"); -1 unknown */
    int in_gpu_bar;    /* its bus range lies in an attached GPU's BAR0 or BAR1; -1 unknown */
    int sys_admin;     /* the process has CAP_SYS_ADMIN; -1 unknown */
} gdu_p2p_window_facts;

typedef struct gdu_p2p_window_refusal {
    int known;          /* the status and facts point to one check */
    const char *check;  /* the refusing function */
    const char *source; /* file:lines in 580.142 */
    const char *why;    /* what the check requires, in a sentence */
} gdu_p2p_window_refusal;

/* Which check refused (status != NV_OK). */
void gdu_p2p_window_refusal_of(const gdu_p2p_window_facts *facts, gdu_p2p_window_refusal *out);

/* 1 when [addr, addr+size) overlaps a card's BAR0 or BAR1 (*which, *bar: that
 * card and 0 or 1), else 0. */
int gdu_rm_cards_bar_of(const gdu_rm_card *cards, size_t count, uint64_t addr, uint64_t size,
                        const gdu_rm_card **which, int *bar);

/* Whether capability cap (CAP_SYS_ADMIN = 21) is effective, from
 * /proc/self/status text (its CapEff line); -1 when the line is missing. */
int gdu_proc_status_cap(const char *status, int cap);

#endif
