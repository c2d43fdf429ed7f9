/* gdunlock: command-line entry point; dispatches to the subcommands. */
#include "cli/cli_error.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"

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
};

static void usage(FILE *out)
{
    fprintf(out, "Usage: gdunlock <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n'gdunlock <command> --help' describes a command's options.\n");
}

/* --json among a command's options (before "--", where run's CMD begins), as
 * getopt_long takes it: the whole word or a prefix of it ("--js"). */
static bool json_asked(int argc, char **argv)
{
    for (int i = 2; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strlen(argv[i]) >= 3 && strncmp("--json", argv[i], strlen(argv[i])) == 0)
            return true;
    return false;
}

static int dispatch(int argc, char **argv)
{
    gdu_cli_set_json(json_asked(argc, argv));
    if (argc < 2) {
        usage(stderr);
        return GDU_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return GDU_EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("gdunlock %s\n", GDUNLOCK_VERSION);
        return GDU_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "gdunlock: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    gdu_cli_error_doc(argv[1], GDU_EXIT_USAGE, NULL, "unknown command",
                      "gdunlock --help lists them");
    return GDU_EXIT_USAGE;
}

int main(int argc, char **argv)
{
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
