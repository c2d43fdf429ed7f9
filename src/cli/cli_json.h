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

#endif
