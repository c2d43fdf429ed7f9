/* The one envelope of every --json document (docs/cli-json.md): a report or
 * the error document (cli_error.h), each beginning with
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

/* One array member, made and printed one item at a time, so that a document
 * of a million items never holds them all (a checkpoint's tensor table). */
typedef struct gdu_cli_stream {
    const char *key; /* the member, printed last */
    size_t n;
    json_t *(*item)(const void *ctx, size_t i); /* a new reference; NULL: out of memory */
    const void *ctx;
} gdu_cli_stream;

/* How gdu_cli_print_streamed went: the whole document on stdout; nothing
 * (it could not be built: no memory, env NULL included); or cut short
 * after an item could not be made, said on stderr for command. */
typedef enum { GDU_CLI_PRINTED, GDU_CLI_NOT_BUILT, GDU_CLI_CUT_SHORT } gdu_cli_printed;

/* Prints env (an envelope, taken over) with the array of tail as its last
 * member, the same bytes as gdu_cli_print of it built whole. */
gdu_cli_printed gdu_cli_print_streamed(const char *command, json_t *env, size_t flags,
                                       const gdu_cli_stream *tail);

#endif
