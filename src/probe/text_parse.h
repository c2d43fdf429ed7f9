/* Parsers for the small text formats of sysfs and procfs that the probes read.
 * All take NUL-terminated text of any content and never read past it. */
#ifndef GDUNLOCK_PROBE_TEXT_PARSE_H
#define GDUNLOCK_PROBE_TEXT_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Finds the line "key: value" (procfs style, any spacing after the colon; key
 * compared case-sensitively from the line's first non-blank character) and
 * copies value, trailing blanks removed, into out. Returns 0 or -ENOENT. */
int gdu_text_kv(const char *text, const char *key, char *out, size_t len);

/* /proc/driver/nvidia/version. */
typedef struct gdu_nvidia_version {
    char version[32]; /* "580.159.04" */
    int major;        /* 580 */
    bool open_module; /* "Open Kernel Module" in the NVRM line */
} gdu_nvidia_version;
int gdu_parse_nvidia_version(const char *text, gdu_nvidia_version *out);

/* "16.0 GT/s PCIe" (sysfs current_link_speed) -> PCIe generation 1..6, or 0 if unknown. */
int gdu_parse_link_gen(const char *text);

/* One line of /proc/self/mountinfo. Strings are unescaped (\040 -> ' '). */
typedef struct gdu_mount {
    unsigned major, minor;
    char root[256];
    char mount_point[1024];
    char options[512]; /* per-mount options */
    char fstype[64];
    char source[256];
    char super_options[512];
} gdu_mount;
int gdu_parse_mountinfo_line(const char *line, gdu_mount *out);

/* The value of "name=" in a kernel command line ("" for a bare flag). Returns 0
 * or -ENOENT. The last occurrence wins, as in the kernel. */
int gdu_cmdline_get(const char *cmdline, const char *name, char *out, size_t len);

/* "6.8.0-49-generic" (/proc/sys/kernel/osrelease) -> 6 and 8. Returns 0 or -EINVAL. */
int gdu_parse_kernel_release(const char *text, int *major, int *minor);

/* A kernel configuration's answer for option ("CONFIG_PCI_P2PDMA"): 1 for
 * "=y" or "=m", 0 for "# ... is not set", -1 when the text does not say. */
int gdu_kernel_config_option(const char *config, const char *option);

/* Strips // and block comments outside strings, in place (cufile.json carries them). */
void gdu_strip_json_comments(char *text);

#endif
