/* Every command reads its arguments the same way: getopt_long under one
 * helper with one result convention, so that --help, --json, a bad option
 * and the count of operands behave alike in all of them. */
#ifndef GDUNLOCK_CLI_CLI_OPTIONS_H
#define GDUNLOCK_CLI_CLI_OPTIONS_H

#include <getopt.h>
#include <stdio.h>

/* The one result convention: a command's parse step (and each option's
 * handler) returns GDU_CLI_CONTINUE to go on, or the exit status to end the
 * command with now (0 after --help, GDU_EXIT_USAGE after a bad argument). */
enum { GDU_CLI_CONTINUE = -1 };

/* Long options every command lists, handled by gdu_cli_parse itself:
 * -h/--help prints the usage on stdout and ends with 0 (whatever else the
 * line holds); --json sets gdu_cli_json(). */
enum { GDU_CLI_OPT_JSON = 0x100 };
#define GDU_CLI_HELP_OPTION                                                                        \
    {                                                                                              \
        "help", no_argument, NULL, 'h'                                                             \
    }
#define GDU_CLI_JSON_OPTION                                                                        \
    {                                                                                              \
        "json", no_argument, NULL, GDU_CLI_OPT_JSON                                                \
    }

typedef struct {
    const char *name;           /* the command: "bench" */
    void (*usage)(FILE *out);   /* its --help text */
    const char *shortopts;      /* getopt's letters ("f:s:"), 'h' added here */
    const struct option *longs; /* ends with {0}; lists the two options above */
    /* The operands after the options: at least min_operands, at most
     * max_operands (-1: any). operands_wanted says what they are when the
     * count is wrong ("name exactly one checkpoint ..."). */
    int min_operands, max_operands;
    const char *operands_wanted;
    /* The options end at the first operand (run: CMD and its own options). */
    int stop_at_operand;
} gdu_cli_command;

/* Reads argv (argv[0] is the command's name) by cmd: each option other than
 * --help and --json goes to on_option(ctx, option, its argument or NULL),
 * which returns GDU_CLI_CONTINUE or an exit status. An unknown option, a
 * missing value or a wrong count of operands is reported here (one line,
 * and where to read the usage: gdu_cli_fail with GDU_EXIT_USAGE). Returns GDU_CLI_CONTINUE with *operands set to the
 * index of the first operand in argv, or the exit status. */
int gdu_cli_parse(const gdu_cli_command *cmd, int argc, char **argv,
                  int (*on_option)(void *ctx, int option, const char *arg), void *ctx,
                  int *operands);

#endif
