/* Output of `gdunlock load`: the human summary (and tensor table), the JSON
 * document, and the fix hint for each loader error. */
#ifndef GDUNLOCK_CLI_LOAD_REPORT_H
#define GDUNLOCK_CLI_LOAD_REPORT_H

#include "safetensors/st_stages.h"
#include "gdunlock/safetensors.h"

#include <jansson.h>
#include <stdio.h>

typedef struct load_result {
    const char *path;
    const gdu_st_model *model;
    gdu_st_target target;
    const int *gpus;
    size_t gpu_count;
    double open_seconds;
    st_stages stages;
    int verified; /* -1: not asked, 0: equal to the file, 1: failed */
    int lenient;  /* opened with GDU_ST_LENIENT */
    gdu_st_error verify_error;
} load_result;

/* What to do about a loader error, in one line. */
const char *load_fix_hint(gdu_st_status status);

/* Exit status (util/exit_codes.h) for a loader error. */
int load_exit_code(gdu_st_status status);

void load_print_human(FILE *out, const load_result *r, int colour, int list);

/* The load's JSON report on stdout, in the envelope; with list, the tensor
 * table last, written one tensor at a time (a million-tensor header must
 * not need a million JSON objects at once). Returns exit_code, or
 * GDU_EXIT_SOFTWARE without memory. */
int load_print_json(const load_result *r, int list, int exit_code);

#endif
