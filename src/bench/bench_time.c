/* Clocks and the pace of the progress reports of gdunlock bench. */
#include "bench/bench.h"

#include <sys/resource.h>
#include <unistd.h>

double bench_cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

void bench_progress(const bench_config *c, const char *path, uint64_t done, bool final)
{
    static double last;
    if (c->progress == NULL)
        return;
    double now = gdu_now_seconds();
    if (!final && now - last < 0.5)
        return;
    last = now;
    c->progress(c->progress_user, path, done, c->total, final);
}
