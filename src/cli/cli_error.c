#include "cli/cli_error.h"
#include "util/exit_codes.h"
#include "util/json_text.h"
#include "util/text.h"

#include <stdarg.h>
#include <stdio.h>

static bool json_wanted;

void gdu_cli_set_json(bool on) { json_wanted = on; }

bool gdu_cli_json(void) { return json_wanted; }

const char *gdu_cli_exit_name(int exit_code)
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
    json_t *error = json_pack("{s:s}", "code", code ? code : gdu_cli_exit_name(exit_code));
    if (error != NULL && gdu_json_set_text(error, "message", message) != 0)
        error = (json_decref(error), NULL);
    if (error != NULL && fix != NULL)
        json_object_set_new(error, "fix", gdu_json_text(fix));
    return gdu_cli_envelope(command, json_pack("{s:o*}", "error", error), GDU_CLI_ERROR_SCHEMA,
                            exit_code);
}

void gdu_cli_error_doc(const char *command, int exit_code, const char *code, const char *message,
                       const char *fix)
{
    if (json_wanted)
        gdu_cli_print(gdu_cli_error_json(command, exit_code, code, message, fix), 0);
}

/* "gdunlock COMMAND: " and message on stderr, escaped: it may hold outside
 * text (paths, CMD's name, a library's message). */
static void say(const char *command, const char *message)
{
    fprintf(stderr, "gdunlock %s: ", command);
    gdu_text_put(stderr, message);
    fputc('\n', stderr);
}

void gdu_cli_note(const char *command, const char *fmt, ...)
{
    char message[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    say(command, message);
}

int gdu_cli_fail(const char *command, int exit_code, const char *code, const char *fix,
                 const char *fmt, ...)
{
    char message[1024], see[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    say(command, message);
    if (fix != NULL) {
        fputs("  fix: ", stderr);
        gdu_text_put(stderr, fix);
        fputc('\n', stderr);
    } else if (exit_code == GDU_EXIT_USAGE) {
        /* A bad argument: one line, and where the usage is. */
        snprintf(see, sizeof see, "see 'gdunlock %s --help'", command);
        fprintf(stderr, "%s\n", see);
        fix = see;
    }
    gdu_cli_error_doc(command, exit_code, code, message, fix);
    return exit_code;
}

/* A report that could not be built (no memory): failed as any command fails. */
static int report_not_built(const char *command)
{
    return gdu_cli_fail(command, GDU_EXIT_SOFTWARE, NULL, NULL,
                        "the JSON document could not be built (out of memory)");
}

int gdu_cli_print_report(const char *command, json_t *doc, const char *schema, int exit_code,
                         size_t flags)
{
    json_t *env = gdu_cli_envelope(command, doc, schema, exit_code);
    if (env == NULL)
        return report_not_built(command);
    gdu_cli_print(env, flags);
    return exit_code;
}

int gdu_cli_print_report_streamed(const char *command, json_t *doc, const char *schema,
                                  int exit_code, size_t flags, const gdu_cli_stream *tail)
{
    json_t *env = gdu_cli_envelope(command, doc, schema, exit_code);
    switch (gdu_cli_print_streamed(command, env, flags, tail)) {
    case GDU_CLI_PRINTED:
        return exit_code;
    case GDU_CLI_NOT_BUILT:
        return report_not_built(command);
    default: /* half a document on stdout: no error document after it */
        return GDU_EXIT_SOFTWARE;
    }
}
