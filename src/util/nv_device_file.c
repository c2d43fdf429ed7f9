#include "util/nv_device_file.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int gdu_nv_device_minor_parse(const char *text)
{
    static const char key[] = "Device Minor:";
    for (const char *line = text; line != NULL && *line != '\0';) {
        if (strncmp(line, key, sizeof key - 1) == 0) {
            const char *p = line + sizeof key - 1;
            while (*p == ' ' || *p == '\t')
                p++;
            int n = 0, digits = 0;
            while (isdigit((unsigned char)*p) && digits < 4) {
                n = n * 10 + (*p++ - '0');
                digits++;
            }
            if (digits == 0 || digits == 4 || (*p != '\n' && *p != '\0' && *p != ' ' && *p != '\t'))
                return -1;
            return n <= 254 ? n : -1;
        }
        line = strchr(line, '\n');
        if (line != NULL)
            line++;
    }
    return -1;
}

int gdu_nv_device_file_open(const char *root, const char *addr)
{
    if (root == NULL)
        root = "";
    char path[512], text[2048];
    if (strchr(addr, '/') != NULL ||
        snprintf(path, sizeof path, "%s/proc/driver/nvidia/gpus/%s/information", root, addr) >=
            (int)sizeof path)
        return -EINVAL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, text, sizeof text - 1);
    int saved = errno;
    close(fd);
    if (n < 0)
        return -saved;
    text[n] = '\0';
    int minor = gdu_nv_device_minor_parse(text);
    if (minor < 0)
        return -EINVAL;
    snprintf(path, sizeof path, "%s/dev/nvidia%d", root, minor);
    fd = open(path, O_RDWR | O_CLOEXEC);
    return fd >= 0 ? fd : -errno;
}
