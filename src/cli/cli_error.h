/* How a command ends: its report, or a failure before (or instead of) it:
 * the message on stderr, as without --json, and with --json the error
 * document on stdout, both in cli_json.h's envelope (docs/cli-json.md). */
#ifndef GDUNLOCK_CLI_CLI_ERROR_H
#define GDUNLOCK_CLI_CLI_ERROR_H

#include "cli/cli_json.h"

#include <stdbool.h>

/* Set once: by gdu_cli_parse from the command's options, or by main() when
 * no command reads them (no command, an unknown one). */
void gdu_cli_set_json(bool on);
bool gdu_cli_json(void);

/* The stable name of an exit status: usage, no_input, unavailable,
 * internal, io_error, failed. */
const char *gdu_cli_exit_name(int exit_code);

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

/* gdu_cli_print_report with the array of tail as doc's last member, the
 * same bytes as if it had been built in doc. Returns as
 * gdu_cli_print_report; an item that cannot be made ends the document
 * early and gives GDU_EXIT_SOFTWARE, reported on stderr. */
int gdu_cli_print_report_streamed(const char *command, json_t *doc, const char *schema,
                                  int exit_code, size_t flags, const gdu_cli_stream *tail);

/* With --json, prints the error document on stdout; nothing otherwise. */
void gdu_cli_error_doc(const char *command, int exit_code, const char *code, const char *message,
                       const char *fix);

/* A line on stderr that is not a failure: "gdunlock COMMAND: MESSAGE", the
 * message escaped (util/text.h), as every message is: it may hold outside
 * text that would otherwise drive the terminal. */
__attribute__((format(printf, 2, 3))) void gdu_cli_note(const char *command, const char *fmt, ...);

/* Reports a failure: "gdunlock COMMAND: MESSAGE" and "  fix: FIX" on stderr
 * and, with --json, the error document on stdout. Returns exit_code. A bad
 * argument (GDU_EXIT_USAGE) without a fix says where the usage is instead:
 * "see 'gdunlock COMMAND --help'". */
__attribute__((format(printf, 5, 6))) int gdu_cli_fail(const char *command, int exit_code,
                                                       const char *code, const char *fix,
                                                       const char *fmt, ...);

#endif
