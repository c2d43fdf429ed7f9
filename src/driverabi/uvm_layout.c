/* Picks the UVM_MAP_EXTERNAL_ALLOCATION layout by driver version and reads
 * blocks laid out that way. The version boundaries come from the tags of the
 * open kernel modules: the per-GPU array grew from 32 to 256 entries in
 * 550.40.53 and is unchanged up to 595.45.04 (the newest tag checked). */
#include "driverabi/uvm_abi.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static const unsigned first_known[3] = {515, 43, 4};
static const unsigned first_256[3] = {550, 40, 53};
static const unsigned first_unknown[3] = {596, 0, 0};

static int version_cmp(const unsigned a[3], const unsigned b[3])
{
    for (int i = 0; i < 3; i++)
        if (a[i] != b[i])
            return a[i] < b[i] ? -1 : 1;
    return 0;
}

/* Parses "N.N[.N]" exactly spanning [s, end); returns 0 on success. */
static int parse_dotted(const char *s, const char *end, unsigned v[3])
{
    unsigned parts[3] = {0, 0, 0};
    int n = 0;
    while (s < end) {
        if (n == 3 || !isdigit((unsigned char)*s))
            return -1;
        unsigned long value = 0;
        while (s < end && isdigit((unsigned char)*s)) {
            value = value * 10 + (unsigned long)(*s - '0');
            if (value > 999999)
                return -1;
            s++;
        }
        parts[n++] = (unsigned)value;
        if (s < end) {
            if (*s != '.' || s + 1 == end)
                return -1;
            s++;
        }
    }
    if (n < 2)
        return -1;
    memcpy(v, parts, sizeof parts);
    return 0;
}

int gdu_nv_driver_version_parse(const char *text, unsigned v[3])
{
    if (text == NULL)
        return -1;
    const char *line_end = strchr(text, '\n');
    if (line_end == NULL)
        line_end = text + strlen(text);
    const char *p = text;
    while (p < line_end) {
        while (p < line_end && isspace((unsigned char)*p))
            p++;
        const char *tok = p;
        while (p < line_end && !isspace((unsigned char)*p))
            p++;
        if (p > tok && parse_dotted(tok, p, v) == 0)
            return 0;
    }
    return -1;
}

int gdu_uvm_layout_for_driver(const char *version_text, gdu_uvm_layout *out, char *why,
                              size_t why_len)
{
    unsigned v[3];
    if (gdu_nv_driver_version_parse(version_text, v) != 0) {
        snprintf(why, why_len, "no NVIDIA driver version found in the version text");
        return -1;
    }
    if (version_cmp(v, first_known) < 0 || version_cmp(v, first_unknown) >= 0) {
        snprintf(why, why_len,
                 "driver %u.%u.%u: UVM_MAP_EXTERNAL_ALLOCATION layout not known for it "
                 "(known: 515.43.04 up to 595.x)",
                 v[0], v[1], v[2]);
        return -1;
    }
    if (version_cmp(v, first_256) < 0) {
        *out = (gdu_uvm_layout){
            .max_gpus = 32,
            .size = sizeof(gdu_uvm_map_external_params_32),
            .off_gpu_count = offsetof(gdu_uvm_map_external_params_32, gpuAttributesCount),
            .off_rm_ctrl_fd = offsetof(gdu_uvm_map_external_params_32, rmCtrlFd),
            .off_client = offsetof(gdu_uvm_map_external_params_32, hClient),
            .off_memory = offsetof(gdu_uvm_map_external_params_32, hMemory),
            .off_status = offsetof(gdu_uvm_map_external_params_32, rmStatus),
        };
    } else {
        *out = (gdu_uvm_layout){
            .max_gpus = 256,
            .size = sizeof(gdu_uvm_map_external_params_256),
            .off_gpu_count = offsetof(gdu_uvm_map_external_params_256, gpuAttributesCount),
            .off_rm_ctrl_fd = offsetof(gdu_uvm_map_external_params_256, rmCtrlFd),
            .off_client = offsetof(gdu_uvm_map_external_params_256, hClient),
            .off_memory = offsetof(gdu_uvm_map_external_params_256, hMemory),
            .off_status = offsetof(gdu_uvm_map_external_params_256, rmStatus),
        };
    }
    return 0;
}

void gdu_uvm_map_external_read(const gdu_uvm_layout *layout, const void *block,
                               gdu_uvm_map_external *out)
{
    const unsigned char *b = block;
    memcpy(&out->base, b + offsetof(gdu_uvm_map_external_params_32, base), sizeof out->base);
    memcpy(&out->length, b + offsetof(gdu_uvm_map_external_params_32, length), sizeof out->length);
    memcpy(&out->offset, b + offsetof(gdu_uvm_map_external_params_32, offset), sizeof out->offset);
    memcpy(&out->gpu_count, b + layout->off_gpu_count, sizeof out->gpu_count);
    memcpy(&out->rm_ctrl_fd, b + layout->off_rm_ctrl_fd, sizeof out->rm_ctrl_fd);
    memcpy(&out->h_client, b + layout->off_client, sizeof out->h_client);
    memcpy(&out->h_memory, b + layout->off_memory, sizeof out->h_memory);
    memcpy(&out->rm_status, b + layout->off_status, sizeof out->rm_status);
}
