/* gdunlock load: loads a safetensors checkpoint (one file or a sharded
 * index) into GPU or host memory through the I/O engine, and reports what
 * moved, how fast and by which path. */
#include "cli/cli_error.h"
#include "cli/cli_json.h"
#include "cli/cli_options.h"
#include "util/progress.h"
#include "cli/commands.h"
#include "util/exit_codes.h"
#include "cli/load_report.h"
#include "gdunlock/safetensors.h"
#include "safetensors/st_stages.h"
#include "util/text.h"
#include "util/units.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_GPUS 64

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: gdunlock load FILE|INDEX|DIR [--gpu I | --gpu I,J,... | --to host] [--verify]\n"
            "                     [--lenient] [--list] [--json] [--progress]\n"
            "\n"
            "Loads a .safetensors file, a sharded checkpoint through its\n"
            "model.safetensors.index.json, or a model's folder (its index, else its\n"
            ".safetensors files) into GPU memory with the gdunlock I/O engine\n"
            "(tensors keep their file alignment; a file's memory is allocated in segments\n"
            "while the first are being read), after checking every\n"
            "header as the reference implementation does: length, JSON, dtypes, shapes\n"
            "against byte ranges, tensors covering the data section back to back (no\n"
            "holes, overlaps or trailing bytes), shards inside the index's folder.\n"
            "\n"
            "  --gpu LIST     GPU ordinal(s); several place the files round-robin (default 0)\n"
            "  --to host      load into pinned host memory instead (no GPU needed)\n"
            "  --verify       read everything back and compare it with the file\n"
            "  --lenient      also read damaged files the format forbids (holes, trailing\n"
            "                bytes, misplaced empty tensors); the report counts those bytes\n"
            "  --list         also print the tensor table (name, dtype, shape, device, address)\n"
            "  --json         machine-readable output on stdout\n"
            "  --progress     progress on stderr even when it is not a terminal\n"
            "\n"
            "The engine's GDUNLOCK_IO_* variables (backend, workers, chunk, direct) apply.\n"
            "Exit: 0 loaded (and verified), 1 GPU memory short or verify mismatch,\n"
            "64 bad arguments (a bad GDUNLOCK_IO_* value too), 66 missing or malformed\n"
            "checkpoint, 69 no CUDA/GPU, 74 I/O error.\n");
}

typedef struct {
    const char *path;
    int gpus[MAX_GPUS];
    size_t gpu_count;
    gdu_st_target target;
    int gpu_given, verify, list, progress, lenient;
} load_args;

enum {
    OPT_GPU = 'g',
    OPT_TO = 't',
    OPT_VERIFY = 'v',
    OPT_LIST = 'l',
    OPT_PROGRESS = 'p',
    OPT_LENIENT = 'L'
};

static int option(void *ctx, int opt, const char *arg)
{
    load_args *a = ctx;
    switch (opt) {
    case OPT_GPU:
        if (gdu_parse_index_list(arg, 1023, a->gpus, MAX_GPUS, &a->gpu_count) != 0 ||
            a->gpu_count == 0)
            return gdu_cli_fail("load", GDU_EXIT_USAGE, NULL, NULL,
                                "--gpu wants GPU ordinals like 0 or 0,1, not '%s'", arg);
        a->gpu_given = 1;
        break;
    case OPT_TO:
        if (strcmp(arg, "host") == 0)
            a->target = GDU_ST_TARGET_HOST;
        else if (strcmp(arg, "gpu") == 0)
            a->target = GDU_ST_TARGET_GPU;
        else
            return gdu_cli_fail("load", GDU_EXIT_USAGE, NULL, NULL,
                                "--to wants 'host' or 'gpu', not '%s'", arg);
        break;
    case OPT_VERIFY:
        a->verify = 1;
        break;
    case OPT_LIST:
        a->list = 1;
        break;
    case OPT_PROGRESS:
        a->progress = 1;
        break;
    case OPT_LENIENT:
        a->lenient = 1;
        break;
    }
    return GDU_CLI_CONTINUE;
}

static int parse_args(int argc, char **argv, load_args *a)
{
    static const struct option longs[] = {
        {"gpu", required_argument, NULL, OPT_GPU},
        {"to", required_argument, NULL, OPT_TO},
        {"verify", no_argument, NULL, OPT_VERIFY},
        {"list", no_argument, NULL, OPT_LIST},
        {"progress", no_argument, NULL, OPT_PROGRESS},
        {"lenient", no_argument, NULL, OPT_LENIENT},
        GDU_CLI_JSON_OPTION,
        GDU_CLI_HELP_OPTION,
        {NULL, 0, NULL, 0},
    };
    static const gdu_cli_command cmd = {
        .name = "load",
        .usage = usage,
        .shortopts = "",
        .longs = longs,
        .min_operands = 1,
        .max_operands = 1,
        .operands_wanted =
            "name exactly one checkpoint (a .safetensors file, an index .json or a folder)",
    };
    memset(a, 0, sizeof *a);
    a->gpu_count = 1;
    int first;
    int rc = gdu_cli_parse(&cmd, argc, argv, option, a, &first);
    if (rc != GDU_CLI_CONTINUE)
        return rc;
    if (a->target == GDU_ST_TARGET_HOST && a->gpu_given)
        return gdu_cli_fail("load", GDU_EXIT_USAGE, NULL, NULL,
                            "--gpu names the GPUs to load into; with --to host there are none");
    a->path = argv[first];
    return GDU_CLI_CONTINUE;
}

static void show_progress(void *ctx, uint64_t done, uint64_t total)
{
    gdu_progress_bytes(ctx, "loading", done, total, done == total);
}

static int fail(const gdu_st_error *err)
{
    fprintf(stderr, "gdunlock load: %s: ", gdu_st_status_name(err->code));
    gdu_text_put(stderr, err->message);
    fprintf(stderr, "\n  fix: %s\n", load_fix_hint(err->code));
    int exit_code = load_exit_code(err->code);
    gdu_cli_error_doc("load", exit_code, gdu_st_status_name(err->code), err->message,
                      load_fix_hint(err->code));
    return exit_code;
}

int gdu_cmd_load(int argc, char **argv)
{
    load_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc != GDU_CLI_CONTINUE)
        return rc;

    gdu_st_error err;
    gdu_st_model *model = NULL;
    double t0 = gdu_now_seconds();
    unsigned flags = GDU_ST_FOLDER | (a.lenient ? GDU_ST_LENIENT : 0);
    if (gdu_st_open_flags(a.path, flags, &model, &err) != GDU_ST_OK)
        return fail(&err);
    load_result r = {
        .path = a.path,
        .model = model,
        .target = a.target,
        .gpus = a.gpus,
        .gpu_count = a.gpu_count,
        .open_seconds = gdu_now_seconds() - t0,
        .verified = -1,
        .lenient = a.lenient,
    };
    st_stages_begin(&r.stages, a.target == GDU_ST_TARGET_GPU, a.gpus, a.gpu_count);
    gdu_progress progress;
    gdu_progress_start(&progress);
    gdu_st_load_options o = {
        .target = a.target,
        .gpus = a.gpus,
        .gpu_count = a.gpu_count,
        .progress = a.progress || progress.tty ? show_progress : NULL,
        .progress_ctx = &progress,
    };
    if (gdu_st_load(model, &o, &err) != GDU_ST_OK) {
        rc = fail(&err);
        gdu_st_model_free(model);
        gdu_st_engines_release(NULL);
        st_stages_end(&r.stages);
        return rc;
    }
    if (a.verify)
        r.verified = gdu_st_verify(model, &r.verify_error) == GDU_ST_OK ? 0 : 1;

    rc = r.verified == 1 ? load_exit_code(r.verify_error.code) : GDU_EXIT_OK;
    if (gdu_cli_json()) {
        rc = load_print_json(&r, a.list, rc);
    } else {
        int colour = isatty(STDOUT_FILENO) && getenv("NO_COLOR") == NULL;
        load_print_human(stdout, &r, colour, a.list);
    }
    if (r.verified == 1) {
        fputs("gdunlock load: ", stderr);
        gdu_text_put(stderr, r.verify_error.message);
        fprintf(stderr, "\n  fix: %s\n", load_fix_hint(r.verify_error.code));
    }
    gdu_st_model_free(model);
    gdu_st_engines_release(NULL);
    st_stages_end(&r.stages);
    return rc;
}
