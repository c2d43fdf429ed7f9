/* The one envelope of every --json document (docs/cli-json.md): a report or
 * the error document, each beginning with
 *   "schema": "gdunlock-<name>/<version>", "command": "bench",
 *   "command_line": "gdunlock bench -f /data/x", "exit_code": 0
 * and printed as one document on stdout. */
#ifndef GDUNLOCK_CLI_CLI_JSON_H
#define GDUNLOCK_CLI_CLI_JSON_H

#include <jansson.h>
#include <stddef.h>

/* main() keeps its argv for the "command_line" of every document. */
void gdu_cli_set_args(int argc, char **argv);

/* The command line as a POSIX shell reads it back ("gdunlock" and each
 * argument, quoted where needed), as a new string (caller frees); NULL
 * without memory. Its bytes are the user's: not necessarily UTF-8. */
char *gdu_cli_command_line(void);

/* doc (taken over) inside the envelope: schema (NULL keeps the one doc
 * names), command, command_line (with command_line_escaped where it is not
 * UTF-8) and exit_code, then doc's other members. NULL without memory (doc
 * NULL included). */
json_t *gdu_cli_envelope(const char *command, json_t *doc, const char *schema, int exit_code);

/* Prints doc (taken over) on stdout, indented, members in their order;
 * flags adds jansson's (JSON_REAL_PRECISION). A write error is main's to
 * report (74). */
void gdu_cli_print(json_t *doc, size_t flags);

/* The error document: the envelope and
 *   "error": {"code", "message" (+ "message_escaped"), "fix"}
 * code: a stable name; NULL names it after the exit status
 * (gdu_cli_exit_name). fix may be NULL. NULL without memory. */
#define GDU_CLI_ERROR_SCHEMA "gdunlock-error/1"
json_t *gdu_cli_error_json(const char *command, int exit_code, const char *code,
                           const char *message, const char *fix);

/* gdu_cli_print(gdu_cli_envelope(...)): a command's report. Returns
 * exit_code, or when the document cannot be built (no memory: doc NULL)
 * GDU_EXIT_SOFTWARE, reported as gdu_cli_fail does. */
int gdu_cli_print_report(const char *command, json_t *doc, const char *schema, int exit_code,
                         size_t flags);

/* One array member, made and printed one item at a time, so that a document
 * of a million items never holds them all (a checkpoint's tensor table). */
typedef struct gdu_cli_stream {
    const char *key; /* the member, printed last */
    size_t n;
    json_t *(*item)(const void *ctx, size_t i); /* a new reference; NULL: out of memory */
    const void *ctx;
} gdu_cli_stream;

/* gdu_cli_print_report with the array of tail as doc's last member, the
 * same bytes as if it had been built in doc. Returns as
 * gdu_cli_print_report; an item that cannot be made ends the document
 * early and gives GDU_EXIT_SOFTWARE, reported on stderr. */
int gdu_cli_print_report_streamed(const char *command, json_t *doc, const char *schema,
                                  int exit_code, size_t flags, const gdu_cli_stream *tail);

#endif
