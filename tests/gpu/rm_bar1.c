#include "rm_bar1.h"

#include "driverabi/nv_card_info.h"
#include "driverabi/nv_classes.h"
#include "driverabi/nv_escape.h"
#include "driverabi/nv_status.h"
#include "driverabi/nvos.h"
#include "driverabi/rm_memory.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* "gdu1": the owner tag of our video memory; the I/O-memory probe's handle
 * lies outside RM's range of generated handles (0xcaf00000..). */
#define VIDMEM_OWNER 0x67647531u
#define IO_MEMORY_HANDLE 0x67647701u

int gdu_rm_cards(gdu_rm_client *c, gdu_rm_card *out, size_t cap, size_t *count, char *why,
                 size_t why_len)
{
    gdu_nv_card_info *ci = calloc(GDU_NV_MAX_DEVICES, sizeof *ci);
    *count = 0;
    if (ci == NULL) {
        snprintf(why, why_len, "reading card info: out of memory");
        return -ENOMEM;
    }
    int rc = gdu_rm_escape(c, -1, GDU_NV_ESC_CARD_INFO, ci, GDU_NV_MAX_DEVICES * sizeof *ci,
                           "reading card info", why, why_len);
    for (size_t i = 0; rc == 0 && i < GDU_NV_MAX_DEVICES && *count < cap; i++) {
        if (!ci[i].valid)
            continue;
        out[(*count)++] = (gdu_rm_card){.gpu_id = ci[i].gpu_id,
                                        .domain = ci[i].pci_info.domain,
                                        .bus = ci[i].pci_info.bus,
                                        .slot = ci[i].pci_info.slot,
                                        .minor = ci[i].minor_number,
                                        .bar0_addr = ci[i].reg_address,
                                        .bar0_size = ci[i].reg_size,
                                        .bar1_addr = ci[i].fb_address,
                                        .bar1_size = ci[i].fb_size};
    }
    free(ci);
    return rc;
}

const gdu_rm_card *gdu_rm_card_find(const gdu_rm_card *cards, size_t count, uint32_t domain,
                                    uint32_t bus, uint32_t slot)
{
    for (size_t i = 0; i < count; i++)
        if (cards[i].domain == domain && cards[i].bus == bus && cards[i].slot == slot)
            return &cards[i];
    return NULL;
}

int gdu_rm_vidmem_alloc(gdu_rm_client *c, const gdu_rm_device *d, uint64_t size, gdu_rm_vidmem *m,
                        uint32_t *status, char *why, size_t why_len)
{
    memset(m, 0, sizeof *m);
    m->map_fd = -1;
    if (size == 0 || size % (64u << 10) != 0) {
        snprintf(why, why_len, "video memory size %llu is not a multiple of 64 KiB",
                 (unsigned long long)size);
        return -EINVAL;
    }
    /* Contiguous: the I/O-memory path takes only one contiguous range of
     * bus addresses (os-mlock.c get_io_ptes). */
    gdu_nv_memory_alloc_params p = {
        .owner = VIDMEM_OWNER,
        .type = GDU_NVOS32_TYPE_IMAGE,
        .attr = (uint32_t)GDU_NVOS32_ATTR_LOCATION_VIDMEM << GDU_NVOS32_ATTR_LOCATION_SHIFT |
                (uint32_t)GDU_NVOS32_ATTR_PHYSICALITY_CONTIGUOUS
                    << GDU_NVOS32_ATTR_PHYSICALITY_SHIFT,
        .size = size,
    };
    int rc = gdu_rm_alloc(c, d->hdevice, GDU_NV01_MEMORY_LOCAL_USER, &p, sizeof p, &m->hmemory,
                          status, "allocating video memory (NV01_MEMORY_LOCAL_USER)", why, why_len);
    if (rc != 0)
        return rc;
    m->size = size;
    m->fb_offset = p.offset;
    return 0;
}

/* Opens a /dev/nvidiaN file for one mapping or escape. */
static int open_device(const char *dev_path, char *why, size_t why_len)
{
    int fd = open(dev_path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        snprintf(why, why_len, "cannot open %s: %s", dev_path, strerror(err));
        return -err;
    }
    return fd;
}

/* RM_UNMAP_MEMORY of m's BAR1 mapping at m->bus_addr; its answer is not
 * needed (the caller is already failing or tearing down). */
static void unmap_memory(gdu_rm_client *c, const gdu_rm_device *d, const gdu_rm_vidmem *m)
{
    gdu_nvos34 u = {.hClient = c->hclient,
                    .hDevice = d->hsubdevice,
                    .hMemory = m->hmemory,
                    .pLinearAddress = m->bus_addr};
    char ignored[8];
    gdu_rm_escape(c, -1, GDU_NV_ESC_RM_UNMAP_MEMORY, &u, sizeof u, "", ignored, sizeof ignored);
}

int gdu_rm_vidmem_map(gdu_rm_client *c, const gdu_rm_device *d, gdu_rm_vidmem *m,
                      const char *dev_path, uint32_t *status, char *why, size_t why_len)
{
    int fd = open_device(dev_path, why, why_len);
    if (fd < 0)
        return fd;
    gdu_nvos33_with_fd p = {
        .params = {.hClient = c->hclient,
                   .hDevice = d->hsubdevice,
                   .hMemory = m->hmemory,
                   .length = m->size,
                   .flags = GDU_NVOS33_FLAGS_ACCESS_READ_WRITE},
        .fd = fd,
    };
    const char *what = "mapping the video memory for the CPU (RM_MAP_MEMORY)";
    int rc = gdu_rm_escape(c, -1, GDU_NV_ESC_RM_MAP_MEMORY, &p, sizeof p, what, why, why_len);
    if (rc == 0 && status != NULL)
        *status = p.params.status;
    if (rc == 0 && p.params.status != GDU_NV_OK) {
        snprintf(why, why_len, "%s: RM returned %s", what, gdu_nv_status_name(p.params.status));
        rc = -EIO;
    }
    if (rc != 0) {
        close(fd);
        return rc;
    }
    m->bus_addr = p.params.pLinearAddress;
    /* The driver maps the context armed on this file, only at offset 0. */
    void *cpu = mmap(NULL, m->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (cpu == MAP_FAILED) {
        int err = errno;
        snprintf(why, why_len, "mmap of %s after RM_MAP_MEMORY: %s", dev_path, strerror(err));
        unmap_memory(c, d, m);
        close(fd);
        return -err;
    }
    m->cpu = cpu;
    m->map_fd = fd;
    return 0;
}

void gdu_rm_vidmem_unmap(gdu_rm_client *c, const gdu_rm_device *d, gdu_rm_vidmem *m)
{
    if (m->cpu == NULL)
        return;
    munmap(m->cpu, m->size);
    unmap_memory(c, d, m);
    close(m->map_fd);
    m->cpu = NULL;
    m->map_fd = -1;
}

void gdu_rm_vidmem_free(gdu_rm_client *c, const gdu_rm_device *d, gdu_rm_vidmem *m)
{
    gdu_rm_vidmem_unmap(c, d, m);
    if (m->hmemory != 0)
        gdu_rm_free(c, d->hdevice, m->hmemory);
    m->hmemory = 0;
}

int gdu_rm_probe_io_memory(gdu_rm_client *c, const gdu_rm_device *d, const char *dev_path,
                           void *ptr, uint64_t size, uint32_t *status, char *why, size_t why_len)
{
    int fd = open_device(dev_path, why, why_len);
    if (fd < 0)
        return fd;
    /* RM_ALLOC_MEMORY goes to a device file; registered, RM takes it as our
     * client's (the client must match the file's control file). */
    gdu_nv_register_fd reg = {.ctl_fd = c->fd};
    int rc = gdu_rm_escape(c, fd, GDU_NV_ESC_REGISTER_FD, &reg, sizeof reg,
                           "registering the device file (REGISTER_FD)", why, why_len);
    gdu_nvos02_with_fd p = {
        .params = {.hRoot = c->hclient,
                   .hObjectParent = d->hdevice,
                   .hObjectNew = IO_MEMORY_HANDLE,
                   .hClass = GDU_NV01_MEMORY_SYSTEM_OS_DESCRIPTOR,
                   .flags = GDU_NVOS02_FLAGS_IO_MEMORY,
                   .pMemory = (uint64_t)(uintptr_t)ptr,
                   .limit = size - 1},
        .fd = -1,
    };
    const char *what = "describing the range as I/O memory (RM_ALLOC_MEMORY, OS descriptor)";
    if (rc == 0)
        rc = gdu_rm_escape(c, fd, GDU_NV_ESC_RM_ALLOC_MEMORY, &p, sizeof p, what, why, why_len);
    close(fd);
    if (rc != 0)
        return rc;
    if (status != NULL)
        *status = p.params.status;
    if (p.params.status != GDU_NV_OK) {
        snprintf(why, why_len, "%s: RM returned %s", what, gdu_nv_status_name(p.params.status));
        return -EIO;
    }
    gdu_rm_free(c, d->hdevice, IO_MEMORY_HANDLE);
    return 0;
}

int gdu_smaps_vmflags(const char *smaps, uint64_t addr, char *flags, size_t len)
{
    int inside = 0;
    for (const char *line = smaps; line != NULL && *line != '\0';) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        char *dash;
        unsigned long long lo = strtoull(line, &dash, 16);
        if (dash != line && *dash == '-' && isxdigit((unsigned char)dash[1])) {
            char *after;
            unsigned long long hi = strtoull(dash + 1, &after, 16);
            inside = *after == ' ' && lo <= addr && addr < hi;
        } else if (inside && n >= 8 && strncmp(line, "VmFlags:", 8) == 0) {
            const char *v = line + 8;
            while (v < line + n && *v == ' ')
                v++;
            size_t k = (size_t)(line + n - v);
            while (k > 0 && (v[k - 1] == ' ' || v[k - 1] == '\r'))
                k--;
            snprintf(flags, len, "%.*s", (int)k, v);
            return 0;
        }
        line = end ? end + 1 : NULL;
    }
    return -1;
}

int gdu_vmflags_has(const char *flags, const char *flag)
{
    size_t n = strlen(flag);
    for (const char *p = flags; (p = strstr(p, flag)) != NULL; p += n)
        if ((p == flags || p[-1] == ' ') && (p[n] == '\0' || p[n] == ' '))
            return 1;
    return 0;
}
