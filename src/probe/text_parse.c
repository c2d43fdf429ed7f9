#include "probe/text_parse.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void copy_trimmed(const char *s, size_t n, char *out, size_t len)
{
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        n--;
    if (len == 0)
        return;
    if (n >= len)
        n = len - 1;
    memcpy(out, s, n);
    out[n] = '\0';
}

int gdu_text_kv(const char *text, const char *key, char *out, size_t len)
{
    size_t klen = strlen(key);
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t llen = end ? (size_t)(end - line) : strlen(line);
        const char *p = line;
        while (p < line + llen && (*p == ' ' || *p == '\t'))
            p++;
        if ((size_t)(line + llen - p) > klen && strncmp(p, key, klen) == 0) {
            const char *q = p + klen;
            while (q < line + llen && (*q == ' ' || *q == '\t'))
                q++;
            if (q < line + llen && *q == ':') {
                q++;
                while (q < line + llen && (*q == ' ' || *q == '\t'))
                    q++;
                copy_trimmed(q, (size_t)(line + llen - q), out, len);
                return 0;
            }
        }
        line = end ? end + 1 : NULL;
    }
    return -ENOENT;
}

/* A token like 580.159.04 or 550.54: digits, a dot, digits, optionally more. */
static bool is_version_token(const char *s, size_t n)
{
    size_t dots = 0;
    if (n == 0 || !isdigit((unsigned char)s[0]) || !isdigit((unsigned char)s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '.')
            dots++;
        else if (!isdigit((unsigned char)s[i]))
            return false;
    }
    return dots >= 1 && dots <= 3;
}

int gdu_parse_nvidia_version(const char *text, gdu_nvidia_version *out)
{
    memset(out, 0, sizeof *out);
    const char *line = strstr(text, "NVRM version:");
    if (line == NULL)
        return -ENOENT;
    const char *end = strchr(line, '\n');
    size_t llen = end ? (size_t)(end - line) : strlen(line);
    char buf[512];
    copy_trimmed(line, llen, buf, sizeof buf);
    out->open_module = strstr(buf, "Open Kernel Module") != NULL;
    char *save = NULL;
    for (char *tok = strtok_r(buf, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
        size_t n = strlen(tok);
        if (is_version_token(tok, n) && n < sizeof out->version) {
            memcpy(out->version, tok, n + 1);
            out->major = atoi(tok);
            return 0;
        }
    }
    return -EINVAL;
}

int gdu_parse_link_gen(const char *text)
{
    static const struct {
        double gts;
        int gen;
    } speeds[] = {
        {2.5, 1}, {5.0, 2}, {8.0, 3}, {16.0, 4}, {32.0, 5}, {64.0, 6},
    };
    char *end;
    double v = strtod(text, &end);
    if (end == text)
        return 0;
    for (size_t i = 0; i < sizeof speeds / sizeof speeds[0]; i++)
        if (v > speeds[i].gts - 0.05 && v < speeds[i].gts + 0.05)
            return speeds[i].gen;
    return 0;
}

/* Copies one space-separated field, undoing mountinfo's octal escapes. */
static const char *mount_field(const char *p, char *out, size_t len)
{
    size_t n = 0;
    while (*p == ' ')
        p++;
    while (*p && *p != ' ' && *p != '\n') {
        char c = *p++;
        if (c == '\\' && p[0] >= '0' && p[0] <= '3' && p[1] >= '0' && p[1] <= '7' && p[2] >= '0' &&
            p[2] <= '7') {
            c = (char)(((p[0] - '0') << 6) | ((p[1] - '0') << 3) | (p[2] - '0'));
            p += 3;
        }
        if (n + 1 < len)
            out[n++] = c;
    }
    if (len)
        out[n] = '\0';
    return p;
}

int gdu_parse_mountinfo_line(const char *line, gdu_mount *out)
{
    char field[1024];
    memset(out, 0, sizeof *out);
    const char *p = mount_field(line, field, sizeof field); /* mount id */
    p = mount_field(p, field, sizeof field);                /* parent id */
    p = mount_field(p, field, sizeof field);                /* major:minor */
    if (sscanf(field, "%u:%u", &out->major, &out->minor) != 2)
        return -EINVAL;
    p = mount_field(p, out->root, sizeof out->root);
    p = mount_field(p, out->mount_point, sizeof out->mount_point);
    p = mount_field(p, out->options, sizeof out->options);
    if (out->mount_point[0] != '/')
        return -EINVAL;
    for (;;) { /* optional fields end at a lone "-" */
        p = mount_field(p, field, sizeof field);
        if (field[0] == '\0')
            return -EINVAL;
        if (strcmp(field, "-") == 0)
            break;
    }
    p = mount_field(p, out->fstype, sizeof out->fstype);
    p = mount_field(p, out->source, sizeof out->source);
    mount_field(p, out->super_options, sizeof out->super_options);
    return out->fstype[0] ? 0 : -EINVAL;
}

int gdu_cmdline_get(const char *cmdline, const char *name, char *out, size_t len)
{
    size_t nlen = strlen(name);
    int found = -ENOENT;
    for (const char *p = cmdline; *p;) {
        while (*p && isspace((unsigned char)*p))
            p++;
        const char *start = p;
        while (*p && !isspace((unsigned char)*p))
            p++;
        size_t tlen = (size_t)(p - start);
        if (tlen >= nlen && strncmp(start, name, nlen) == 0 &&
            (tlen == nlen || start[nlen] == '=')) {
            const char *v = tlen == nlen ? start + tlen : start + nlen + 1;
            copy_trimmed(v, (size_t)(p - v), out, len);
            found = 0;
        }
    }
    return found;
}

int gdu_parse_kernel_release(const char *text, int *major, int *minor)
{
    int used = 0;
    if (sscanf(text, "%d.%d%n", major, minor, &used) != 2 || *major <= 0 || *minor < 0)
        return -EINVAL;
    return 0;
}

int gdu_kernel_config_option(const char *config, const char *option)
{
    static const char not_set[] = " is not set";
    size_t n = strlen(option), k = sizeof not_set - 1;
    for (const char *line = config; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (len > n + 1 && strncmp(line, option, n) == 0 && line[n] == '=')
            return line[n + 1] == 'y' || line[n + 1] == 'm';
        if (len == 2 + n + k && strncmp(line, "# ", 2) == 0 && strncmp(line + 2, option, n) == 0 &&
            strncmp(line + 2 + n, not_set, k) == 0)
            return 0;
        line = end ? end + 1 : NULL;
    }
    return -1;
}

void gdu_strip_json_comments(char *text)
{
    char *w = text;
    bool in_string = false;
    for (char *r = text; *r;) {
        if (in_string) {
            if (*r == '\\' && r[1]) {
                *w++ = *r++;
                *w++ = *r++;
                continue;
            }
            if (*r == '"')
                in_string = false;
            *w++ = *r++;
        } else if (r[0] == '"') {
            in_string = true;
            *w++ = *r++;
        } else if (r[0] == '/' && r[1] == '/') {
            while (*r && *r != '\n')
                r++;
        } else if (r[0] == '/' && r[1] == '*') {
            r += 2;
            while (*r && !(r[0] == '*' && r[1] == '/'))
                r++;
            if (*r)
                r += 2;
            *w++ = ' ';
        } else {
            *w++ = *r++;
        }
    }
    *w = '\0';
}
