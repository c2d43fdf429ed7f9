/* gdunlock bench output: the human table and the --json document. */
#ifndef GDUNLOCK_CLI_BENCH_RENDER_H
#define GDUNLOCK_CLI_BENCH_RENDER_H

#include "bench/bench.h"

#include <jansson.h>

void bench_print_table(const bench_config *c, const bench_gpu *g, const bench_result *r);
/* The --json report (in the envelope of cli_json.h); NULL without memory. */
json_t *bench_to_json(const bench_config *c, const bench_gpu *g, const bench_result *r);

#endif
