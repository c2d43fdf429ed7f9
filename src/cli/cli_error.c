#include "cli/cli_error.h"
#include "cli/exit_codes.h"
#include "util/json_text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool json_wanted;

void gdu_cli_set_json(bool on) { json_wanted = on; }

bool gdu_cli_json(void) { return json_wanted; }

static const char *exit_name(int exit_code)
{
    switch (exit_code) {
    case GDU_EXIT_FAILED:
        return "failed";
    case GDU_EXIT_USAGE:
        return "usage";
    case GDU_EXIT_NOINPUT:
        return "no_input";
    case GDU_EXIT_UNAVAILABLE:
        return "unavailable";
    case GDU_EXIT_IOERR:
        return "io_error";
    default:
        return "internal";
    }
}

json_t *gdu_cli_error_json(const char *command, int exit_code, const char *code,
                           const char *message, const char *fix)
{
    json_t *error = json_pack("{s:s}", "code", code ? code : exit_name(exit_code));
    if (error != NULL && gdu_json_set_text(error, "message", message) != 0)
        error = (json_decref(error), NULL);
    if (error != NULL && fix != NULL)
        json_object_set_new(error, "fix", gdu_json_text(fix));
    return json_pack("{s:o*, s:i, s:o*}", "command", gdu_json_text(command), "exit_code", exit_code,
                     "error", error);
}

void gdu_cli_error_doc(const char *command, int exit_code, const char *code, const char *message,
                       const char *fix)
{
    if (!json_wanted)
        return;
    json_t *doc = gdu_cli_error_json(command, exit_code, code, message, fix);
    if (doc != NULL && json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) == 0)
        fputc('\n', stdout);
    json_decref(doc);
}

int gdu_cli_fail(const char *command, int exit_code, const char *code, const char *fix,
                 const char *fmt, ...)
{
    char message[1024], see[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    fprintf(stderr, "gdunlock %s: %s\n", command, message);
    if (fix != NULL) {
        fprintf(stderr, "  fix: %s\n", fix);
    } else if (exit_code == GDU_EXIT_USAGE) {
        /* A bad argument: one line, and where the usage is. */
        snprintf(see, sizeof see, "see 'gdunlock %s --help'", command);
        fprintf(stderr, "%s\n", see);
        fix = see;
    }
    gdu_cli_error_doc(command, exit_code, code, message, fix);
    return exit_code;
}
