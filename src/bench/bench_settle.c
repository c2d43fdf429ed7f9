/* gdunlock bench: a quiet storage before each timed path. Without it the path
 * that runs after a --create or after a write run pays for the earlier
 * run's dirty pages being written back (dirty_ratio throttling on writes,
 * a busy disk on cold reads): that alone turned the engine/host ratio
 * around depending on which ran first
 * (bench/results/2026-11-30-h200-io-batch2.md). */
#include "bench/bench.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Below this much Dirty + Writeback the system counts as settled: a busy
 * machine always has a little. */
#define SETTLED_KIB (64 * 1024)
/* sync() has normally written everything back when it returns; the wait is
 * for writers outside the bench, bounded so that a busy machine cannot
 * stall a run of many paths and rounds. */
#define SETTLE_TIMEOUT_S 20

/* Dirty + Writeback from /proc/meminfo in KiB, or -1 if unreadable. */
static long long unwritten_kib(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (f == NULL)
        return -1;
    char line[256];
    long long sum = 0, v;
    int found = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        if (sscanf(line, "Dirty: %lld kB", &v) == 1 ||
            sscanf(line, "Writeback: %lld kB", &v) == 1) {
            sum += v;
            found++;
        }
    }
    fclose(f);
    return found > 0 ? sum : -1;
}

void bench_settle(bool drop_caches)
{
    sync();
    struct timespec nap = {0, 100 * 1000 * 1000};
    for (int i = 0; i < SETTLE_TIMEOUT_S * 10; i++) {
        long long kib = unwritten_kib();
        if (kib < 0 || kib <= SETTLED_KIB)
            break;
        nanosleep(&nap, NULL);
        if (i % 10 == 9)
            sync();
    }
    if (drop_caches && geteuid() == 0) { /* root: the whole page cache too */
        FILE *dc = fopen("/proc/sys/vm/drop_caches", "w");
        if (dc != NULL) {
            fputs("1\n", dc);
            fclose(dc);
        }
    }
}
