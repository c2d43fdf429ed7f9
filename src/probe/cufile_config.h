/* The cufile.json in effect (CUFILE_ENV_PATH_JSON, else /etc/cufile.json) and
 * the settings in it that decide which path cuFile takes. */
#ifndef GDUNLOCK_PROBE_CUFILE_CONFIG_H
#define GDUNLOCK_PROBE_CUFILE_CONFIG_H

#include "probe/sysroot.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct gdu_cufile_config {
    bool found; /* the file exists (readable or not) */
    bool parsed;
    char path[512];
    char error[256]; /* why it could not be read or parsed */
    /* -1 when the file does not set it (cuFile's default applies) */
    int allow_compat_mode; /* properties.allow_compat_mode */
    int use_pci_p2pdma;    /* properties.use_pci_p2pdma */
    int use_poll_mode;     /* properties.use_poll_mode */
    long long max_direct_io_size_kb;
    long long max_device_pinned_mem_size_kb;
    long long max_device_cache_size_kb;
    char logging_level[16];
} gdu_cufile_config;

/* Parses cufile.json text (// and block comments allowed). Returns 0 or
 * -EINVAL with the reason in out->error. */
int gdu_cufile_config_parse(const char *text, gdu_cufile_config *out);

/* Finds and reads the file in effect. env_path: CUFILE_ENV_PATH_JSON's value
 * or NULL. Never fails: out->found / out->parsed say what happened. */
void gdu_cufile_config_probe(gdu_sysroot *sr, const char *env_path, gdu_cufile_config *out);

#endif
