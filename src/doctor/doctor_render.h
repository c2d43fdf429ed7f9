/* Printing doctor's report: the human report (grouped by area, verdicts
 * first, coloured when wanted) and the --json document. */
#ifndef GDUNLOCK_DOCTOR_DOCTOR_RENDER_H
#define GDUNLOCK_DOCTOR_DOCTOR_RENDER_H

#include "doctor/doctor_report.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

/* Colour only on a terminal and when NO_COLOR is unset. */
bool gdu_doctor_want_color(FILE *out);

/* source: "live machine" or "sysroot DIR". */
void gdu_doctor_print_human(FILE *out, const gdu_report *r, const char *source, bool color);

/* The JSON document (gdunlock doctor puts it in its envelope); NULL without memory. */
json_t *gdu_doctor_to_json(const gdu_report *r, const char *source);

#endif
