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

/* Set once: by gdu_cli_parse from the command's options, or by main() when
 * no command reads them (no command, an unknown one). */
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

/* Reports a failure: "gdunlock COMMAND: MESSAGE" and "  fix: FIX" on stderr
 * and, with --json, the error document on stdout. Returns exit_code. A bad
 * argument (GDU_EXIT_USAGE) without a fix says where the usage is instead:
 * "see 'gdunlock COMMAND --help'". */
__attribute__((format(printf, 5, 6))) int gdu_cli_fail(const char *command, int exit_code,
                                                       const char *code, const char *fix,
                                                       const char *fmt, ...);

#endif
