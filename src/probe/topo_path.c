#include "probe/topo_path.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

enum { MAX_DEPTH = 32 };

typedef struct {
    char root[32]; /* "pci0000:00" */
    size_t n;
    char bdf[MAX_DEPTH][16]; /* PCI functions from the root bus down */
} chain;

/* dddd:bb:dd.f with hex digits */
static bool is_bdf(const char *s, size_t n)
{
    static const char shape[] = "xxxx:xx:xx.x";
    if (n != sizeof shape - 1)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (shape[i] == 'x' ? !isxdigit((unsigned char)s[i]) : s[i] != shape[i])
            return false;
    }
    return true;
}

static void split(const char *path, chain *c)
{
    memset(c, 0, sizeof *c);
    for (const char *p = path; *p;) {
        while (*p == '/')
            p++;
        const char *s = p;
        while (*p && *p != '/')
            p++;
        size_t n = (size_t)(p - s);
        if (n > 3 && n < sizeof c->root && strncmp(s, "pci", 3) == 0 && c->root[0] == '\0') {
            memcpy(c->root, s, n);
            c->root[n] = '\0';
        } else if (is_bdf(s, n) && c->n < MAX_DEPTH) {
            memcpy(c->bdf[c->n], s, n);
            c->bdf[c->n][n] = '\0';
            c->n++;
        }
    }
}

static void add_bridge(gdu_pcie_path *out, const char *bdf)
{
    if (out->n_bridges < GDU_PATH_MAX_BRIDGES)
        snprintf(out->bridges[out->n_bridges++], sizeof out->bridges[0], "%s", bdf);
}

void gdu_pcie_path_classify(const char *a, int numa_a, const char *b, int numa_b,
                            gdu_pcie_path *out)
{
    chain ca, cb;
    memset(out, 0, sizeof *out);
    split(a, &ca);
    split(b, &cb);
    if (ca.n == 0 || cb.n == 0) {
        out->kind = GDU_PATH_UNKNOWN;
        return;
    }
    size_t common = 0;
    bool same_root = strcmp(ca.root, cb.root) == 0;
    if (same_root)
        while (common < ca.n && common < cb.n && strcmp(ca.bdf[common], cb.bdf[common]) == 0)
            common++;
    if (common == ca.n && common == cb.n) {
        out->kind = GDU_PATH_X;
        return;
    }
    /* Bridges from a up to the common ancestor (included), then down to b. */
    size_t top = common > 0 ? common - 1 : 0;
    for (size_t i = ca.n - 1; i > top; i--)
        add_bridge(out, ca.bdf[i - 1]);
    for (size_t i = common; i + 1 < cb.n; i++)
        add_bridge(out, cb.bdf[i]);
    if (common == ca.n || common == cb.n) {
        out->kind = GDU_PATH_PIX; /* one is a bridge above the other */
    } else if (common > 0) {
        /* Below the common bridge each side passes depth_x more bridges: one
         * switch (upstream + downstream port) gives at most one on each side. */
        size_t depth_a = ca.n - common - 1, depth_b = cb.n - common - 1;
        out->kind = (depth_a <= 1 && depth_b <= 1) ? GDU_PATH_PIX : GDU_PATH_PXB;
    } else if (same_root) {
        out->kind = GDU_PATH_PHB;
    } else if (numa_a >= 0 && numa_b >= 0 && numa_a != numa_b) {
        out->kind = GDU_PATH_SYS;
    } else {
        out->kind = GDU_PATH_NODE;
    }
}

const char *gdu_path_kind_name(gdu_path_kind k)
{
    static const char *const names[] = {"X", "PIX", "PXB", "PHB", "NODE", "SYS", "?"};
    return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}

int gdu_sysfs_path_last_bdf(const char *path, char *bdf, size_t len)
{
    chain c;
    split(path, &c);
    if (c.n == 0)
        return -ENOENT;
    snprintf(bdf, len, "%s", c.bdf[c.n - 1]);
    return 0;
}
