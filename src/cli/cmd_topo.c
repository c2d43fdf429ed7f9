/* gdunlock topo [--sysroot DIR] [--json]: GPUs against GPUs, NVMe drives and
 * network cards, labelled like nvidia-smi topo -m, and the mounts per NVMe. */
#include "cli/cli_error.h"
#include "cli/cli_json.h"
#include "cli/cli_options.h"
#include "cli/commands.h"
#include "util/exit_codes.h"
#include "doctor/topo_matrix.h"

#include <stdio.h>
#include <stdlib.h>

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: gdunlock topo [--sysroot DIR] [--json]\n"
            "\n"
            "Shows how each GPU reaches every GPU, NVMe drive and network card:\n"
            "  X     itself               NV    NVLink\n"
            "  PIX   one PCIe switch      PXB   several PCIe switches\n"
            "  PHB   a PCIe host bridge   NODE  host bridges of one NUMA node\n"
            "  SYS   across CPU sockets\n"
            "and which mount points live on each NVMe drive.\n"
            "\n"
            "  --sysroot DIR   examine a machine captured with 'gdunlock doctor --capture DIR'\n"
            "  --json          machine-readable output\n"
            "  -h, --help      this text\n");
}

static int option(void *ctx, int opt, const char *arg)
{
    if (opt == 's')
        *(const char **)ctx = arg;
    return GDU_CLI_CONTINUE;
}

int gdu_cmd_topo(int argc, char **argv)
{
    static const struct option longs[] = {
        {"sysroot", required_argument, NULL, 's'},
        GDU_CLI_JSON_OPTION,
        GDU_CLI_HELP_OPTION,
        {NULL, 0, NULL, 0},
    };
    static const gdu_cli_command cmd = {
        .name = "topo", .usage = usage, .shortopts = "", .longs = longs};
    const char *sysroot = NULL;
    int first;
    int parsed = gdu_cli_parse(&cmd, argc, argv, option, &sysroot, &first);
    if (parsed != GDU_CLI_CONTINUE)
        return parsed;
    bool json = gdu_cli_json();
    gdu_snapshot *sys;
    char why[512];
    int opened = gdu_snapshot_of(sysroot, &sys, why, sizeof why);
    if (opened == GDU_SNAPSHOT_BAD_ROOT)
        return gdu_cli_fail("topo", GDU_EXIT_NOINPUT, NULL, NULL, "--sysroot %s", why);
    gdu_topo *t = opened == 0 ? malloc(sizeof *t) : NULL;
    if (t == NULL) {
        gdu_snapshot_release(sys);
        return gdu_cli_fail("topo", GDU_EXIT_SOFTWARE, NULL, NULL, "out of memory");
    }
    gdu_topo_build(sys, t);
    int rc = GDU_EXIT_OK;
    if (t->n_gpus == 0) {
        /* No matrix without a GPU: the error document, not an empty report. */
        const char *pci = sys->pci_error;
        rc = gdu_cli_fail(
            "topo", GDU_EXIT_UNAVAILABLE, NULL, "run 'gdunlock doctor' to see what is missing",
            "no NVIDIA GPU found%s%s%s", sys->driver.loaded ? "" : " (no NVIDIA driver loaded)",
            pci[0] ? ": " : "", pci);
    } else if (json) {
        rc = gdu_cli_print_report("topo", gdu_topo_to_json(t), NULL, rc, 0);
    } else {
        gdu_topo_print(stdout, t);
    }
    gdu_snapshot_release(sys);
    free(t);
    return rc;
}
