/* One JSON document on stdout with --json, errors included: a command that
 * fails before (or instead of) its report prints
 *   {"command": "p2p", "exit_code": 69,
 *    "error": {"code": "unavailable", "message": "...", "fix": "..."}}
 * (docs/cli-json.md). The message also goes to stderr, as without --json. */
#ifndef GDUNLOCK_CLI_CLI_ERROR_H
#define GDUNLOCK_CLI_CLI_ERROR_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

/* main() sets it once from the command's arguments: "--json" (or a prefix
 * getopt takes for it) before any "--". */
void gdu_cli_set_json(bool on);
bool gdu_cli_json(void);

/* The error document. code: a stable name for the error; NULL names it after
 * the exit status (usage, no_input, unavailable, internal, io_error, failed).
 * fix may be NULL. Text that is not UTF-8 is made so. NULL without memory. */
json_t *gdu_cli_error_json(const char *command, int exit_code, const char *code,
                           const char *message, const char *fix);

/* With --json, prints the error document on stdout; nothing otherwise. */
void gdu_cli_error_doc(const char *command, int exit_code, const char *code, const char *message,
                       const char *fix);

/* An option getopt refused (it has printed why): the command's usage on
 * stderr and, with --json, the error document. Returns GDU_EXIT_USAGE. */
int gdu_cli_bad_option(const char *command, void (*usage)(FILE *));

/* Reports a failure: "gdunlock COMMAND: MESSAGE" and "  fix: FIX" on stderr
 * and, with --json, the error document on stdout. Returns exit_code. */
__attribute__((format(printf, 5, 6))) int gdu_cli_fail(const char *command, int exit_code,
                                                       const char *code, const char *fix,
                                                       const char *fmt, ...);

#endif
