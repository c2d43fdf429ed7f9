/* Fuzzes the nvidia-fs stats parser and the delta between two snapshots: the
 * input is split at its first NUL (or in half) into a "before" and an "after". */
#include "probe/nvfs_stats.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check(const gdu_nvfs_stats *st)
{
    if (st->n_gpus > GDU_NVFS_MAX_GPUS || strlen(st->gds_version) >= sizeof st->gds_version ||
        strlen(st->driver_version) >= sizeof st->driver_version)
        abort();
    for (size_t i = 0; i < st->n_gpus; i++)
        if (strlen(st->gpus[i].pci) >= sizeof st->gpus[i].pci ||
            strlen(st->gpus[i].uuid) >= sizeof st->gpus[i].uuid)
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    const char *nul = memchr(text, '\0', size);
    size_t cut = nul ? (size_t)(nul - text) : size / 2;
    size_t rest = nul ? size - cut - 1 : size - cut;
    /* Copy each half into its own exact-size heap block so ASan catches any over-read. */
    char *before = malloc(cut ? cut : 1), *after = malloc(rest ? rest : 1);
    if (!before || !after)
        abort();
    memcpy(before, text, cut);
    memcpy(after, text + size - rest, rest);
    static gdu_nvfs_stats b, a;
    static gdu_nvfs_delta d;
    gdu_nvfs_stats_parse(before, cut, &b);
    gdu_nvfs_stats_parse(after, rest, &a);
    check(&b);
    check(&a);
    gdu_nvfs_stats_delta(&b, &a, &d);
    if (d.n_gpus > GDU_NVFS_MAX_GPUS)
        abort();
    free(before);
    free(after);
    return 0;
}
