/* The shim's part of verify: reading its GDUNLOCK_REPORT file and turning it
 * into reasons. The report's layout belongs to the shim and may grow, so this
 * looks for what it needs rather than demanding an exact schema: a "gpus"
 * array (or object) of per-GPU objects, or a top-level array of them; a GPU
 * is matched by its PCI address ("pci", "pci_bus_id", "bus_id", "bdf") or its
 * CUDA ordinal ("index", "gpu", "ordinal", "device"); with a single GPU entry
 * that entry is used. Its "mode" and "reason" strings and "registered" /
 * "unregistered" counts are what verify reports, with the top-level
 * "cufile_buffers" (the kernel lookup's verdict on each buffer handed to
 * cuFile). */
#include "launch/launch.h"
#include "util/pci_addr.h"
#include "util/text.h"
#include "verify/verify.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* "0000:41:00.0", "00000000:41:00.0" and "41:00.0" name the same device. */
static bool same_address(const char *a, const char *b)
{
    char x[GDU_PCI_ADDR_SIZE], y[GDU_PCI_ADDR_SIZE];
    return a && b && gdu_pci_addr_normalize(a, x, sizeof x) == 0 &&
           gdu_pci_addr_normalize(b, y, sizeof y) == 0 && strcmp(x, y) == 0;
}

static bool pci_matches(const json_t *entry, const char *pci)
{
    static const char *const keys[] = {"pci", "pci_bus_id", "bus_id", "bdf"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (same_address(pci, json_string_value(json_object_get(entry, keys[i]))))
            return true;
    return false;
}

static bool index_matches(const json_t *entry, int gpu)
{
    static const char *const keys[] = {"index", "gpu", "ordinal", "device"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const json_t *v = json_object_get(entry, keys[i]);
        if (json_is_integer(v) && json_integer_value(v) == gpu)
            return true;
    }
    return false;
}

static const json_t *find_gpu(const json_t *root, const char *pci, int gpu)
{
    const json_t *gpus = json_is_array(root) ? root : json_object_get(root, "gpus");
    const json_t *only = NULL, *by_index = NULL;
    size_t count = 0;
    if (json_is_array(gpus)) {
        size_t i;
        const json_t *e;
        json_array_foreach(gpus, i, e)
        {
            if (!json_is_object(e))
                continue;
            if (pci_matches(e, pci))
                return e;
            if (!by_index && index_matches(e, gpu))
                by_index = e;
            only = e;
            count++;
        }
    } else if (json_is_object(gpus)) {
        const char *key;
        const json_t *e;
        json_object_foreach((json_t *)gpus, key, e)
        {
            if (!json_is_object(e))
                continue;
            if (pci_matches(e, pci) || same_address(pci, key))
                return e;
            if (!by_index && index_matches(e, gpu))
                by_index = e;
            only = e;
            count++;
        }
    }
    if (by_index)
        return by_index;
    return count == 1 ? only : NULL;
}

static long long count_of(const json_t *entry, const char *key)
{
    const json_t *v = json_object_get(entry, key);
    return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

/* Picks the GPU's entry out of a parsed report. */
static void from_report(const json_t *root, const char *what, const char *pci, int gpu,
                        gdu_verify_shim *out)
{
    out->have_report = true;
    const json_t *entry = find_gpu(root, pci, gpu);
    if (!entry) {
        char shown[128];
        snprintf(out->report_error, sizeof out->report_error,
                 "shim report %s has no entry for GPU %d (%s)",
                 gdu_text_shorten(what, 100, shown, sizeof shown), gpu,
                 pci && pci[0] ? pci : "unknown PCI address");
        return;
    }
    const char *mode = json_string_value(json_object_get(entry, "mode"));
    const char *reason = json_string_value(json_object_get(entry, "reason"));
    snprintf(out->mode, sizeof out->mode, "%s", mode ? mode : "");
    snprintf(out->reason, sizeof out->reason, "%s", reason ? reason : "");
    out->registered = count_of(entry, "registered");
    out->unregistered = count_of(entry, "unregistered");
    const json_t *cf = json_is_object(root) ? json_object_get(root, "cufile_buffers") : NULL;
    if (!json_is_object(cf))
        return;
    out->cufile_registered = count_of(cf, "registered");
    out->cufile_found = count_of(cf, "found");
    size_t i;
    const json_t *b;
    json_array_foreach(json_object_get(cf, "buffers"), i, b)
    {
        const char *verdict = json_string_value(json_object_get(b, "kernel_lookup"));
        const char *why = json_string_value(json_object_get(b, "why"));
        if (verdict != NULL && strcmp(verdict, "found") != 0) {
            snprintf(out->lookup_refusal, sizeof out->lookup_refusal, "%s",
                     why != NULL ? why : verdict);
            break;
        }
    }
}

static void reset(gdu_verify_shim *out)
{
    out->have_report = false;
    out->mode[0] = out->reason[0] = out->report_error[0] = '\0';
    out->registered = out->unregistered = -1;
    out->cufile_registered = out->cufile_found = -1;
    out->lookup_refusal[0] = '\0';
}

void gdu_verify_shim_parse_report(const char *text, size_t len, const char *pci, int gpu,
                                  gdu_verify_shim *out)
{
    reset(out);
    json_error_t err;
    json_t *root = json_loadb(text, len, 0, &err);
    if (!root) {
        snprintf(out->report_error, sizeof out->report_error, "shim report unreadable: %s",
                 err.text);
        return;
    }
    from_report(root, "(text)", pci, gpu, out);
    json_decref(root);
}

void gdu_verify_shim_read_report(const char *path, const char *pci, int gpu, gdu_verify_shim *out)
{
    reset(out);
    if (access(path, F_OK) != 0) {
        snprintf(out->report_error, sizeof out->report_error,
                 "the shim wrote no report (it writes one at exit once it has seen an NVIDIA GPU)");
        return;
    }
    char why[160];
    json_t *root = gdu_launch_load_report(path, why, sizeof why);
    if (!root) {
        char shown[128];
        snprintf(out->report_error, sizeof out->report_error, "shim report %s unreadable: %s",
                 gdu_text_shorten(path, 100, shown, sizeof shown), why);
        return;
    }
    from_report(root, path, pci, gpu, out);
    json_decref(root);
}

void gdu_verify_shim_reasons(const gdu_verify_shim *shim, gdu_verify_result *r)
{
    if (r->verdict == GDU_VERIFY_DIRECT)
        return; /* the counters proved the path; nothing to explain */
    if (!shim->active) {
        gdu_verify_add_reason(r, "shim-inactive", "the gdunlock shim was not active: %s",
                              shim->why_inactive[0] ? shim->why_inactive : "not preloaded");
        return;
    }
    if (!shim->have_report || shim->report_error[0]) {
        gdu_verify_add_reason(r, "shim-no-report", "%s",
                              shim->report_error[0] ? shim->report_error
                                                    : "the shim wrote no report");
        return;
    }
    if (shim->cufile_registered > 0 && shim->cufile_found < shim->cufile_registered)
        gdu_verify_add_reason(
            r, "kernel-lookup-refused",
            "nvidia-fs would not pin %lld of the %lld buffers given to cuFile: %s",
            shim->cufile_registered - shim->cufile_found, shim->cufile_registered,
            shim->lookup_refusal[0] ? shim->lookup_refusal : "see the shim's report");
    if (strcmp(shim->mode, "failed") == 0)
        gdu_verify_add_reason(r, "shim-failed", "the gdunlock shim failed on this GPU: %s",
                              shim->reason[0] ? shim->reason : "no reason given");
    else if (strcmp(shim->mode, "native") == 0)
        gdu_verify_add_reason(r, "shim-native",
                              "the driver itself provides third-party P2P on this GPU (shim mode "
                              "native), so the shim is not what limits the path");
}
