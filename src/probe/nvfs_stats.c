/* nvidia-fs stats parser: see nvfs_stats.h for the formats handled. All
 * scanning works on (pointer, length) spans so that nothing relies on a NUL
 * terminator or reads past the input. */
#include "probe/nvfs_stats.h"
#include "util/text.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct span {
    const char *p;
    size_t n;
} span;

struct field_def {
    const char *section; /* label before the ':' */
    const char *key;     /* key of key=value; NULL for "Label: N" lines */
    const char *json_key;
    const char *label;
    bool counter;
};

/* Indexed by enum gdu_nvfs_field. */
static const struct field_def fields[GDU_NVFS_FIELD_COUNT] = {
    [GDU_NVFS_SHADOW_BUF_MIB] = {"Active Shadow-Buffer", NULL, "shadow_buffer_mib",
                                 "Active Shadow-Buffer MiB", false},
    [GDU_NVFS_ACTIVE_PROCESS] = {"Active Process", NULL, "active_process", "Active Process", false},
    [GDU_NVFS_BATCHES_N] = {"Batches", "n", "batches.n", "Batches n", true},
    [GDU_NVFS_BATCHES_OK] = {"Batches", "ok", "batches.ok", "Batches ok", true},
    [GDU_NVFS_BATCHES_ERR] = {"Batches", "err", "batches.err", "Batches err", true},
    [GDU_NVFS_BATCHES_SUBMIT_LAT_US] = {"Batches", "Avg-Submit-Latency(usec)",
                                        "batches.avg_submit_latency_us",
                                        "Batches Avg-Submit-Latency(usec)", false},
    [GDU_NVFS_READS_N] = {"Reads", "n", "reads.n", "Reads n", true},
    [GDU_NVFS_READS_OK] = {"Reads", "ok", "reads.ok", "Reads ok", true},
    [GDU_NVFS_READS_ERR] = {"Reads", "err", "reads.err", "Reads err", true},
    [GDU_NVFS_READS_MIB] = {"Reads", "readMiB", "reads.mib", "Reads readMiB", true},
    [GDU_NVFS_READS_IO_STATE_ERR] = {"Reads", "io_state_err", "reads.io_state_err",
                                     "Reads io_state_err", true},
    [GDU_NVFS_READS_BW_MIBS] = {"Reads", "Bandwidth(MiB/s)", "reads.bandwidth_mib_s",
                                "Reads Bandwidth(MiB/s)", false},
    [GDU_NVFS_READS_LAT_US] = {"Reads", "Avg-Latency(usec)", "reads.avg_latency_us",
                               "Reads Avg-Latency(usec)", false},
    [GDU_NVFS_SPARSE_N] = {"Sparse Reads", "n", "sparse_reads.n", "Sparse Reads n", true},
    [GDU_NVFS_SPARSE_IO] = {"Sparse Reads", "io", "sparse_reads.io", "Sparse Reads io", true},
    [GDU_NVFS_SPARSE_HOLES] = {"Sparse Reads", "holes", "sparse_reads.holes", "Sparse Reads holes",
                               true},
    [GDU_NVFS_SPARSE_PAGES] = {"Sparse Reads", "pages", "sparse_reads.pages", "Sparse Reads pages",
                               true},
    [GDU_NVFS_WRITES_N] = {"Writes", "n", "writes.n", "Writes n", true},
    [GDU_NVFS_WRITES_OK] = {"Writes", "ok", "writes.ok", "Writes ok", true},
    [GDU_NVFS_WRITES_ERR] = {"Writes", "err", "writes.err", "Writes err", true},
    [GDU_NVFS_WRITES_MIB] = {"Writes", "writeMiB", "writes.mib", "Writes writeMiB", true},
    [GDU_NVFS_WRITES_IO_STATE_ERR] = {"Writes", "io_state_err", "writes.io_state_err",
                                      "Writes io_state_err", true},
    [GDU_NVFS_WRITES_PG_CACHE] = {"Writes", "pg-cache", "writes.pg_cache", "Writes pg-cache", true},
    [GDU_NVFS_WRITES_PG_CACHE_FAIL] = {"Writes", "pg-cache-fail", "writes.pg_cache_fail",
                                       "Writes pg-cache-fail", true},
    [GDU_NVFS_WRITES_PG_CACHE_EIO] = {"Writes", "pg-cache-eio", "writes.pg_cache_eio",
                                      "Writes pg-cache-eio", true},
    [GDU_NVFS_WRITES_BW_MIBS] = {"Writes", "Bandwidth(MiB/s)", "writes.bandwidth_mib_s",
                                 "Writes Bandwidth(MiB/s)", false},
    [GDU_NVFS_WRITES_LAT_US] = {"Writes", "Avg-Latency(usec)", "writes.avg_latency_us",
                                "Writes Avg-Latency(usec)", false},
    [GDU_NVFS_MMAP_N] = {"Mmap", "n", "mmap.n", "Mmap n", true},
    [GDU_NVFS_MMAP_OK] = {"Mmap", "ok", "mmap.ok", "Mmap ok", true},
    [GDU_NVFS_MMAP_ERR] = {"Mmap", "err", "mmap.err", "Mmap err", true},
    [GDU_NVFS_MMAP_MUNMAP] = {"Mmap", "munmap", "mmap.munmap", "Mmap munmap", true},
    [GDU_NVFS_BAR1_N] = {"Bar1-map", "n", "bar1_map.n", "Bar1-map n", true},
    [GDU_NVFS_BAR1_OK] = {"Bar1-map", "ok", "bar1_map.ok", "Bar1-map ok", true},
    [GDU_NVFS_BAR1_ERR] = {"Bar1-map", "err", "bar1_map.err", "Bar1-map err", true},
    [GDU_NVFS_BAR1_FREE] = {"Bar1-map", "free", "bar1_map.free", "Bar1-map free", true},
    [GDU_NVFS_BAR1_CALLBACKS] = {"Bar1-map", "callbacks", "bar1_map.callbacks",
                                 "Bar1-map callbacks", true},
    [GDU_NVFS_BAR1_ACTIVE] = {"Bar1-map", "active", "bar1_map.active", "Bar1-map active", false},
    [GDU_NVFS_BAR1_DELAY_FREES] = {"Bar1-map", "delay-frees", "bar1_map.delay_frees",
                                   "Bar1-map delay-frees", true},
    [GDU_NVFS_ERROR_CPU_GPU_PAGES] = {"Error", "cpu-gpu-pages", "error.cpu_gpu_pages",
                                      "Error cpu-gpu-pages", true},
    [GDU_NVFS_ERROR_SG_EXT] = {"Error", "sg-ext", "error.sg_ext", "Error sg-ext", true},
    [GDU_NVFS_ERROR_DMA_MAP] = {"Error", "dma-map", "error.dma_map", "Error dma-map", true},
    [GDU_NVFS_ERROR_DMA_REF] = {"Error", "dma-ref", "error.dma_ref", "Error dma-ref", true},
    [GDU_NVFS_OPS_READ] = {"Ops", "Read", "ops.read", "Ops Read", false},
    [GDU_NVFS_OPS_WRITE] = {"Ops", "Write", "ops.write", "Ops Write", false},
    [GDU_NVFS_OPS_BATCHIO] = {"Ops", "BatchIO", "ops.batchio", "Ops BatchIO", false},
};

const char *gdu_nvfs_field_key(enum gdu_nvfs_field f)
{
    return (unsigned)f < GDU_NVFS_FIELD_COUNT ? fields[f].json_key : "unknown";
}

const char *gdu_nvfs_field_label(enum gdu_nvfs_field f)
{
    return (unsigned)f < GDU_NVFS_FIELD_COUNT ? fields[f].label : "unknown";
}

bool gdu_nvfs_field_is_counter(enum gdu_nvfs_field f)
{
    return (unsigned)f < GDU_NVFS_FIELD_COUNT && fields[f].counter;
}

/* ---- span helpers ---- */

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static span trim(span s)
{
    while (s.n > 0 && is_space(s.p[0])) {
        s.p++;
        s.n--;
    }
    while (s.n > 0 && is_space(s.p[s.n - 1]))
        s.n--;
    return s;
}

static bool span_eq(span s, const char *lit)
{
    size_t l = strlen(lit);
    return s.n == l && memcmp(s.p, lit, l) == 0;
}

static bool span_starts(span s, const char *lit)
{
    size_t l = strlen(lit);
    return s.n >= l && memcmp(s.p, lit, l) == 0;
}

static span span_from(span s, size_t off)
{
    return off >= s.n ? (span){s.p + s.n, 0} : (span){s.p + off, s.n - off};
}

/* Index of the first c in s, or s.n. */
static size_t span_find(span s, char c)
{
    const char *hit = s.n ? memchr(s.p, c, s.n) : NULL;
    return hit ? (size_t)(hit - s.p) : s.n;
}

/* Index of the first occurrence of lit in s, or s.n. */
static size_t span_find_str(span s, const char *lit)
{
    size_t l = strlen(lit);
    for (size_t i = 0; l <= s.n && i <= s.n - l; i++)
        if (memcmp(s.p + i, lit, l) == 0)
            return i;
    return s.n;
}

/* Next whitespace-separated token of *rest; empty span at the end. */
static span next_token(span *rest)
{
    span s = *rest;
    size_t i = 0;
    while (i < s.n && is_space(s.p[i]))
        i++;
    size_t start = i;
    while (i < s.n && !is_space(s.p[i]))
        i++;
    *rest = span_from(s, i);
    return (span){s.p + start, i - start};
}

/* Strict unsigned decimal: digits only, no overflow. */
static bool parse_u64(span s, uint64_t *out)
{
    s = trim(s);
    if (s.n == 0)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < s.n; i++) {
        if (s.p[i] < '0' || s.p[i] > '9')
            return false;
        unsigned d = (unsigned)(s.p[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

/* Copies s as printable ASCII (anything else becomes '?'), truncated to fit. */
static void copy_text(char *dst, size_t cap, span s)
{
    size_t n = s.n < cap - 1 ? s.n : cap - 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s.p[i];
        dst[i] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    dst[n] = '\0';
}

static enum gdu_nvfs_flag parse_flag(span s)
{
    s = trim(s);
    if (span_eq(s, "True") || span_eq(s, "Enabled"))
        return GDU_NVFS_YES;
    if (span_eq(s, "False") || span_eq(s, "Disabled"))
        return GDU_NVFS_NO;
    return GDU_NVFS_UNKNOWN;
}

/* ---- line parsers ---- */

static bool section_matches(const char *section, span label)
{
    /* "Active Shadow-Buffer (MiB)" and older "(MB)" name the same field. */
    if (strcmp(section, "Active Shadow-Buffer") == 0)
        return span_starts(label, section);
    return span_eq(label, section);
}

static bool known_section(span label)
{
    for (size_t f = 0; f < GDU_NVFS_FIELD_COUNT; f++)
        if (section_matches(fields[f].section, label))
            return true;
    return false;
}

static void set_field(gdu_nvfs_stats *st, size_t f, span value)
{
    uint64_t v;
    if (parse_u64(value, &v)) {
        st->value[f] = v;
        st->present[f] = true;
    } else {
        st->bad_values++;
    }
}

/* "Label : k=v k=v ..." or "Label: N" for a known label. */
static void parse_counters(gdu_nvfs_stats *st, span label, span rest)
{
    bool scalar = false;
    for (size_t f = 0; f < GDU_NVFS_FIELD_COUNT; f++) {
        if (section_matches(fields[f].section, label) && fields[f].key == NULL) {
            set_field(st, f, rest);
            scalar = true;
        }
    }
    if (scalar)
        return;
    for (span tok = next_token(&rest); tok.n > 0; tok = next_token(&rest)) {
        size_t eq = span_find(tok, '=');
        if (eq == tok.n) {
            st->unknown_lines++;
            continue;
        }
        span key = {tok.p, eq};
        span val = span_from(tok, eq + 1);
        bool known = false;
        for (size_t f = 0; f < GDU_NVFS_FIELD_COUNT && !known; f++) {
            if (fields[f].key && section_matches(fields[f].section, label) &&
                span_eq(key, fields[f].key)) {
                set_field(st, f, val);
                known = true;
            }
        }
        if (!known)
            st->unknown_lines++;
    }
}

static void set_gpu_value(gdu_nvfs_stats *st, span val, uint64_t *dst, bool *has)
{
    if (parse_u64(val, dst))
        *has = true;
    else
        st->bad_values++;
}

/* "GPU 0000:34:00.0  uuid:<uuid> : Registered_MiB=N Cache_MiB=N max_pinned_MiB=N [cross_root_port(%)=N]"
 * (older drivers: Registered_MB, Cache_MB, max_pinned_MB). */
static void parse_gpu_line(gdu_nvfs_stats *st, span rest)
{
    if (st->n_gpus >= GDU_NVFS_MAX_GPUS) {
        st->gpus_dropped++;
        return;
    }
    gdu_nvfs_gpu *g = &st->gpus[st->n_gpus];
    memset(g, 0, sizeof *g);
    span tok = next_token(&rest);
    if (tok.n == 0 || span_find(tok, '=') != tok.n || span_starts(tok, "uuid:")) {
        st->unknown_lines++;
        return;
    }
    copy_text(g->pci, sizeof g->pci, tok);
    for (tok = next_token(&rest); tok.n > 0; tok = next_token(&rest)) {
        if (span_starts(tok, "uuid:")) {
            copy_text(g->uuid, sizeof g->uuid, span_from(tok, 5));
            continue;
        }
        if (span_eq(tok, ":"))
            continue;
        size_t eq = span_find(tok, '=');
        span key = {tok.p, eq};
        span val = span_from(tok, eq + 1);
        if (eq == tok.n)
            st->unknown_lines++;
        else if (span_eq(key, "Registered_MiB") || span_eq(key, "Registered_MB"))
            set_gpu_value(st, val, &g->registered_mib, &g->has_registered);
        else if (span_eq(key, "Cache_MiB") || span_eq(key, "Cache_MB"))
            set_gpu_value(st, val, &g->cache_mib, &g->has_cache);
        else if (span_eq(key, "max_pinned_MiB") || span_eq(key, "max_pinned_MB"))
            set_gpu_value(st, val, &g->max_pinned_mib, &g->has_max_pinned);
        else if (span_eq(key, "cross_root_port(%)")) {
            uint64_t v;
            if (parse_u64(val, &v) && v <= UINT32_MAX) {
                g->cross_root_port_pct = (uint32_t)v;
                g->has_cross_root_port = true;
            } else {
                st->bad_values++;
            }
        } else
            st->unknown_lines++;
    }
    st->n_gpus++;
}

/* "NVFS statistics(ver: 4.0)" or "NVFS statistics(ver:1.0)". */
static void parse_stats_version(gdu_nvfs_stats *st, span line)
{
    size_t at = span_find_str(line, "ver:");
    span v = trim(span_from(line, at + 4));
    size_t digits = 0;
    while (digits < v.n && v.p[digits] >= '0' && v.p[digits] <= '9')
        digits++;
    uint64_t major;
    if (at < line.n && digits <= 6 && parse_u64((span){v.p, digits}, &major))
        st->stats_version = (int)major;
    else
        st->bad_values++;
}

/* "NVFS Driver(version: 2.25.7)"; nvidia-fs 2.3 printed "2:3:1". */
static void parse_driver_version(gdu_nvfs_stats *st, span line)
{
    size_t at = span_find_str(line, "version:");
    if (at == line.n) {
        st->bad_values++;
        return;
    }
    span v = span_from(line, at + 8);
    v.n = span_find(v, ')');
    copy_text(st->driver_version, sizeof st->driver_version, trim(v));
    for (char *c = st->driver_version; *c; c++)
        if (*c == ':')
            *c = '.';
}

/* "IO stats: Enabled, peer IO stats: Disabled" */
static void parse_io_stats(gdu_nvfs_stats *st, span rest)
{
    size_t comma = span_find(rest, ',');
    st->io_stats = parse_flag((span){rest.p, comma});
    span peer = span_from(rest, comma + 1);
    size_t colon = span_find(peer, ':');
    if (colon < peer.n)
        st->peer_stats = parse_flag(span_from(peer, colon + 1));
}

static void parse_line(gdu_nvfs_stats *st, span line)
{
    line = trim(line);
    if (line.n == 0)
        return;
    if (span_starts(line, "GPU") && line.n > 3 && is_space(line.p[3])) {
        parse_gpu_line(st, span_from(line, 3));
        return;
    }
    if (span_starts(line, "NVFS statistics")) {
        parse_stats_version(st, line);
        return;
    }
    if (span_starts(line, "NVFS Driver")) {
        parse_driver_version(st, line);
        return;
    }
    size_t colon = span_find(line, ':');
    if (colon == line.n) {
        st->unknown_lines++;
        return;
    }
    span label = trim((span){line.p, colon});
    span rest = trim(span_from(line, colon + 1));
    if (span_eq(label, "GDS Version"))
        copy_text(st->gds_version, sizeof st->gds_version, rest);
    else if (span_eq(label, "Mellanox PeerDirect Supported"))
        st->peerdirect = parse_flag(rest);
    else if (span_eq(label, "IO stats"))
        parse_io_stats(st, rest);
    else if (span_eq(label, "Logging level"))
        copy_text(st->logging_level, sizeof st->logging_level, rest);
    else if (known_section(label))
        parse_counters(st, label, rest);
    else
        st->unknown_lines++;
}

int gdu_nvfs_stats_parse(const char *text, size_t len, gdu_nvfs_stats *out)
{
    memset(out, 0, sizeof *out);
    out->stats_version = -1;
    out->peerdirect = out->io_stats = out->peer_stats = GDU_NVFS_UNKNOWN;
    span all = {text, text ? len : 0};
    while (all.n > 0) {
        size_t nl = span_find(all, '\n');
        parse_line(out, (span){all.p, nl});
        all = span_from(all, nl + 1);
    }
    bool any = out->stats_version >= 0 || out->n_gpus > 0;
    for (size_t f = 0; f < GDU_NVFS_FIELD_COUNT && !any; f++)
        any = out->present[f];
    return any ? 0 : -EINVAL;
}

/* The stats file at path, opened for reading, or -errno with why. The path
 * may be anyone's (GDUNLOCK_NVFS_STATS): only a regular file is opened
 * (procfs's is one), without blocking, so a FIFO cannot hang us. */
static int open_stats(const char *path, char *why, size_t why_len)
{
    struct stat st;
    int fd = -1, e = 0;
    if (stat(path, &st) != 0)
        e = errno;
    else if (!S_ISREG(st.st_mode))
        e = EINVAL;
    else if ((fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)) < 0)
        e = errno;
    else if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        fd = -1;
        e = EINVAL;
    }
    if (fd < 0) {
        char shown[128];
        gdu_text_shorten(path, 100, shown, sizeof shown);
        if (e == ENOENT)
            snprintf(why, why_len, "%s does not exist: nvidia-fs is not loaded", shown);
        else if (e == EINVAL)
            snprintf(why, why_len, "%s is not a regular file: not read", shown);
        else
            snprintf(why, why_len, "cannot open %s: %s", shown, strerror(e));
        return -e;
    }
    return fd;
}

int gdu_nvfs_stats_read(const char *path, gdu_nvfs_stats *out, char *why, size_t why_len)
{
    memset(out, 0, sizeof *out);
    out->stats_version = -1;
    out->peerdirect = out->io_stats = out->peer_stats = GDU_NVFS_UNKNOWN;
    int fd = open_stats(path, why, why_len);
    if (fd < 0)
        return fd;
    /* procfs reports size 0: read until EOF, up to a cap. */
    char *buf = malloc(GDU_NVFS_STATS_MAX_BYTES);
    if (!buf) {
        close(fd);
        snprintf(why, why_len, "out of memory reading %s", path);
        return -ENOMEM;
    }
    size_t len = 0;
    int rc = 0;
    while (len < GDU_NVFS_STATS_MAX_BYTES) {
        ssize_t r = read(fd, buf + len, GDU_NVFS_STATS_MAX_BYTES - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = -errno;
            snprintf(why, why_len, "cannot read %s: %s", path, strerror(errno));
            break;
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    close(fd);
    if (rc == 0) {
        rc = gdu_nvfs_stats_parse(buf, len, out);
        if (rc != 0)
            snprintf(why, why_len, "%s is not in a known nvidia-fs stats format", path);
    }
    free(buf);
    return rc;
}

static int64_t saturating_diff(uint64_t after, uint64_t before)
{
    if (after >= before) {
        uint64_t d = after - before;
        return d > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)d;
    }
    uint64_t d = before - after;
    return d > (uint64_t)INT64_MAX ? -INT64_MAX : -(int64_t)d;
}

static bool same_gpu(const gdu_nvfs_gpu *g, const gdu_nvfs_gpu_delta *d)
{
    if (g->uuid[0] && d->uuid[0])
        return strcmp(g->uuid, d->uuid) == 0;
    return strcmp(g->pci, d->pci) == 0;
}

static gdu_nvfs_gpu_delta *gpu_slot(gdu_nvfs_delta *out, const gdu_nvfs_gpu *g)
{
    for (size_t i = 0; i < out->n_gpus; i++)
        if (same_gpu(g, &out->gpus[i]))
            return &out->gpus[i];
    if (out->n_gpus >= GDU_NVFS_MAX_GPUS)
        return NULL;
    gdu_nvfs_gpu_delta *d = &out->gpus[out->n_gpus++];
    memcpy(d->pci, g->pci, sizeof d->pci);
    memcpy(d->uuid, g->uuid, sizeof d->uuid);
    return d;
}

void gdu_nvfs_stats_delta(const gdu_nvfs_stats *before, const gdu_nvfs_stats *after,
                          gdu_nvfs_delta *out)
{
    memset(out, 0, sizeof *out);
    for (size_t f = 0; f < GDU_NVFS_FIELD_COUNT; f++) {
        if (!before->present[f] || !after->present[f])
            continue;
        out->present[f] = true;
        out->value[f] = saturating_diff(after->value[f], before->value[f]);
        if (fields[f].counter && after->value[f] < before->value[f])
            out->counters_reset = true;
    }
    for (size_t i = 0; i < before->n_gpus && i < GDU_NVFS_MAX_GPUS; i++) {
        gdu_nvfs_gpu_delta *d = gpu_slot(out, &before->gpus[i]);
        if (!d)
            break;
        d->in_before = true;
        d->registered_mib = saturating_diff(0, before->gpus[i].registered_mib);
        d->cache_mib = saturating_diff(0, before->gpus[i].cache_mib);
    }
    for (size_t i = 0; i < after->n_gpus && i < GDU_NVFS_MAX_GPUS; i++) {
        const gdu_nvfs_gpu *g = &after->gpus[i];
        gdu_nvfs_gpu_delta *d = gpu_slot(out, g);
        if (!d)
            break;
        uint64_t reg_before = 0, cache_before = 0;
        for (size_t j = 0; j < before->n_gpus && j < GDU_NVFS_MAX_GPUS; j++) {
            if (same_gpu(&before->gpus[j], d)) {
                reg_before = before->gpus[j].registered_mib;
                cache_before = before->gpus[j].cache_mib;
                break;
            }
        }
        d->in_after = true;
        d->registered_mib = saturating_diff(g->registered_mib, reg_before);
        d->cache_mib = saturating_diff(g->cache_mib, cache_before);
        d->registered_mib_after = g->registered_mib;
        d->cache_mib_after = g->cache_mib;
    }
}
