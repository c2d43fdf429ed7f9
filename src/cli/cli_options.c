#include "cli/cli_options.h"
#include "cli/cli_error.h"
#include "util/exit_codes.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* getopt's letters for cmd: '+' to stop at the first operand, ':' so that
 * a missing value is told apart from an unknown option, and 'h'. */
static void shortopts(const gdu_cli_command *cmd, char *out, size_t len)
{
    snprintf(out, len, "%s:h%s", cmd->stop_at_operand ? "+" : "", cmd->shortopts);
}

/* The option getopt just refused, as the user wrote it. */
static void refused(char **argv, char *out, size_t len)
{
    const char *word = argv[optind - 1];
    if (optopt != 0 && strncmp(word, "--", 2) != 0)
        snprintf(out, len, "-%c", optopt);
    else
        snprintf(out, len, "%.*s", (int)strcspn(word, "="), word);
}

/* A first pass that only looks: --help wins over anything else on the line,
 * and --json is known before any error is reported. */
static bool first_pass(const gdu_cli_command *cmd, int argc, char **argv, const char *opts)
{
    bool help = false, json = false;
    optind = 0;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, opts, cmd->longs, NULL)) != -1) {
        help |= c == 'h';
        json |= c == GDU_CLI_OPT_JSON;
    }
    gdu_cli_set_json(json);
    return help;
}

int gdu_cli_parse(const gdu_cli_command *cmd, int argc, char **argv,
                  int (*on_option)(void *ctx, int option, const char *arg), void *ctx,
                  int *operands)
{
    char opts[64];
    shortopts(cmd, opts, sizeof opts);
    if (first_pass(cmd, argc, argv, opts)) {
        cmd->usage(stdout);
        return GDU_EXIT_OK;
    }
    optind = 0;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, opts, cmd->longs, NULL)) != -1) {
        char word[64];
        if (c == '?' || c == ':') {
            refused(argv, word, sizeof word);
            return gdu_cli_fail(cmd->name, GDU_EXIT_USAGE, NULL, NULL,
                                c == ':' ? "option '%s' needs a value" : "unknown option '%s'",
                                word);
        }
        if (c == GDU_CLI_OPT_JSON)
            continue;
        int rc = on_option(ctx, c, optarg);
        if (rc != GDU_CLI_CONTINUE)
            return rc;
    }
    int n = argc - optind;
    if (n > 0 && cmd->max_operands == 0)
        return gdu_cli_fail(cmd->name, GDU_EXIT_USAGE, NULL, NULL, "unexpected argument '%s'",
                            argv[optind]);
    if (n < cmd->min_operands || (cmd->max_operands >= 0 && n > cmd->max_operands))
        return gdu_cli_fail(cmd->name, GDU_EXIT_USAGE, NULL, NULL, "%s", cmd->operands_wanted);
    *operands = optind;
    return GDU_CLI_CONTINUE;
}
