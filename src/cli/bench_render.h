/* gdunlock bench output: the human table and the --json document. */
#ifndef GDUNLOCK_CLI_BENCH_RENDER_H
#define GDUNLOCK_CLI_BENCH_RENDER_H

#include "bench/bench.h"

void bench_print_table(const bench_config *c, const bench_gpu *g, const bench_result *r);
int bench_print_json(const bench_config *c, const bench_gpu *g, const bench_result *r, int argc,
                     char **argv);

#endif
