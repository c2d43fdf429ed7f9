#include "probe/driver_probe.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void gdu_driver_params_parse(const char *text, gdu_driver *out)
{
    char value[256];
    out->enable_resizable_bar = -1;
    out->registry_dwords[0] = '\0';
    if (text == NULL)
        return;
    if (gdu_text_kv(text, "EnableResizableBar", value, sizeof value) == 0)
        out->enable_resizable_bar = atoi(value);
    if (gdu_text_kv(text, "RegistryDwords", value, sizeof value) == 0) {
        size_t n = strlen(value);
        const char *v = value;
        if (n >= 2 && value[0] == '"' && value[n - 1] == '"') {
            value[n - 1] = '\0';
            v = value + 1;
        }
        snprintf(out->registry_dwords, sizeof out->registry_dwords, "%s", v);
    }
}

static void read_gpus(gdu_sysroot *sr, gdu_driver *out)
{
    char **names;
    long n = gdu_sysroot_list(sr, "/proc/driver/nvidia/gpus", &names);
    for (long i = 0; i < n && out->n_gpus < GDU_MAX_GPUS; i++) {
        char path[PATH_MAX], *text;
        snprintf(path, sizeof path, "/proc/driver/nvidia/gpus/%s/information", names[i]);
        if (gdu_sysroot_read(sr, path, &text) < 0)
            continue;
        gdu_driver_gpu *g = &out->gpus[out->n_gpus++];
        memset(g, 0, sizeof *g);
        if (gdu_text_kv(text, "Bus Location", g->bdf, sizeof g->bdf) != 0)
            snprintf(g->bdf, sizeof g->bdf, "%.15s", names[i]);
        gdu_text_kv(text, "Model", g->model, sizeof g->model);
        gdu_text_kv(text, "GPU UUID", g->uuid, sizeof g->uuid);
        gdu_text_kv(text, "GPU Firmware", g->firmware, sizeof g->firmware);
        free(text);
    }
    if (n > 0)
        gdu_sysroot_free_names(names, n);
}

static void read_nvfs(gdu_sysroot *sr, gdu_driver *out)
{
    char *text;
    bool proc = gdu_sysroot_exists(sr, "/proc/driver/nvidia-fs");
    out->nvfs_loaded = proc || gdu_sysroot_exists(sr, "/sys/module/nvidia_fs");
    if (gdu_sysroot_read(sr, "/proc/driver/nvidia-fs/version", &text) >= 0) {
        if (gdu_text_kv(text, "version", out->nvfs_version, sizeof out->nvfs_version) != 0) {
            size_t k = strcspn(text, "\n");
            snprintf(out->nvfs_version, sizeof out->nvfs_version, "%.*s", (int)(k < 31 ? k : 31),
                     text);
        }
        free(text);
    }
    if (out->nvfs_version[0] == '\0')
        gdu_sysroot_read_line(sr, "/sys/module/nvidia_fs/version", out->nvfs_version,
                              sizeof out->nvfs_version);
    out->peermem_loaded = gdu_sysroot_exists(sr, "/sys/module/nvidia_peermem");
}

void gdu_driver_probe(gdu_sysroot *sr, gdu_driver *out)
{
    char *text;
    memset(out, 0, sizeof *out);
    if (gdu_sysroot_read(sr, "/proc/driver/nvidia/version", &text) >= 0) {
        out->loaded = true;
        gdu_parse_nvidia_version(text, &out->version);
        free(text);
    }
    gdu_sysroot_read_line(sr, "/sys/module/nvidia/version", out->module_version,
                          sizeof out->module_version);
    if (out->module_version[0] != '\0')
        out->loaded = true;
    gdu_sysroot_read_line(sr, "/sys/module/nvidia/taint", out->taint, sizeof out->taint);
    gdu_driver_params_parse(NULL, out);
    read_gpus(sr, out);
    read_nvfs(sr, out);
}

int gdu_registry_dword(const char *dwords, const char *key, unsigned long *value)
{
    size_t klen = strlen(key);
    for (const char *p = dwords; *p;) {
        while (*p == ';' || *p == ' ')
            p++;
        const char *end = strchr(p, ';');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n > klen && strncasecmp(p, key, klen) == 0 && p[klen] == '=') {
            char num[32];
            size_t vlen = n - klen - 1;
            if (vlen == 0 || vlen >= sizeof num)
                return -EINVAL;
            memcpy(num, p + klen + 1, vlen);
            num[vlen] = '\0';
            char *stop;
            errno = 0;
            unsigned long v = strtoul(num, &stop, 0);
            if (*stop != '\0' || errno != 0)
                return -EINVAL;
            *value = v;
            return 0;
        }
        p += n;
    }
    return -ENOENT;
}

gdu_tri gdu_gpu_name_geforce(const char *name)
{
    static const char *const consumer[] = {"GeForce", "TITAN", "Titan"};
    if (name == NULL || name[0] == '\0')
        return GDU_TRI_UNKNOWN;
    for (size_t i = 0; i < sizeof consumer / sizeof consumer[0]; i++)
        if (strstr(name, consumer[i]) != NULL)
            return GDU_TRI_YES;
    return GDU_TRI_NO;
}
