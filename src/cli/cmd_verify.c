/* gdunlock verify PATH: end-to-end proof that file<->GPU data moved directly
 * (DIRECT, exit 0), correctly through the CPU (COMPAT, exit 2), or not
 * correctly (FAILED, exit 1). Arguments and output; the run itself, and the
 * re-run as a child with libgdunlock.so preloaded, are in src/verify/. */
#include "cli/cli_error.h"
#include "cli/cli_json.h"
#include "cli/cli_options.h"
#include "cli/commands.h"
#include "util/exit_codes.h"
#include "util/json_text.h"
#include "util/units.h"
#include "verify/verify.h"
#include "verify/verify_rdma.h"
#include "verify/verify_text.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct cli {
    gdu_verify_options opts;
    bool rdma;
    bool no_shim;
    bool progress;
    gdu_verify_rdma_route route; /* --route (with --rdma) */
    bool route_given;
};

static void usage(FILE *out)
{
    fprintf(
        out,
        "Usage: gdunlock verify PATH [--size N] [--gpu I] [--force] [--keep] [--no-shim] [--json]\n"
        "                       [--progress]\n"
        "       gdunlock verify --rdma [--route R] [--size N] [--gpu I] [--json]\n"
        "\n"
        "Writes a known pattern from GPU memory to PATH with cuFileWrite and reads it back\n"
        "with cuFileRead, for cuMemAlloc and VMM (cuMemCreate) buffers, with the gdunlock\n"
        "shim active; compares the bytes and reads nvidia-fs's counters before and after.\n"
        "\n"
        "  DIRECT  exit 0  Bar1-map ok grew, Bar1-map err did not, data identical, no compat "
        "fallback\n"
        "  COMPAT  exit 2  data identical but moved through the CPU (reasons say why); when "
        "cuFile\n"
        "                  cannot be used at all, integrity is checked through the I/O engine\n"
        "  FAILED  exit 1  wrong data or a failed transfer (status names say what failed)\n"
        "\n"
        "  PATH        a file to create (on the file system under test); removed afterwards\n"
        "  --size N    bytes per transfer (default 16MiB; rounded up to 64 KiB)\n"
        "  --gpu I     CUDA device ordinal (default 0)\n"
        "  --force     overwrite PATH even if it exists and is not empty\n"
        "  --keep      leave PATH in place afterwards\n"
        "  --no-shim   run without libgdunlock.so (to compare with the stock driver path)\n"
        "  --json      machine-readable output\n"
        "  --progress  stages on stderr even when it is not a terminal\n"
        "  --rdma      GPUDirect RDMA on this machine's RDMA adapter instead (libibverbs, loaded\n"
        "              at run time; GDUNLOCK_IBVERBS names another): on the first active port,\n"
        "              RDMA-writes a pattern into a registered GPU buffer and reads it back;\n"
        "              PASS exit 0, FAIL (wrong bytes) exit 1; refuses with the cause and the\n"
        "              fix where there is no verbs library, adapter, active port or GPU, or a\n"
        "              step fails (exit 69)\n"
        "  --route R   with --rdma, how the adapter gets the GPU buffer: auto (NCCL's choice,\n"
        "              the default), peer-memory (ibv_reg_mr, nvidia-peermem) or dma-buf\n"
        "              (ibv_reg_dmabuf_mr on a dma-buf of the buffer)\n"
        "\n"
        "Other exit codes: 64 bad arguments or PATH would be clobbered, 66 PATH cannot be\n"
        "created, 69 no libcuda or GPU, 70 internal error.\n");
}

static void print_stage(void *user, const char *stage)
{
    fprintf(stderr, "verify: %s...\n", stage);
}

static int option(void *ctx, int opt, const char *arg)
{
    struct cli *c = ctx;
    uint64_t v;
    switch (opt) {
    case 's':
        if (gdu_parse_size(arg, &v) != 0 || v == 0)
            return gdu_cli_fail("verify", GDU_EXIT_USAGE, NULL, NULL,
                                "bad --size '%s': give a size such as 16MiB", arg);
        c->opts.size = v;
        break;
    case 'g':
        if (gdu_parse_uint(arg, 0, 1023, &v) != 0)
            return gdu_cli_fail("verify", GDU_EXIT_USAGE, NULL, NULL,
                                "bad --gpu '%s': give a device ordinal such as 0", arg);
        c->opts.gpu = (int)v;
        break;
    case 'f':
        c->opts.force = true;
        break;
    case 'k':
        c->opts.keep = true;
        break;
    case 'n':
        c->no_shim = true;
        break;
    case 'p':
        c->progress = true;
        break;
    case 'R':
        c->rdma = true;
        break;
    case 'r': {
        int route = gdu_verify_rdma_route_parse(arg);
        if (route < 0)
            return gdu_cli_fail("verify", GDU_EXIT_USAGE, NULL, NULL,
                                "bad --route '%s': give auto, peer-memory or dma-buf", arg);
        c->route = (gdu_verify_rdma_route)route;
        c->route_given = true;
        break;
    }
    }
    return GDU_CLI_CONTINUE;
}

static int parse_args(int argc, char **argv, struct cli *c)
{
    static const struct option longs[] = {
        {"size", required_argument, NULL, 's'},
        {"gpu", required_argument, NULL, 'g'},
        {"force", no_argument, NULL, 'f'},
        {"keep", no_argument, NULL, 'k'},
        {"no-shim", no_argument, NULL, 'n'},
        {"progress", no_argument, NULL, 'p'},
        {"rdma", no_argument, NULL, 'R'},
        {"route", required_argument, NULL, 'r'},
        GDU_CLI_JSON_OPTION,
        GDU_CLI_HELP_OPTION,
        {NULL, 0, NULL, 0},
    };
    static const gdu_cli_command cmd = {.name = "verify",
                                        .usage = usage,
                                        .shortopts = "s:g:fk",
                                        .longs = longs,
                                        .min_operands = 0,
                                        .max_operands = 1,
                                        .operands_wanted = "name exactly one file to write (PATH)"};
    memset(c, 0, sizeof *c);
    c->opts.size = GDU_VERIFY_DEFAULT_SIZE;
    /* Another stats file (a copy, or a test's): GDUNLOCK_NVFS_STATS. */
    c->opts.nvfs_stats_path = getenv("GDUNLOCK_NVFS_STATS");
    int first;
    int rc = gdu_cli_parse(&cmd, argc, argv, option, c, &first);
    if (rc != GDU_CLI_CONTINUE)
        return rc;
    if (c->rdma != (first == argc))
        return gdu_cli_fail("verify", GDU_EXIT_USAGE, NULL, NULL, "%s",
                            c->rdma ? "--rdma takes no PATH"
                                    : "name exactly one file to write (PATH)");
    if (c->route_given && !c->rdma)
        return gdu_cli_fail("verify", GDU_EXIT_USAGE, NULL, NULL, "--route goes with --rdma");
    c->opts.path = argv[first];
    if (c->progress || isatty(STDERR_FILENO))
        c->opts.progress = print_stage;
    return GDU_CLI_CONTINUE;
}

static int finish(const struct cli *c, json_t *doc)
{
    if (!doc)
        return gdu_cli_fail("verify", GDU_EXIT_SOFTWARE, NULL, NULL,
                            "out of memory building the result");
    if (!json_object_get(doc, "error")) {
        const char *verdict = json_string_value(json_object_get(doc, "verdict"));
        if (c->opts.progress && verdict && strcmp(verdict, "DIRECT") != 0)
            print_stage(NULL, "asking doctor why the path is not direct");
        gdu_verify_add_doctor(doc, c->opts.path);
    }
    int code = gdu_verify_document_exit_code(doc);
    const json_t *err = json_object_get(doc, "error");
    if (err) { /* no verdict: the error document of every command */
        gdu_cli_fail("verify", code, NULL, NULL, "%s", json_string_value(err));
    } else {
        if (gdu_cli_json()) {
            code = gdu_cli_print_report("verify", json_incref(doc), "gdunlock-verify/1", code, 0);
        } else {
            json_t *shown = gdu_json_escaped_copy(doc); /* paths, library messages: escaped */
            if (shown != NULL)
                gdu_verify_print(stdout, shown, gdu_verify_want_color(stdout));
            else
                code = gdu_cli_fail("verify", GDU_EXIT_SOFTWARE, NULL, NULL, "out of memory");
            json_decref(shown);
        }
    }
    json_decref(doc);
    return code;
}

/* A refusal (no library, device, port or GPU; a step that failed) is the
 * error document with the cause and the fix; a transfer is a verdict:
 * PASS (0) or FAIL (1). */
static int verify_rdma(const struct cli *c)
{
    gdu_verify_rdma_options opts = {.gpu = c->opts.gpu, .size = c->opts.size, .route = c->route};
    gdu_verify_rdma_result r;
    gdu_verify_rdma(&opts, &r);
    if (r.outcome != GDU_VERIFY_RDMA_PASS && r.outcome != GDU_VERIFY_RDMA_MISMATCH)
        return gdu_cli_fail("verify", GDU_EXIT_UNAVAILABLE, gdu_verify_rdma_code(r.outcome), r.fix,
                            "%s", r.cause);
    int code = r.outcome == GDU_VERIFY_RDMA_PASS ? GDU_EXIT_OK : GDU_EXIT_FAILED;
    if (gdu_cli_json())
        return gdu_cli_print_report("verify", gdu_verify_rdma_json(&r, c->opts.gpu),
                                    "gdunlock-verify-rdma/1", code, 0);
    gdu_verify_rdma_print(stdout, &r, c->opts.gpu);
    return code;
}

int gdu_cmd_verify(int argc, char **argv)
{
    struct cli c;
    int rc = parse_args(argc, argv, &c);
    if (rc != GDU_CLI_CONTINUE)
        return rc;
    if (c.rdma)
        return verify_rdma(&c);

    bool written;
    if (gdu_verify_as_child(&c.opts, &written)) /* the parent adds the shim's report */
        return written ? GDU_EXIT_OK : GDU_EXIT_SOFTWARE;
    return finish(&c, gdu_verify_with_shim(argc, argv, &c.opts, c.no_shim));
}
