#include "p2p_window_study.h"

#include "driverabi/nv_status.h"

#include <stdlib.h>
#include <string.h>

/* Source paths in open-gpu-kernel-modules 580.142. */
#define OSMEMDESC "src/nvidia/arch/nvalloc/unix/src/osmemdesc.c"
#define OSMLOCK "kernel-open/nvidia/os-mlock.c"

void gdu_p2p_window_refusal_of(const gdu_p2p_window_facts *f, gdu_p2p_window_refusal *out)
{
    memset(out, 0, sizeof *out);
    switch (f->status) {
    case GDU_NV_ERR_INVALID_FLAGS:
        *out = (gdu_p2p_window_refusal){
            1, "osCreateOsDescriptorFromIoMemory", OSMEMDESC ":440-444",
            "I/O memory must be described uncached and physically contiguous"};
        return;
    case GDU_NV_ERR_INSUFFICIENT_PERMISSIONS:
        /* os_desc_mem.c:109 sets PEER_MAP_OVERRIDE_REQUIRED on every I/O range. */
        *out = (gdu_p2p_window_refusal){
            1, "osCreateOsDescriptorFromIoMemory", OSMEMDESC ":452-466",
            "registering I/O memory needs CAP_SYS_ADMIN unless the driver's PeerMappingOverride "
            "registry key is set (os_desc_mem.c:109 marks every I/O range PEER_MAP_OVERRIDE)"};
        return;
    case GDU_NV_ERR_INVALID_ADDRESS:
        if (f->vma_io_pfnmap == 0) {
            *out =
                (gdu_p2p_window_refusal){1, "os_lookup_user_io_memory", OSMLOCK ":184-192",
                                         "the range must lie inside one VM_IO/VM_PFNMAP mapping"};
            return;
        }
        if (f->vma_io_pfnmap == 1 && f->in_gpu_bar == 1 && f->sys_admin != 0) {
            *out = (gdu_p2p_window_refusal){
                1, "osCheckGpuBarsOverlapAddrRange", OSMEMDESC ":483-490 (the check: :352-394)",
                "a range that overlaps any attached GPU's BAR0, BAR1 (FB) or instance BAR is "
                "refused (the BAR1 P2P deadlock of bug 1571948), whichever GPU registers it"};
            return;
        }
        if (f->vma_io_pfnmap == 1 && f->in_gpu_bar == 0) {
            *out =
                (gdu_p2p_window_refusal){1, "get_io_ptes", OSMLOCK ":122-146",
                                         "the mapping's page frames must be one contiguous range"};
            return;
        }
        break;
    default:
        break;
    }
    out->why = "no check of the 580.142 source explains this status with these facts";
}

int gdu_rm_cards_bar_of(const gdu_rm_card *cards, size_t count, uint64_t addr, uint64_t size,
                        const gdu_rm_card **which, int *bar)
{
    for (size_t i = 0; i < count; i++) {
        uint64_t base[2] = {cards[i].bar0_addr, cards[i].bar1_addr};
        uint64_t len[2] = {cards[i].bar0_size, cards[i].bar1_size};
        for (int b = 0; b < 2; b++)
            if (len[b] != 0 && addr < base[b] + len[b] && base[b] < addr + size) {
                *which = &cards[i];
                *bar = b;
                return 1;
            }
    }
    return 0;
}

int gdu_proc_status_cap(const char *status, int cap)
{
    if (cap < 0 || cap > 63)
        return -1;
    for (const char *p = status; p != NULL && *p != '\0';) {
        if (strncmp(p, "CapEff:", 7) == 0) {
            char *end;
            unsigned long long v = strtoull(p + 7, &end, 16);
            if (end == p + 7)
                return -1;
            return (int)((v >> cap) & 1);
        }
        p = strchr(p, '\n');
        if (p != NULL)
            p++;
    }
    return -1;
}
