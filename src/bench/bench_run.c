/* One bench run's results: the paths' names, each path's GB/s and the
 * machine's ceiling they are compared with. */
#include "bench/bench.h"

const char *const bench_path_names[BENCH_NPATHS] = {"direct", "cufile-compat", "engine", "naive",
                                                     "host",   "h2d",           "host-uring"};

double bench_gbps(const bench_result *r)
{
    return r->ran && r->status == 0 && r->seconds > 0 ? (double)r->bytes / r->seconds / 1e9 : 0;
}

double bench_ceiling(const bench_result *r)
{
    double host = bench_gbps(&r[BENCH_HOST]), copy = bench_gbps(&r[BENCH_H2D]);
    if (host > 0 && copy > 0)
        return host < copy ? host : copy;
    return host > 0 ? host : copy;
}
