#include "cli/load_report.h"
#include "cli/cli_error.h"
#include "util/exit_codes.h"
#include "util/json_text.h"
#include "util/text.h"
#include "util/units.h"

#include <inttypes.h>
#include <string.h>

const char *load_fix_hint(gdu_st_status status)
{
    switch (status) {
    case GDU_ST_ERR_OPEN:
        return "name a .safetensors file (or its index) that you may read";
    case GDU_ST_ERR_TOO_SMALL:
    case GDU_ST_ERR_HEADER_LENGTH:
    case GDU_ST_ERR_HEADER_JSON:
    case GDU_ST_ERR_HEADER_NOT_OBJECT:
        return "this is not a safetensors file, or it is damaged: download or save it again";
    case GDU_ST_ERR_HOLE:
    case GDU_ST_ERR_TRAILING:
        return "the file has bytes that belong to no tensor, which the format forbids (a "
               "damaged or polyglot file): re-save it with the safetensors library, or read "
               "it anyway with --lenient";
    case GDU_ST_ERR_SETTINGS:
        return "fix or unset the GDUNLOCK_IO_* variable named above";
    case GDU_ST_ERR_BUSY:
        return "release the engines after the loads that use them have finished";
    case GDU_ST_ERR_NOMEM:
        return "free memory, or lower GDUNLOCK_IO_CHUNK, GDUNLOCK_IO_STAGING or "
               "GDUNLOCK_IO_WORKERS (the engine stages workers x staging x chunk bytes)";
    case GDU_ST_ERR_DTYPE:
        return "the file uses a dtype this gdunlock does not know: a newer format revision?";
    case GDU_ST_ERR_TENSOR_ENTRY:
    case GDU_ST_ERR_SHAPE:
    case GDU_ST_ERR_OVERFLOW:
    case GDU_ST_ERR_OFFSETS:
    case GDU_ST_ERR_SIZE_MISMATCH:
    case GDU_ST_ERR_OUT_OF_RANGE:
    case GDU_ST_ERR_OVERLAP:
    case GDU_ST_ERR_METADATA:
        return "the header is malformed or the file truncated: download it again, or re-save "
               "it with the safetensors library";
    case GDU_ST_ERR_INDEX:
    case GDU_ST_ERR_DUPLICATE_TENSOR:
        return "the index's weight_map does not match the shards: fix the index or download "
               "the checkpoint again";
    case GDU_ST_ERR_PATH_ESCAPE:
        return "shard names must be relative paths under the index's folder";
    case GDU_ST_ERR_NO_CUDA:
        return "run 'gdunlock doctor' to see what is missing, pick a GPU that exists with "
               "--gpu, or load with --to host";
    case GDU_ST_ERR_DEVICE_MEMORY:
        return "free GPU memory, spread the shards with --gpu 0,1, or load with --to host";
    case GDU_ST_ERR_ENGINE:
    case GDU_ST_ERR_IO:
        return "check the storage (dmesg); GDUNLOCK_IO_BACKEND and GDUNLOCK_IO_DIRECT=off "
               "choose another path";
    case GDU_ST_ERR_VERIFY_MISMATCH:
        return "the data path corrupted the bytes: try GDUNLOCK_IO_BACKEND=pipeline and "
               "report it with 'gdunlock verify' output";
    case GDU_ST_ERR_CHANGED:
        return "the checkpoint was replaced or written to while it was read: run again once "
               "its writer has finished";
    case GDU_ST_ERR_TOO_MANY_FILES:
        return "raise the open-file limit (ulimit -n) and run again";
    default:
        return "this is a bug in gdunlock: please report it";
    }
}

int load_exit_code(gdu_st_status status)
{
    switch (status) {
    case GDU_ST_OK:
        return GDU_EXIT_OK;
    case GDU_ST_ERR_SETTINGS:
        return GDU_EXIT_USAGE;
    case GDU_ST_ERR_INVALID_ARGUMENT:
    case GDU_ST_ERR_NOMEM:
    case GDU_ST_ERR_BUSY:
    case GDU_ST_ERR_TOO_MANY_FILES:
        return GDU_EXIT_SOFTWARE;
    case GDU_ST_ERR_NO_CUDA:
        return GDU_EXIT_UNAVAILABLE;
    case GDU_ST_ERR_IO:
    case GDU_ST_ERR_ENGINE:
    case GDU_ST_ERR_CHANGED:
        return GDU_EXIT_IOERR;
    case GDU_ST_ERR_DEVICE_MEMORY:
    case GDU_ST_ERR_VERIFY_MISMATCH:
        return GDU_EXIT_FAILED;
    default: /* missing, unreadable or malformed checkpoint */
        return GDU_EXIT_NOINPUT;
    }
}

static double gbps(const gdu_st_load_stats *s)
{
    return s->seconds > 0 ? (double)s->read_bytes / s->seconds / 1e9 : 0.0;
}

static void format_shape(const gdu_st_tensor *t, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "[");
    for (uint32_t d = 0; d < t->ndim && used < len; d++)
        used += (size_t)snprintf(buf + used, len - used, "%s%" PRIu64, d ? ", " : "", t->shape[d]);
    if (used < len)
        snprintf(buf + used, len - used, "]");
}

static void format_placement(const load_result *r, const char *memory, char *buf, size_t len)
{
    if (r->target == GDU_ST_TARGET_HOST) {
        snprintf(buf, len, "%s", memory);
        return;
    }
    size_t used = (size_t)snprintf(buf, len, "%s on GPU ", memory);
    for (size_t i = 0; i < r->gpu_count && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%d", i ? "," : "", r->gpus[i]);
    if (r->gpu_count > 1 && used < len)
        snprintf(buf + used, len - used, " (files round-robin)");
}

static void print_tensor_table(FILE *out, const gdu_st_model *m)
{
    fprintf(out, "\n%-48s %-8s %-20s %6s %18s %12s\n", "tensor", "dtype", "shape", "device",
            "address", "bytes");
    for (size_t i = 0; i < gdu_st_model_tensor_count(m); i++) {
        const gdu_st_tensor *t = gdu_st_model_tensor(m, i);
        char shape[128], device[16];
        format_shape(t, shape, sizeof shape);
        if (t->device < 0)
            snprintf(device, sizeof device, "host");
        else
            snprintf(device, sizeof device, "%d", t->device);
        gdu_text_pad(out, t->name, t->name_len, 48);
        fprintf(out, " %-8s %-20s %6s %#18" PRIx64 " %12" PRIu64 "\n", gdu_st_dtype_name(t->dtype),
                shape, device, t->address, t->nbytes);
    }
}

/* Tensors whose loaded address is not a multiple of their element size. */
static size_t count_misaligned(const gdu_st_model *m)
{
    size_t n = 0;
    for (size_t i = 0; i < gdu_st_model_tensor_count(m); i++) {
        const gdu_st_tensor *t = gdu_st_model_tensor(m, i);
        unsigned bytes = gdu_st_dtype_bits(t->dtype) / 8;
        n += bytes > 1 && t->nbytes > 0 && t->address % bytes != 0;
    }
    return n;
}

void load_print_human(FILE *out, const load_result *r, int colour, int list)
{
    gdu_st_load_stats s = gdu_st_model_stats(r->model);
    char size[32], read[32], placement[160];
    gdu_format_bytes(s.tensor_bytes, size, sizeof size);
    gdu_format_bytes(s.read_bytes, read, sizeof read);
    format_placement(r, s.memory, placement, sizeof placement);
    fputs("gdunlock load: ", out);
    gdu_text_put(out, r->path);
    fputs(r->lenient ? " (lenient)\n" : "\n", out);
    fprintf(out, "  files        %" PRIu64 "\n", s.files);
    fprintf(out, "  tensors      %" PRIu64 "\n", s.tensors);
    fprintf(out, "  bytes        %s of tensors (%s read)\n", size, read);
    fprintf(out, "  memory       %s\n", placement);
    /* The engine's reason starts with the backend's name. */
    fprintf(out, "  path         %s\n", s.reason[0] ? s.reason : s.backend);
    fprintf(out, "  time         %.3f s (headers %.3f s)\n", s.seconds, r->open_seconds);
    fprintf(out, "  throughput   %.2f GB/s\n", gbps(&s));
    size_t misaligned = count_misaligned(r->model);
    if (misaligned)
        fprintf(out,
                "  note         %zu %s not aligned to %s element size (not as "
                "the safetensors writer lays them out): some GPU kernels need aligned data\n",
                misaligned, misaligned == 1 ? "tensor is" : "tensors are",
                misaligned == 1 ? "its" : "their");
    for (size_t f = 0; f < gdu_st_model_file_count(r->model); f++) {
        const gdu_st_header *h = gdu_st_model_file_header(r->model, f);
        if (gdu_st_header_hole_bytes(h) || gdu_st_header_trailing_bytes(h)) {
            fputs("  note         ", out);
            gdu_text_put(out, gdu_st_model_file_path(r->model, f));
            fprintf(out,
                    ": %" PRIu64 " bytes between tensors and %" PRIu64
                    " after them belong to no tensor (the format forbids it; loaded with "
                    "--lenient)\n",
                    gdu_st_header_hole_bytes(h), gdu_st_header_trailing_bytes(h));
        }
    }
    if (r->verified >= 0) {
        const char *on = colour ? (r->verified ? "\033[31m" : "\033[32m") : "";
        const char *off = colour ? "\033[0m" : "";
        if (r->verified == 0)
            fprintf(out, "  verify       %sOK%s: every loaded byte equals the file\n", on, off);
        else {
            fprintf(out, "  verify       %sFAILED%s: ", on, off);
            gdu_text_put(out, r->verify_error.message);
            fputc('\n', out);
        }
    }
    if (list)
        print_tensor_table(out, r->model);
}

static json_t *tensor_json(const gdu_st_tensor *t)
{
    json_t *shape = json_array();
    for (uint32_t d = 0; d < t->ndim; d++)
        json_array_append_new(shape, json_integer((json_int_t)t->shape[d]));
    return json_pack("{s:o, s:s, s:o, s:i, s:I, s:I, s:I, s:I}", "name",
                     gdu_json_textn(t->name, t->name_len), "dtype", gdu_st_dtype_name(t->dtype),
                     "shape", shape, "device", t->device, "address", (json_int_t)t->address,
                     "bytes", (json_int_t)t->nbytes, "file", (json_int_t)t->file, "file_offset",
                     (json_int_t)t->file_offset);
}

static json_t *tensor_item(const void *ctx, size_t i)
{
    return tensor_json(gdu_st_model_tensor(ctx, i));
}

static json_t *load_to_json(const load_result *r)
{
    gdu_st_load_stats s = gdu_st_model_stats(r->model);
    json_t *files = json_array(), *gpus = json_array();
    for (size_t f = 0; f < gdu_st_model_file_count(r->model); f++) {
        const gdu_st_header *h = gdu_st_model_file_header(r->model, f);
        json_t *file = json_object();
        gdu_json_set_text(file, "path", gdu_st_model_file_path(r->model, f));
        json_object_update_new(file,
                               json_pack("{s:I, s:I, s:I, s:I, s:I}", "tensors",
                                         (json_int_t)gdu_st_header_tensor_count(h), "data_offset",
                                         (json_int_t)gdu_st_header_data_offset(h), "data_span",
                                         (json_int_t)gdu_st_header_data_span(h), "hole_bytes",
                                         (json_int_t)gdu_st_header_hole_bytes(h), "trailing_bytes",
                                         (json_int_t)gdu_st_header_trailing_bytes(h)));
        json_array_append_new(files, file);
    }
    for (size_t i = 0; r->target == GDU_ST_TARGET_GPU && i < r->gpu_count; i++)
        json_array_append_new(gpus, json_integer(r->gpus[i]));
    json_t *verify =
        r->verified < 0
            ? json_null()
            : json_pack("{s:b, s:o}", "ok", r->verified == 0, "message",
                        gdu_json_text(r->verified == 0 ? "every loaded byte equals the file"
                                                       : r->verify_error.message));
    /* The path as the user gave it (exact in path_escaped when not UTF-8). */
    json_t *doc = json_object();
    json_t *rest =
        json_pack("{s:s, s:o, s:o, s:I, s:I, s:I, s:f, s:f, s:f, s:s, s:s, s:o, s:o}", "target",
                  r->target == GDU_ST_TARGET_HOST ? "host" : "gpu", "gpus", gpus, "files", files,
                  "tensors", (json_int_t)s.tensors, "tensor_bytes", (json_int_t)s.tensor_bytes,
                  "read_bytes", (json_int_t)s.read_bytes, "seconds", s.seconds, "open_seconds",
                  r->open_seconds, "gbps", gbps(&s), "memory", s.memory, "backend", s.backend,
                  "reason", gdu_json_text(s.reason), "verify", verify);
    /* Both calls run, so that rest is always taken over. */
    int path_failed = gdu_json_set_text(doc, "path", r->path) != 0;
    int rest_failed = json_object_update_new(doc, rest) != 0;
    if (path_failed || rest_failed) {
        json_decref(doc);
        return NULL;
    }
    if (doc != NULL)
        json_object_set_new(doc, "lenient", json_boolean(r->lenient));
    if (doc != NULL)
        json_object_set_new(doc, "misaligned_tensors",
                            json_integer((json_int_t)count_misaligned(r->model)));
    /* Where the process's time went; alloc, engine and transfer overlap
     * across files (see gdu_st_load_stats). */
    if (doc != NULL)
        json_object_set_new(
            doc, "stages_seconds",
            json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "process_start",
                      r->stages.process_start_seconds, "cuda_init", r->stages.cuda_init_seconds,
                      "gpu_contexts", r->stages.context_seconds, "headers", r->open_seconds,
                      "allocation", s.alloc_seconds, "engine_create", s.engine_seconds, "transfer",
                      s.transfer_seconds, "load_total", s.seconds));
    return doc;
}

int load_print_json(const load_result *r, int list, int exit_code)
{
    json_t *doc = load_to_json(r);
    if (!list)
        return gdu_cli_print_report("load", doc, "gdunlock-load/1", exit_code, 0);
    gdu_cli_stream table = {"tensor_table", gdu_st_model_tensor_count(r->model), tensor_item,
                            r->model};
    return gdu_cli_print_report_streamed("load", doc, "gdunlock-load/1", exit_code, 0, &table);
}
