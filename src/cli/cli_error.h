/* A command that fails before (or instead of) its report: the message on
 * stderr, as without --json, and with --json the error document of
 * cli_json.h on stdout (docs/cli-json.md). */
#ifndef GDUNLOCK_CLI_CLI_ERROR_H
#define GDUNLOCK_CLI_CLI_ERROR_H

#include <stdbool.h>

/* Set once: by gdu_cli_parse from the command's options, or by main() when
 * no command reads them (no command, an unknown one). */
void gdu_cli_set_json(bool on);
bool gdu_cli_json(void);

/* The stable name of an exit status: usage, no_input, unavailable,
 * internal, io_error, failed. */
const char *gdu_cli_exit_name(int exit_code);

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
