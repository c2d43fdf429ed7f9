#include "probe/pci_probe.h"
#include "probe/text_parse.h"
#include "util/pci_addr.h"

#include <errno.h>
#include <limits.h>
#include <pci/pci.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* libpci reports fatal errors through a callback that must not return; we
 * jump back out of the scan instead of letting it exit the process. libpci
 * keeps global state per access object and we scan from one thread. */
static jmp_buf pci_escape;
static char pci_error_text[256];

__attribute__((format(printf, 1, 2), noreturn)) static void pci_fatal(char *msg, ...)
{
    va_list ap;
    va_start(ap, msg);
    vsnprintf(pci_error_text, sizeof pci_error_text, msg, ap);
    va_end(ap);
    longjmp(pci_escape, 1);
}

__attribute__((format(printf, 1, 2))) static void pci_quiet(char *msg, ...) { (void)msg; }

/* The sysfs files of a device that we or libpci read, so a capture holds them. */
static const char *const device_files[] = {
    "vendor",
    "device",
    "class",
    "irq",
    "resource",
    "config",
    "numa_node",
    "revision",
    "subsystem_vendor",
    "subsystem_device",
    "current_link_speed",
    "current_link_width",
    "max_link_speed",
    "max_link_width",
    "local_cpulist",
    "enable",
};

static int read_int_file(gdu_sysroot *sr, const char *dir, const char *name, int fallback)
{
    char path[PATH_MAX], line[64];
    snprintf(path, sizeof path, "%.200s/%s", dir, name);
    if (gdu_sysroot_read_line(sr, path, line, sizeof line) != 0)
        return fallback;
    char *end;
    long v = strtol(line, &end, 10);
    return end == line ? fallback : (int)v;
}

static void read_link_state(gdu_sysroot *sr, const char *dir, gdu_pci_dev *d)
{
    char path[PATH_MAX], line[64];
    snprintf(path, sizeof path, "%.200s/current_link_speed", dir);
    if (gdu_sysroot_read_line(sr, path, line, sizeof line) == 0)
        d->cur_gen = gdu_parse_link_gen(line);
    snprintf(path, sizeof path, "%.200s/max_link_speed", dir);
    if (gdu_sysroot_read_line(sr, path, line, sizeof line) == 0)
        d->max_gen = gdu_parse_link_gen(line);
    d->cur_width = read_int_file(sr, dir, "current_link_width", 0);
    d->max_width = read_int_file(sr, dir, "max_link_width", 0);
}

static void read_links(gdu_sysroot *sr, const char *dir, gdu_pci_dev *d)
{
    char path[PATH_MAX], target[PATH_MAX];
    snprintf(path, sizeof path, "%.200s/driver", dir);
    if (gdu_sysroot_readlink(sr, path, target, sizeof target) == 0) {
        const char *base = strrchr(target, '/');
        snprintf(d->driver, sizeof d->driver, "%.31s", base ? base + 1 : target);
    }
    snprintf(path, sizeof path, "%.200s/iommu_group", dir);
    d->iommu_group = -1;
    if (gdu_sysroot_readlink(sr, path, target, sizeof target) == 0) {
        const char *base = strrchr(target, '/');
        d->iommu_group = atoi(base ? base + 1 : target);
    }
}

/* Extended capabilities need config space past 256 bytes; the sysfs config
 * file of a live machine gives only 64 (or 256) bytes to non-root readers. */
static void read_ext_caps(struct pci_dev *pd, gdu_pci_dev *d)
{
    if (d->config_len < 4096) {
        d->acs = d->rebar = GDU_CFG_UNKNOWN;
        return;
    }
    struct pci_cap *acs = pci_find_cap(pd, PCI_EXT_CAP_ID_ACS, PCI_CAP_EXTENDED);
    d->acs = acs ? GDU_CFG_PRESENT : GDU_CFG_ABSENT;
    if (acs) {
        d->acs_cap = pci_read_word(pd, acs->addr + PCI_ACS_CAP);
        d->acs_ctrl = pci_read_word(pd, acs->addr + PCI_ACS_CTRL);
    }
    struct pci_cap *rebar = pci_find_cap(pd, PCI_EXT_CAP_ID_REBAR, PCI_CAP_EXTENDED);
    d->rebar = rebar ? GDU_CFG_PRESENT : GDU_CFG_ABSENT;
    if (rebar) {
        /* Entries of 8 bytes: capability (sizes bit 4+n = 1 MiB << n), then
         * control (BAR index in bits 0..2, entry count in bits 5..7 of the first). */
        unsigned count = (pci_read_long(pd, rebar->addr + 8) >> 5) & 7;
        for (unsigned i = 0; i < count && i < 6; i++) {
            uint32_t cap = pci_read_long(pd, rebar->addr + 4 + 8 * i);
            uint32_t ctrl = pci_read_long(pd, rebar->addr + 8 + 8 * i);
            unsigned bar = ctrl & 7;
            for (int bit = 31; bit >= 4 && bar < 6; bit--)
                if (cap & (1u << bit)) {
                    d->rebar_max[bar] = (uint64_t)1 << (20 + bit - 4);
                    break;
                }
        }
    }
}

static int fill_device(gdu_sysroot *sr, struct pci_dev *pd, gdu_pci_dev *d)
{
    char dir[64], path[PATH_MAX];
    memset(d, 0, sizeof *d);
    gdu_pci_addr_format(d->bdf, sizeof d->bdf, (unsigned)pd->domain, pd->bus, pd->dev, pd->func);
    snprintf(dir, sizeof dir, "/sys/bus/pci/devices/%s", d->bdf);
    for (size_t i = 0; i < sizeof device_files / sizeof device_files[0]; i++) {
        snprintf(path, sizeof path, "%.200s/%s", dir, device_files[i]);
        gdu_sysroot_record(sr, path);
    }
    pci_fill_info(pd, PCI_FILL_IDENT | PCI_FILL_CLASS | PCI_FILL_SIZES | PCI_FILL_BASES |
                          PCI_FILL_CAPS | PCI_FILL_EXT_CAPS | PCI_FILL_NUMA_NODE);
    d->vendor = pd->vendor_id;
    d->device = pd->device_id;
    d->class_code = pd->device_class;
    d->numa_node = pd->numa_node;
    char *config;
    snprintf(path, sizeof path, "%.200s/config", dir);
    long n = gdu_sysroot_read(sr, path, &config);
    d->config_len = n > 0 ? (size_t)n : 0;
    free(config);
    char *resource;
    snprintf(path, sizeof path, "%.200s/resource", dir);
    if (gdu_sysroot_read(sr, path, &resource) >= 0 &&
        gdu_pci_resource_parse(resource, d->bar_size) < 0)
        memset(d->bar_size, 0, sizeof d->bar_size);
    free(resource);
    if (gdu_sysroot_realpath(sr, dir, d->path, sizeof d->path) != 0)
        snprintf(d->path, sizeof d->path, "%.200s", dir);
    read_link_state(sr, dir, d);
    read_links(sr, dir, d);
    read_ext_caps(pd, d);
    return 0;
}

static int cmp_bdf(const void *a, const void *b)
{
    return strcmp(((const gdu_pci_dev *)a)->bdf, ((const gdu_pci_dev *)b)->bdf);
}

/* libpci opens the device files itself, following links the host's way and
 * blocking on a FIFO: in a sysroot, every device folder and every entry in
 * it must resolve inside the capture and be a plain file or folder. Returns
 * 0, or -errno with the first offending path in why. */
static int check_confined(gdu_sysroot *sr, char *why, size_t why_len)
{
    char **devs;
    long n = gdu_sysroot_list(sr, "/sys/bus/pci/devices", &devs);
    int rc = gdu_sysroot_confined(sr, "/sys/bus/pci/devices");
    char path[PATH_MAX] = "/sys/bus/pci/devices";
    for (long i = 0; rc == 0 && i < n; i++) {
        char dir[PATH_MAX], **entries;
        snprintf(dir, sizeof dir, "/sys/bus/pci/devices/%.200s", devs[i]);
        snprintf(path, sizeof path, "%s", dir);
        rc = gdu_sysroot_confined(sr, dir);
        long k = rc == 0 ? gdu_sysroot_list(sr, dir, &entries) : 0;
        for (long j = 0; rc == 0 && j < k; j++) {
            snprintf(path, sizeof path, "%.300s/%.200s", dir, entries[j]);
            rc = gdu_sysroot_confined(sr, path);
        }
        if (k > 0)
            gdu_sysroot_free_names(entries, k);
    }
    if (n > 0)
        gdu_sysroot_free_names(devs, n);
    if (rc != 0)
        snprintf(why, why_len, "the sysroot's %s %s; its PCI devices are not read", path,
                 rc == -EXDEV ? "leads outside the sysroot" : "is not a plain file or folder");
    return rc;
}

int gdu_pci_scan(gdu_sysroot *sr, gdu_pci *out, char *why, size_t why_len)
{
    char sysfs[PATH_MAX];
    out->devs = NULL;
    out->n = 0;
    if (!gdu_sysroot_exists(sr, "/sys/bus/pci/devices"))
        return 0;
    int rc = check_confined(sr, why, why_len);
    if (rc != 0)
        return rc;
    if (gdu_sysroot_path(sr, "/sys/bus/pci", sysfs, sizeof sysfs) != 0) {
        snprintf(why, why_len, "sysroot path too long");
        return -ENAMETOOLONG;
    }
    struct pci_access *pacc = pci_alloc();
    if (pacc == NULL) {
        snprintf(why, why_len, "libpci: out of memory");
        return -ENOMEM;
    }
    pacc->method = PCI_ACCESS_SYS_BUS_PCI;
    pacc->error = pci_fatal;
    pacc->warning = pci_quiet;
    pacc->debug = pci_quiet;
    if (pci_set_param(pacc, "sysfs.path", sysfs) != 0) {
        pci_cleanup(pacc);
        snprintf(why, why_len, "libpci has no sysfs.path parameter");
        return -ENOTSUP;
    }
    /* volatile: modified between setjmp and a possible longjmp. */
    gdu_pci_dev *volatile devs = NULL;
    volatile size_t n = 0;
    if (setjmp(pci_escape) != 0) {
        free(devs);
        pci_cleanup(pacc);
        snprintf(why, why_len, "libpci: %s", pci_error_text);
        return -EIO;
    }
    pci_init(pacc);
    pci_scan_bus(pacc);
    size_t count = 0;
    for (struct pci_dev *pd = pacc->devices; pd; pd = pd->next)
        count++;
    devs = calloc(count ? count : 1, sizeof *devs);
    if (devs == NULL) {
        pci_cleanup(pacc);
        snprintf(why, why_len, "out of memory");
        return -ENOMEM;
    }
    for (struct pci_dev *pd = pacc->devices; pd; pd = pd->next)
        if (fill_device(sr, pd, &devs[n]) == 0)
            n++;
    pci_cleanup(pacc);
    qsort(devs, n, sizeof *devs, cmp_bdf);
    out->devs = devs;
    out->n = n;
    return 0;
}

void gdu_pci_free(gdu_pci *pci)
{
    free(pci->devs);
    pci->devs = NULL;
    pci->n = 0;
}

const gdu_pci_dev *gdu_pci_find(const gdu_pci *pci, const char *bdf)
{
    for (size_t i = 0; i < pci->n; i++)
        if (strcasecmp(pci->devs[i].bdf, bdf) == 0)
            return &pci->devs[i];
    return NULL;
}

bool gdu_pci_is_nvidia_gpu(const gdu_pci_dev *d)
{
    return d->vendor == GDU_PCI_VENDOR_NVIDIA && (d->class_code >> 8) == 0x03;
}

bool gdu_pci_is_nic(const gdu_pci_dev *d) { return (d->class_code >> 8) == 0x02; }

bool gdu_pci_acs_redirects(const gdu_pci_dev *d)
{
    return d->acs == GDU_CFG_PRESENT &&
           (d->acs_ctrl & (PCI_ACS_CTRL_REQ_RED | PCI_ACS_CTRL_CMPLT_RED | PCI_ACS_CTRL_EGRESS));
}

const char *gdu_pci_acs_describe(uint16_t ctrl, char *buf, size_t len)
{
    static const struct {
        uint16_t bit;
        const char *name;
    } bits[] = {
        {PCI_ACS_CTRL_VALID, "SrcValid"},      {PCI_ACS_CTRL_BLOCK, "TransBlk"},
        {PCI_ACS_CTRL_REQ_RED, "ReqRedir"},    {PCI_ACS_CTRL_CMPLT_RED, "CmpltRedir"},
        {PCI_ACS_CTRL_FORWARD, "UpstreamFwd"}, {PCI_ACS_CTRL_EGRESS, "EgressCtrl"},
        {PCI_ACS_CTRL_TRANS, "DirectTrans"},
    };
    size_t used = 0;
    if (len == 0)
        return buf;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++)
        if (ctrl & bits[i].bit) {
            int w = snprintf(buf + used, len - used, "%s%s", used ? " " : "", bits[i].name);
            if (w < 0 || (size_t)w >= len - used)
                break;
            used += (size_t)w;
        }
    if (used == 0)
        snprintf(buf, len, "none");
    return buf;
}

void gdu_pci_path(const gdu_pci *pci, const char *bdf_a, const char *bdf_b, gdu_pcie_path *out)
{
    const gdu_pci_dev *a = gdu_pci_find(pci, bdf_a), *b = gdu_pci_find(pci, bdf_b);
    if (a == NULL || b == NULL) {
        memset(out, 0, sizeof *out);
        out->kind = GDU_PATH_UNKNOWN;
        return;
    }
    gdu_pcie_path_classify(a->path, a->numa_node, b->path, b->numa_node, out);
}

gdu_tri gdu_pci_path_acs_redirect(const gdu_pci *pci, const gdu_pcie_path *path, char *redirecting,
                                  size_t len)
{
    gdu_tri answer = GDU_TRI_NO;
    if (len)
        redirecting[0] = '\0';
    /* Through a host bridge the traffic reaches the root complex anyway; ACS
     * only matters where a switch could turn it around. */
    if (path->kind != GDU_PATH_PIX && path->kind != GDU_PATH_PXB)
        return GDU_TRI_NO;
    for (size_t i = 0; i < path->n_bridges; i++) {
        const gdu_pci_dev *b = gdu_pci_find(pci, path->bridges[i]);
        if (b == NULL || b->acs == GDU_CFG_UNKNOWN) {
            answer = answer == GDU_TRI_YES ? GDU_TRI_YES : GDU_TRI_UNKNOWN;
        } else if (gdu_pci_acs_redirects(b)) {
            size_t used = len ? strlen(redirecting) : 0;
            size_t need = (used ? 1 : 0) + strlen(b->bdf) + 1;
            if (used + need <= len) /* whole addresses only */
                snprintf(redirecting + used, len - used, "%s%s", used ? " " : "", b->bdf);
            answer = GDU_TRI_YES;
        }
    }
    return answer;
}
