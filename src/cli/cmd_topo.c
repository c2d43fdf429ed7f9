/* gdunlock topo [--sysroot DIR] [--json]: GPUs against GPUs, NVMe drives and
 * network cards, labelled like nvidia-smi topo -m, and the mounts per NVMe. */
#include "cli/cli_error.h"
#include "cli/cli_json.h"
#include "cli/cli_options.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "doctor/topo_matrix.h"
#include "util/text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* A cell of width columns, escaped: names, models and mount points come
 * from the (possibly captured) machine's files. */
static void cell(const char *s, size_t width) { gdu_text_pad(stdout, s, strlen(s), width); }

static void print_table(const gdu_topo *t)
{
    printf("%-8s", "");
    for (size_t c = 0; c < t->n_cols; c++) {
        putchar(' ');
        cell(t->cols[c].name, 6);
    }
    printf(" %-5s\n", "NUMA");
    for (size_t r = 0; r < t->n_gpus; r++) {
        cell(t->cols[r].name, 8);
        for (size_t c = 0; c < t->n_cols; c++)
            printf(" %-6s", t->cell[r][c]);
        if (t->cols[r].numa_node >= 0)
            printf(" %d\n", t->cols[r].numa_node);
        else
            printf(" N/A\n");
    }
    printf("\n");
    for (size_t c = 0; c < t->n_cols; c++) {
        const gdu_topo_col *col = &t->cols[c];
        cell(col->name, 8);
        putchar(' ');
        cell(col->bdf[0] ? col->bdf : "(no PCI address)", 0);
        fputs("  ", stdout);
        gdu_text_put(stdout, col->detail);
        putchar('\n');
        for (size_t m = 0; m < col->n_mounts; m++) {
            printf("%-8s   mounted: ", "");
            gdu_text_put(stdout, col->mounts[m]);
            putchar('\n');
        }
        if (col->kind == GDU_TOPO_NVME && col->n_mounts == 0)
            printf("%-8s   mounted: nothing\n", "");
    }
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
    gdu_sysroot sr;
    char why[512] = "path too long";
    if (gdu_sysroot_init(&sr, sysroot) != 0 || gdu_sysroot_check(&sr, why, sizeof why) != 0)
        return gdu_cli_fail("topo", GDU_EXIT_NOINPUT, NULL, NULL, "--sysroot %s", why);
    gdu_snapshot *sys = malloc(sizeof *sys);
    gdu_topo *t = malloc(sizeof *t);
    if (sys == NULL || t == NULL) {
        free(sys);
        free(t);
        return gdu_cli_fail("topo", GDU_EXIT_SOFTWARE, NULL, NULL, "out of memory");
    }
    gdu_snapshot_take(&sr, NULL, 0, sys);
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
        print_table(t);
    }
    gdu_snapshot_free(sys);
    free(sys);
    free(t);
    gdu_sysroot_free(&sr);
    return rc;
}
