#include "probe/cufile_config.h"

#include "probe/text_parse.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void reset(gdu_cufile_config *out)
{
    out->parsed = false;
    out->allow_compat_mode = out->use_pci_p2pdma = out->use_poll_mode = -1;
    out->max_direct_io_size_kb = out->max_device_pinned_mem_size_kb = -1;
    out->max_device_cache_size_kb = -1;
    out->logging_level[0] = '\0';
    out->error[0] = '\0';
}

static int get_bool(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    return json_is_boolean(v) ? json_is_true(v) : -1;
}

static long long get_int(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    return json_is_integer(v) && json_integer_value(v) >= 0 ? (long long)json_integer_value(v) : -1;
}

int gdu_cufile_config_parse(const char *text, gdu_cufile_config *out)
{
    reset(out);
    char *copy = strdup(text);
    if (copy == NULL) {
        snprintf(out->error, sizeof out->error, "out of memory");
        return -ENOMEM;
    }
    gdu_strip_json_comments(copy);
    json_error_t err;
    json_t *root = json_loads(copy, JSON_REJECT_DUPLICATES, &err);
    free(copy);
    if (root == NULL || !json_is_object(root)) {
        snprintf(out->error, sizeof out->error, "not valid JSON at line %d: %s",
                 root ? 0 : err.line, root ? "top level is not an object" : err.text);
        json_decref(root);
        return -EINVAL;
    }
    json_t *props = json_object_get(root, "properties");
    if (json_is_object(props)) {
        out->allow_compat_mode = get_bool(props, "allow_compat_mode");
        out->use_pci_p2pdma = get_bool(props, "use_pci_p2pdma");
        out->use_poll_mode = get_bool(props, "use_poll_mode");
        out->max_direct_io_size_kb = get_int(props, "max_direct_io_size_kb");
        out->max_device_pinned_mem_size_kb = get_int(props, "max_device_pinned_mem_size_kb");
        out->max_device_cache_size_kb = get_int(props, "max_device_cache_size_kb");
    }
    json_t *level = json_object_get(json_object_get(root, "logging"), "level");
    if (json_is_string(level))
        snprintf(out->logging_level, sizeof out->logging_level, "%s", json_string_value(level));
    json_decref(root);
    out->parsed = true;
    return 0;
}

void gdu_cufile_config_probe(gdu_sysroot *sr, const char *env_path, gdu_cufile_config *out)
{
    memset(out, 0, sizeof *out);
    reset(out);
    const char *path = env_path && env_path[0] ? env_path : "/etc/cufile.json";
    snprintf(out->path, sizeof out->path, "%s", path);
    char *text;
    long n = gdu_sysroot_read(sr, path, &text);
    if (n == -ENOENT) {
        snprintf(out->error, sizeof out->error, "%s", strerror(ENOENT));
        return;
    }
    out->found = true; /* there, but perhaps not readable: found, not parsed */
    if (n < 0) {
        snprintf(out->error, sizeof out->error, "cannot be read: %s",
                 n == -EINVAL ? "not a regular file" : strerror((int)-n));
        return;
    }
    gdu_cufile_config_parse(text, out);
    free(text);
}
