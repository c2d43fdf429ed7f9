/* verify --rdma's result: how a run records why it stopped, the outcome's
 * stable code, and the report of a transfer as JSON and as text (where the
 * loopback ran and what came back). Below the setup (verify_rdma.c) and the
 * transfer (verify_rdma_loop.c), which both record into it. */
#include "verify/verify_rdma.h"

#include "verify/verify_rdma_internal.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

static void vrefuse(gdu_verify_rdma_result *r, gdu_verify_rdma_outcome why, const char *fix,
                    const char *fmt, va_list ap) __attribute__((format(printf, 4, 0)));

static void vrefuse(gdu_verify_rdma_result *r, gdu_verify_rdma_outcome why, const char *fix,
                    const char *fmt, va_list ap)
{
    vsnprintf(r->cause, sizeof r->cause, fmt, ap);
    snprintf(r->fix, sizeof r->fix, "%s", fix);
    r->outcome = why;
}

void gdu_verify_rdma_refuse(gdu_verify_rdma_result *r, gdu_verify_rdma_outcome why, const char *fix,
                            const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vrefuse(r, why, fix, fmt, ap);
    va_end(ap);
}

int gdu_verify_rdma_step_failed(gdu_verify_rdma_run *run, const char *fix, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vrefuse(run->r, GDU_VERIFY_RDMA_STEP_FAILED, fix, fmt, ap);
    va_end(ap);
    return -1;
}

json_t *gdu_verify_rdma_json(const gdu_verify_rdma_result *r, int gpu)
{
    json_t *doc =
        json_pack("{s:s, s:s, s:s, s:i, s:s, s:i, s:i, s:{s:i, s:s, s:s, s:b, s:b}, s:s, s:I, s:I}",
                  "verdict", r->outcome == GDU_VERIFY_RDMA_PASS ? "PASS" : "FAIL", "library",
                  r->library, "device", r->device, "port", r->port, "link_layer", r->link_layer,
                  "lid", (int)r->lid, "gid_index", r->gid_index, "gpu", "index", gpu, "name",
                  r->gpu_name, "pci", r->gpu_pci, "gpu_direct_rdma_supported",
                  r->gpu_direct_rdma != 0, "dma_buf_supported", r->dma_buf != 0, "route", r->route,
                  "size", (json_int_t)r->size, "bytes_compared", (json_int_t)r->bytes_compared);
    json_t *devices = json_array();
    for (int i = 0; devices != NULL && i < r->n_devices; i++)
        json_array_append_new(devices, json_string(r->devices[i]));
    if (doc != NULL)
        json_object_set_new(doc, "devices", devices ? devices : json_null());
    else
        json_decref(devices);
    if (doc != NULL && r->outcome == GDU_VERIFY_RDMA_MISMATCH)
        json_object_set_new(doc, "mismatch",
                            json_pack("{s:I, s:i, s:i}", "offset", (json_int_t)r->mismatch_offset,
                                      "wrote", r->wrote, "read_back", r->read_back));
    return doc;
}

void gdu_verify_rdma_print(FILE *out, const gdu_verify_rdma_result *r, int gpu)
{
    bool pass = r->outcome == GDU_VERIFY_RDMA_PASS;
    fprintf(out, "RDMA loopback: %s\n", pass ? "PASS" : "FAIL");
    fprintf(out, "  adapter  %s port %d, %s, ", r->device, r->port, r->link_layer);
    if (r->gid_index >= 0)
        fprintf(out, "GID index %d\n", r->gid_index);
    else
        fprintf(out, "LID %u\n", r->lid);
    fprintf(out, "  GPU      %d %s (%s)\n", gpu, r->gpu_name, r->gpu_pci);
    fprintf(out, "  route    %s\n", r->route);
    if (pass)
        fprintf(out,
                "  bytes    %zu RDMA-written into GPU memory, RDMA-read back: all %llu equal\n",
                r->size, (unsigned long long)r->bytes_compared);
    else
        fprintf(out,
                "  bytes    %zu moved each way; byte at offset %llu differs: wrote 0x%02x, read "
                "back 0x%02x\n",
                r->size, (unsigned long long)r->mismatch_offset, r->wrote, r->read_back);
}

const char *gdu_verify_rdma_code(gdu_verify_rdma_outcome o)
{
    switch (o) {
    case GDU_VERIFY_RDMA_NO_LIBRARY:
        return "no-verbs-library";
    case GDU_VERIFY_RDMA_NO_DEVICE:
        return "no-rdma-device";
    case GDU_VERIFY_RDMA_NO_PORT:
        return "no-active-port";
    case GDU_VERIFY_RDMA_NO_GPU:
        return "no-gpu";
    case GDU_VERIFY_RDMA_STEP_FAILED:
        return "rdma-step-failed";
    case GDU_VERIFY_RDMA_MISMATCH:
        return "FAIL";
    case GDU_VERIFY_RDMA_PASS:
        return "PASS";
    }
    return "?";
}
