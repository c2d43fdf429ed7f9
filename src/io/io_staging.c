/* The engine's staging memory. One mapping holds every worker's slots: each
 * worker faults its own slots in, on its own thread, and the mapping is
 * pinned in two calls, the first slot of every worker, then the others.
 * Slots mapped and pinned one by one from every worker at once kept a fresh
 * engine's first copy waiting many times longer than one registration of
 * the same bytes, already faulted in: the registrations queue behind one
 * another; in transparent huge pages, faulted in by touching, the first
 * copy starts sooner than in 4 KiB pages
 * (bench/results/2026-12-01-h200-first-load-staging.md). A registration
 * costs in proportion to its bytes
 * (bench/results/2026-12-02-h200-staging-in-two.md), so
 * the workers start on their first slot once half the region is pinned,
 * and take up their others when the rest is. When the mapping cannot be had
 * or pinned, slots are allocated one by one instead
 * (gdu_io_staging_slot_alloc), and a worker short of them goes on with
 * fewer. */
#include "io/io_internal.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define HUGE_PAGE ((size_t)2 << 20)

/* Bytes of the region's first part: the first slot of every worker. */
static size_t first_part(const gdu_io_engine *e)
{
    return (size_t)e->opt.workers * e->opt.chunk_size;
}

/* Where worker w's slot j lies in the region: slot 0 of every worker, then
 * slot 1 of every worker, and so on. */
static char *slot_in_region(const gdu_io_engine *e, unsigned w, unsigned j)
{
    return e->staging + ((size_t)j * e->opt.workers + w) * e->opt.chunk_size;
}

/* Writable anonymous memory, not yet faulted in; NULL with why. */
static char *map(size_t bytes, char *why, size_t len)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED)
        return p;
    snprintf(why, len, "mmap of %zu bytes of staging memory: %s", bytes, strerror(errno));
    return NULL;
}

/* Faults [p, p + bytes) in for writing, as a read into it would, by writing
 * to every page: in huge pages that is one fault per 2 MiB.
 * (MADV_POPULATE_WRITE from 8 threads at once made the first copy wait
 * longer on kernel 6.18; bench/results/2026-12-01-h200-first-load-staging.md.) */
static void fault_in(char *p, size_t bytes)
{
    long page = sysconf(_SC_PAGESIZE);
    for (size_t off = 0; off < bytes; off += (size_t)(page > 0 ? page : 4096))
        ((volatile char *)p)[off] = 0;
}

/* bytes of writable memory aligned to 2 MiB and advised into transparent
 * huge pages (where the kernel has them: with THP off it stays 4 KiB pages),
 * not yet faulted in; NULL with why. */
static char *map_huge(size_t bytes, char *why, size_t len)
{
    char *raw = map(bytes + HUGE_PAGE, why, len);
    if (raw == NULL)
        return NULL;
    char *p = (char *)(((uintptr_t)raw + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    if (p > raw)
        munmap(raw, (size_t)(p - raw));
    munmap(p + bytes, (size_t)(raw + HUGE_PAGE - p)); /* at least a page: p < raw + HUGE_PAGE */
    madvise(p, bytes, MADV_HUGEPAGE);
    return p;
}

void gdu_io_staging_map(gdu_io_engine *e)
{
    e->staging_bytes = first_part(e) * e->opt.staging_per_worker;
    e->staging_by_use = e->staging_bytes > GDU_IO_PRESTAGE_MAX;
    char why[GDU_IO_WHY]; /* a region refused is only a slower start: slots on their own */
    e->staging = map_huge(e->staging_bytes, why, sizeof why);
    e->staging_state = e->staging ? GDU_IO_STAGING_FAULTING : GDU_IO_STAGING_BY_SLOT;
    e->staging_faulting = e->opt.workers;
    e->staging_faulting_rest = e->opt.staging_per_worker > 1 ? e->opt.workers : 0;
}

void gdu_io_staging_fault(gdu_io_engine *e, unsigned worker, bool first)
{
    unsigned from = first ? 0 : 1, to = first ? 1 : e->opt.staging_per_worker;
    for (unsigned j = from; j < to && !e->staging_by_use; j++)
        fault_in(slot_in_region(e, worker, j), e->opt.chunk_size);
}

int gdu_io_staging_pin_first(gdu_io_engine *e)
{
    char why[GDU_IO_WHY];
    if (e->staging_by_use)
        return 0;
    return e->mover->staging_pin(e, e->staging, first_part(e), why, sizeof why);
}

int gdu_io_staging_pin_rest(gdu_io_engine *e, char *why, size_t len)
{
    char *p = e->staging + first_part(e);
    size_t bytes = e->staging_bytes - first_part(e);
    int r = e->staging_by_use ? 0 : e->mover->staging_pin(e, p, bytes, why, len);
    if (r != 0) { /* the other slots stay NULL: allocated on their own */
        munmap(p, bytes);
        e->staging_bytes = first_part(e);
        return r;
    }
    e->staging_rest_pinned = !e->staging_by_use;
    for (unsigned w = 0; w < e->opt.workers; w++)
        for (unsigned j = 1; j < e->opt.staging_per_worker; j++)
            e->workers[w].slots_of[j].buf = slot_in_region(e, w, j);
    return 0;
}

void gdu_io_staging_settle_first(gdu_io_engine *e, int pinned)
{
    if (pinned != 0) {
        e->staging_state = GDU_IO_STAGING_BY_SLOT;
        if (e->staging_faulting_rest == 0) { /* else unmapped once nobody faults in it */
            munmap(e->staging, e->staging_bytes);
            e->staging = NULL;
        }
        return;
    }
    bool rest = e->opt.staging_per_worker > 1;
    e->staging_state = rest ? GDU_IO_STAGING_GROWING : GDU_IO_STAGING_PINNED;
    for (unsigned w = 0; w < e->opt.workers; w++) {
        e->workers[w].slots_of[0].buf = slot_in_region(e, w, 0);
        /* Nobody has left the region's wait unless the engine stops (and a
         * stopping worker may read its count): the counts are ours to set. */
        if (rest && !e->stopping) {
            e->workers[w].slots = 1;
            e->workers[w].growing = true;
        }
    }
}

void gdu_io_staging_settle_rest(gdu_io_engine *e)
{
    if (e->staging_state == GDU_IO_STAGING_BY_SLOT) { /* the first part failed */
        munmap(e->staging, e->staging_bytes);
        e->staging = NULL;
        return;
    }
    e->staging_state = GDU_IO_STAGING_PINNED;
}

void *gdu_io_staging_slot_alloc(gdu_io_engine *e, char *why, size_t len)
{
    size_t bytes = e->opt.chunk_size;
    char *p = map(bytes, why, len);
    if (p == NULL || e->staging_by_use)
        return p;
    fault_in(p, bytes);
    if (e->mover->staging_pin(e, p, bytes, why, len) != 0) {
        munmap(p, bytes);
        return NULL;
    }
    return p;
}

void gdu_io_staging_free(gdu_io_engine *e)
{
    uintptr_t lo = (uintptr_t)e->staging, hi = lo + (e->staging ? e->staging_bytes : 0);
    for (unsigned w = 0; e->workers != NULL && w < e->opt.workers; w++)
        for (unsigned j = 0; j < GDU_IO_MAX_STAGING; j++) {
            void *p = e->workers[w].slots_of[j].buf;
            if (p == NULL || ((uintptr_t)p >= lo && (uintptr_t)p < hi))
                continue;
            if (!e->staging_by_use)
                e->mover->staging_unpin(e, p);
            munmap(p, e->opt.chunk_size);
        }
    if (e->staging == NULL)
        return;
    if (!e->staging_by_use &&
        (e->staging_state == GDU_IO_STAGING_GROWING || e->staging_state == GDU_IO_STAGING_PINNED))
        e->mover->staging_unpin(e, e->staging);
    if (e->staging_rest_pinned)
        e->mover->staging_unpin(e, e->staging + first_part(e));
    munmap(e->staging, e->staging_bytes);
    e->staging = NULL;
}
