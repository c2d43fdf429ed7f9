/* verify's document (verify.h) as text for people. */
#ifndef GDUNLOCK_VERIFY_VERIFY_TEXT_H
#define GDUNLOCK_VERIFY_VERIFY_TEXT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

/* Colour only on a terminal and when NO_COLOR is unset. */
bool gdu_verify_want_color(FILE *out);

/* doc, its outside text escaped, on out; color paints the verdict. */
void gdu_verify_print(FILE *out, const json_t *doc, bool color);

#endif
