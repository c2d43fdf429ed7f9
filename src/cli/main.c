/* gdunlock: command-line entry point; dispatches to the subcommands. */
#include "cli/cli_error.h"
#include "cli/cli_json.h"
#include "cli/commands.h"
#include "util/exit_codes.h"
#include "util/text.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

struct command {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
};

static const struct command commands[] = {
    {"doctor", gdu_cmd_doctor, "can GPUDirect Storage / P2P work here? verdicts, reasons, fixes"},
    {"topo", gdu_cmd_topo, "PCIe/NVLink topology matrix of GPUs, NVMe drives and NICs"},
    {"verify", gdu_cmd_verify, "end-to-end proof that file<->GPU data moved directly"},
    {"bench", gdu_cmd_bench, "storage-to-GPU throughput of every path, side by side"},
    {"p2p", gdu_cmd_p2p, "GPU-to-GPU capability, bandwidth and latency matrices"},
    {"load", gdu_cmd_load, "load a safetensors checkpoint into GPU (or host) memory"},
    {"run", gdu_cmd_run, "run a command with the gdunlock shim preloaded"},
    {"report", gdu_cmd_report,
     "this machine's evidence in one scrubbed file to attach to an issue"},
};

static void usage(FILE *out)
{
    fprintf(out, "Usage: gdunlock COMMAND [OPTIONS]\n  or:  gdunlock help COMMAND\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n'gdunlock COMMAND --help' (or 'gdunlock help COMMAND') describes a command's\n"
                 "options; 'gdunlock --version' (-V) says which version this is.\n");
}

static const struct command *find(const char *name)
{
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(name, commands[i].name) == 0)
            return &commands[i];
    return NULL;
}

/* --json among the words before any "--": for the errors no command reads
 * its own options for (no command, an unknown one). */
static bool json_asked(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strlen(argv[i]) >= 3 && strncmp("--json", argv[i], strlen(argv[i])) == 0)
            return true;
    return false;
}

static bool is_help(const char *word)
{
    return strcmp(word, "--help") == 0 || strcmp(word, "-h") == 0 || strcmp(word, "help") == 0;
}

/* A bad command line before any command: one line, where the list is, and
 * with --json the error document (its "command": the word as typed, null
 * when there was none). */
static int top_level_error(const char *word, const char *what)
{
    char message[256];
    snprintf(message, sizeof message, "%s%s%.200s%s", what, word ? " '" : "", word ? word : "",
             word ? "'" : "");
    fputs("gdunlock: ", stderr);
    gdu_text_put(stderr, message); /* the word as typed: escaped */
    fputs("\nsee 'gdunlock --help'\n", stderr);
    gdu_cli_error_doc(word, GDU_EXIT_USAGE, NULL, message, "see 'gdunlock --help'");
    return GDU_EXIT_USAGE;
}

static int dispatch(int argc, char **argv)
{
    gdu_cli_set_json(json_asked(argc, argv));
    if (argc < 2 || (argv[1][0] != '\0' && strncmp(argv[1], "--json", strlen(argv[1])) == 0)) {
        usage(stderr);
        return top_level_error(NULL, "no command given");
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
        printf("gdunlock %s\n", GDUNLOCK_VERSION);
        return GDU_EXIT_OK;
    }
    /* "help CMD", "--help CMD": the command's own --help. */
    const char *name = argv[1];
    bool help = is_help(name);
    if (help && argc < 3) {
        usage(stdout);
        return GDU_EXIT_OK;
    }
    if (help)
        name = argv[2];
    const struct command *cmd = find(name);
    if (cmd == NULL)
        return top_level_error(name, "unknown command");
    if (help) {
        char *args[] = {argv[2], "--help", NULL};
        return cmd->fn(2, args);
    }
    return cmd->fn(argc - 1, argv + 1);
}

int main(int argc, char **argv)
{
    gdu_cli_set_args(argc, argv);
    int rc = dispatch(argc, argv);
    /* Every command's report goes to stdout; when it cannot be written (a
     * full disk, /dev/full, a closed pipe with SIGPIPE ignored) the report is
     * lost, and that is what the exit status says, whatever the command found. */
    int err = fflush(stdout) != 0 ? errno : 0;
    if (ferror(stdout) && err == 0)
        err = EIO;
    if (fclose(stdout) != 0 && err == 0)
        err = errno;
    if (err != 0) {
        fprintf(stderr, "gdunlock: writing the output failed: %s\n", strerror(err));
        return GDU_EXIT_IOERR;
    }
    return rc;
}
