/* What gdunlock run makes of its program's shim reports: the merged
 * document written to a file, and the reports as a table for people (the
 * caller escapes their text first: the reports are the program's). */
#include "launch/launch.h"
#include "util/units.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int gdu_launch_write_report(const json_t *doc, const char *path)
{
    char *text = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (text == NULL) {
        errno = ENOMEM;
        return -1;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0644);
    int flags = fd >= 0 ? fcntl(fd, F_GETFL) : -1;
    FILE *f = flags >= 0 && fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0 ? fdopen(fd, "w") : NULL;
    if (f == NULL) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        free(text);
        errno = e;
        return -1;
    }
    fputs(text, f);
    fputc('\n', f);
    free(text);
    int e = ferror(f) ? (errno ? errno : EIO) : 0;
    if (fclose(f) != 0 && e == 0)
        e = errno ? errno : EIO;
    errno = e;
    return e == 0 ? 0 : -1;
}

static const char *mode_colour(const char *mode, bool colour)
{
    if (!colour)
        return "";
    return strcmp(mode, "unlocked") == 0 ? "\033[32m"
           : strcmp(mode, "failed") == 0 ? "\033[31m"
                                         : "\033[36m";
}

static long long num(const json_t *o, const char *key)
{
    return (long long)json_integer_value(json_object_get(o, key));
}

/* What nvidia-fs's lookup (the shim's model of it) finds for each buffer the
 * program gave cuFile. */
static void print_cufile_buffers(FILE *out, const json_t *cf)
{
    if (num(cf, "registered") <= 0)
        return;
    fprintf(out, "  cuFile buffers: %lld registered, %lld found by nvidia-fs's lookup (model)%s\n",
            num(cf, "registered"), num(cf, "found"),
            num(cf, "not_listed") > 0 ? "; the oldest not listed" : "");
    size_t i;
    const json_t *b;
    json_array_foreach(json_object_get(cf, "buffers"), i, b)
    {
        char size[32];
        gdu_format_bytes((uint64_t)num(b, "size"), size, sizeof size);
        const char *verdict = json_string_value(json_object_get(b, "kernel_lookup"));
        const char *why = json_string_value(json_object_get(b, "why"));
        fprintf(out, "    0x%llx %-9s %s%s%s\n", (unsigned long long)num(b, "address"), size,
                verdict ? verdict : "?",
                verdict != NULL && strcmp(verdict, "found") != 0 && why != NULL ? ": " : "",
                verdict != NULL && strcmp(verdict, "found") != 0 && why != NULL ? why : "");
    }
}

void gdu_launch_print_processes(FILE *out, const json_t *processes, bool colour)
{
    size_t i, j;
    const json_t *p, *g;
    json_array_foreach(processes, i, p)
    {
        fprintf(out, "gdunlock: shim report, pid %lld, driver %s%s\n", num(p, "pid"),
                json_string_value(json_object_get(p, "driver")),
                json_is_true(json_object_get(p, "test_drop_native"))
                    ? " (test mode: libcuda's objects dropped)"
                    : "");
        const char *refused = json_string_value(json_object_get(p, "refused"));
        if (refused != NULL)
            fprintf(out, "  not acting: %s\n", refused);
        fprintf(out, "  %-4s %-13s %-9s %10s %12s %6s %8s %8s  %s\n", "GPU", "PCI", "mode",
                "registered", "unregistered", "live", "skipped", "failures", "reason");
        json_array_foreach(json_object_get(p, "gpus"), j, g)
        {
            const char *mode = json_string_value(json_object_get(g, "mode"));
            const char *pci = json_string_value(json_object_get(g, "pci"));
            const char *reason = json_string_value(json_object_get(g, "reason"));
            const json_t *dev = json_object_get(g, "rm_device");
            char devs[16];
            snprintf(devs, sizeof devs, json_is_integer(dev) ? "%lld" : "?",
                     (long long)json_integer_value(dev));
            fprintf(out, "  %-4s %-13s %s%-9s%s %10lld %12lld %6lld %8lld %8lld  %s\n", devs,
                    pci ? pci : "-", mode_colour(mode ? mode : "", colour), mode ? mode : "?",
                    colour ? "\033[0m" : "", num(g, "registered"), num(g, "unregistered"),
                    num(g, "live"), num(g, "skipped"), num(g, "failures"), reason ? reason : "");
            const char *key;
            const json_t *count;
            json_object_foreach((json_t *)json_object_get(g, "failures_by_status"), key, count)
                fprintf(out, "       %lld x %s\n", (long long)json_integer_value(count), key);
            const json_t *vas = json_object_get(g, "va_space");
            const char *src = json_string_value(json_object_get(g, "va_space_source"));
            if (json_is_integer(vas))
                fprintf(out, "       VA space 0x%llx (%s)\n",
                        (unsigned long long)json_integer_value(vas),
                        src == NULL               ? "?"
                        : strcmp(src, "uvm") == 0 ? "the one registered with UVM"
                        : strcmp(src, "libcuda") == 0
                            ? "libcuda's own"
                            : "the device's first; no UVM registration seen");
        }
        print_cufile_buffers(out, json_object_get(p, "cufile_buffers"));
    }
    if (json_array_size(processes) == 0)
        fprintf(out, "gdunlock: the command made no GPU (RM) calls; no shim report\n");
}
