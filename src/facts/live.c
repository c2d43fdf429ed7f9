#include "facts/live.h"

#include "cuda/cuda_api.h"
#include "cuda/cuda_ctx.h"
#include "cuda/cufile_api.h"
#include "rm/rm_bar1_info.h"
#include "rm/rm_p2p_caps.h"
#include "util/pci_addr.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

/* Each CUDA GPU's gpuId among the RM's attached GPUs, matched by PCI address. */
static void match_rm_ids(gdu_live *out, const gdu_rm_gpu *rm, size_t n)
{
    for (size_t g = 0; g < out->n_gpus; g++)
        for (size_t i = 0; i < n; i++) {
            char bdf[GDU_PCI_ADDR_SIZE];
            gdu_pci_addr_format(bdf, sizeof bdf, rm[i].domain, rm[i].bus, rm[i].device, 0);
            if (strcmp(out->gpus[g].bdf, bdf) == 0) {
                out->gpus[g].rm_known = true;
                out->gpus[g].rm_gpu_id = rm[i].gpu_id;
            }
        }
}

/* RM's BAR1 figures for each GPU it lists. */
static void collect_rm_bar1(gdu_rm_client *client, gdu_live *out)
{
    for (size_t i = 0; i < out->n_gpus; i++) {
        gdu_live_gpu *g = &out->gpus[i];
        gdu_rm_bar1 b;
        uint32_t status = 0;
        if (!g->rm_known)
            snprintf(g->rm_bar1_why, sizeof g->rm_bar1_why, "not among the RM's attached GPUs");
        else if (gdu_rm_bar1_query(client, g->rm_gpu_id, &b, &status, g->rm_bar1_why,
                                   sizeof g->rm_bar1_why) == 0) {
            g->rm_bar1_known = true;
            g->rm_bar1_total = b.total;
            g->rm_bar1_available = b.available;
            g->rm_static_known = b.static_known;
            g->rm_static_bar1 = b.static_enabled;
            g->rm_static_wc = b.write_combined;
            g->rm_static_size = b.static_size;
        }
    }
}

/* The RM's P2P caps for every pair and its BAR1 figures for every GPU. The
 * RM answers only for GPUs it has attached, so each GPU's primary context
 * is held meanwhile (its own BAR1 mappings are then counted as used). */
static void collect_rm(const gdu_cuda *cu, gdu_live *out)
{
    gdu_cuda_ctx held[GDU_LIVE_MAX_GPUS];
    for (size_t i = 0; i < out->n_gpus; i++)
        gdu_cuda_ctx_retain(cu, out->gpus[i].ordinal, &held[i], NULL, 0);
    gdu_rm_client client;
    gdu_rm_gpu rm[GDU_LIVE_MAX_GPUS];
    size_t n_rm = 0;
    char *why = out->rm_why;
    size_t why_len = sizeof out->rm_why;
    if (gdu_rm_client_open(&client, NULL, &gdu_rm_kernel_calls, why, why_len) == 0) {
        if (gdu_rm_attached_gpus(&client, rm, GDU_LIVE_MAX_GPUS, &n_rm, why, why_len) == 0) {
            match_rm_ids(out, rm, n_rm);
            for (size_t k = 0; k < out->n_pairs; k++) {
                gdu_live_pair *p = &out->pairs[k];
                const gdu_live_gpu *ga = gdu_live_gpu_by_ordinal(out, p->a);
                const gdu_live_gpu *gb = gdu_live_gpu_by_ordinal(out, p->b);
                if (!ga->rm_known || !gb->rm_known)
                    snprintf(why, why_len, "CUDA device %d is not among the RM's attached GPUs",
                             !ga->rm_known ? p->a : p->b);
                else if (gdu_rm_p2p_caps(&client, ga->rm_gpu_id, gb->rm_gpu_id, &p->rm, why,
                                         why_len) == 0)
                    p->rm_known = true;
            }
            collect_rm_bar1(&client, out);
        }
        gdu_rm_client_close(&client);
    }
    for (size_t i = 0; i < out->n_gpus; i++)
        gdu_cuda_ctx_release(cu, &held[i]);
}

static void collect_cuda(gdu_live *out)
{
    const gdu_cuda *cu = gdu_cuda_load(out->cuda_why, sizeof out->cuda_why);
    if (cu == NULL)
        return;
    out->cuda_ok = true;
    cu->cuDriverGetVersion(&out->cuda_version);
    int count = 0;
    if (cu->cuDeviceGetCount(&count) != GDU_CUDA_SUCCESS)
        count = 0;
    for (int i = 0; i < count && out->n_gpus < GDU_LIVE_MAX_GPUS; i++) {
        gdu_CUdevice dev;
        if (cu->cuDeviceGet(&dev, i) != GDU_CUDA_SUCCESS)
            continue;
        gdu_live_gpu *g = &out->gpus[out->n_gpus++];
        char bus_id[32] = "";
        size_t bytes = 0;
        g->ordinal = i;
        cu->cuDeviceGetName(g->name, (int)sizeof g->name, dev);
        cu->cuDeviceGetPCIBusId(bus_id, (int)sizeof bus_id, dev);
        if (gdu_pci_addr_normalize(bus_id, g->bdf, sizeof g->bdf) != 0)
            snprintf(g->bdf, sizeof g->bdf, "%.15s", bus_id);
        if (cu->cuDeviceTotalMem(&bytes, dev) == GDU_CUDA_SUCCESS)
            g->total_mem = bytes;
        cu->cuDeviceGetAttribute(&g->cc_major, GDU_CU_ATTR_COMPUTE_CAPABILITY_MAJOR, dev);
        cu->cuDeviceGetAttribute(&g->cc_minor, GDU_CU_ATTR_COMPUTE_CAPABILITY_MINOR, dev);
    }
    for (size_t a = 0; a < out->n_gpus; a++)
        for (size_t b = 0; b < out->n_gpus; b++) {
            if (a == b || out->n_pairs >= GDU_LIVE_MAX_PAIRS)
                continue;
            gdu_live_pair *p = &out->pairs[out->n_pairs++];
            memset(p, 0, sizeof *p);
            p->a = out->gpus[a].ordinal;
            p->b = out->gpus[b].ordinal;
            p->can_access = p->performance_rank = p->access_supported = p->native_atomics =
                p->cuda_array_access = -1;
            gdu_CUdevice da, db;
            if (cu->cuDeviceGet(&da, p->a) != GDU_CUDA_SUCCESS ||
                cu->cuDeviceGet(&db, p->b) != GDU_CUDA_SUCCESS)
                continue;
            int v;
            if (cu->cuDeviceCanAccessPeer(&v, da, db) == GDU_CUDA_SUCCESS)
                p->can_access = v;
            const struct {
                int attribute, *out;
            } attrs[] = {
                {GDU_CU_P2P_ATTR_PERFORMANCE_RANK, &p->performance_rank},
                {GDU_CU_P2P_ATTR_ACCESS_SUPPORTED, &p->access_supported},
                {GDU_CU_P2P_ATTR_NATIVE_ATOMIC_SUPPORTED, &p->native_atomics},
                {GDU_CU_P2P_ATTR_CUDA_ARRAY_ACCESS_SUPPORTED, &p->cuda_array_access},
            };
            for (size_t k = 0; k < sizeof attrs / sizeof attrs[0]; k++)
                if (cu->cuDeviceGetP2PAttribute(&v, attrs[k].attribute, da, db) == GDU_CUDA_SUCCESS)
                    *attrs[k].out = v;
        }
    if (out->n_gpus > 0)
        collect_rm(cu, out);
}

/* "libcufile.so.1.15.1" -> "1.15.1"; nothing for a bare "libcufile.so.0". */
static void version_from_file_name(const char *path, char *out, size_t len)
{
    char real[PATH_MAX];
    const char *p = realpath(path, real) ? real : path;
    const char *so = strstr(p, ".so.");
    if (so != NULL && strchr(so + 4, '.') != NULL)
        snprintf(out, len, "%s", so + 4);
}

static void collect_cufile(gdu_live *out)
{
    const char *env = getenv("CUFILE_ENV_PATH_JSON");
    if (env != NULL)
        snprintf(out->cufile_env_json, sizeof out->cufile_env_json, "%s", env);
    const gdu_cufile *cf = gdu_cufile_load(out->cufile_why, sizeof out->cufile_why);
    if (cf == NULL)
        return;
    out->cufile_found = true;
    snprintf(out->cufile_path, sizeof out->cufile_path, "%s", cf->path);
    /* The file name (libcufile.so.1.15.1) is exact; cuFileGetVersion's packing
     * (1150 for 1.15.0) cannot carry a patch level above 9. */
    version_from_file_name(cf->path, out->cufile_version, sizeof out->cufile_version);
    int packed = 0;
    if (out->cufile_version[0] == '\0' && cf->cuFileGetVersion != NULL &&
        cf->cuFileGetVersion(&packed).err == GDU_CU_FILE_SUCCESS && packed > 0)
        snprintf(out->cufile_version, sizeof out->cufile_version, "%d.%d.%d", packed / 1000,
                 packed % 1000 / 10, packed % 10);
}

void gdu_live_probe_path(const char *path, gdu_live_path *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->path, sizeof out->path, "%s", path);
    out->o_direct = -1;
    struct statfs sfs;
    if (statfs(path, &sfs) == 0)
        out->fs_magic = (unsigned long long)sfs.f_type;
    struct stat st;
    if (stat(path, &st) != 0) {
        snprintf(out->o_direct_error, sizeof out->o_direct_error, "%s", strerror(errno));
        return;
    }
    /* A FIFO would block the open, a device is no file on a filesystem. */
    if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
        snprintf(out->o_direct_error, sizeof out->o_direct_error,
                 "not tried: not a regular file or directory");
        return;
    }
    int fd = S_ISDIR(st.st_mode) ? open(path, O_TMPFILE | O_RDWR | O_DIRECT | O_CLOEXEC, 0600)
                                 : open(path, O_RDONLY | O_DIRECT | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) {
        out->o_direct = 1;
        close(fd);
        return;
    }
    int e = errno;
    snprintf(out->o_direct_error, sizeof out->o_direct_error, "%s", strerror(e));
    /* EINVAL is the kernel's answer for a filesystem without direct I/O;
     * other errors (permissions, read-only) leave the question open. */
    if (e == EINVAL)
        out->o_direct = 0;
}

/* Whether the kernel was built with PCI P2PDMA, by one of its symbols (the
 * check NVIDIA's GDS troubleshooting guide gives): /proc/kallsyms is too
 * large to capture, so the answer is. Symbol names are readable by anyone. */
static int kallsyms_p2pdma(void)
{
    FILE *f = fopen("/proc/kallsyms", "re");
    if (f == NULL)
        return -1;
    char line[512];
    int found = 0;
    while (!found && fgets(line, sizeof line, f) != NULL) {
        const char *name = strrchr(line, ' ');
        found = name != NULL && strncmp(name + 1, "p2pdma_pgmap_ops", 16) == 0 &&
                (name[17] == '\n' || name[17] == '\0' || name[17] == '\t');
    }
    fclose(f);
    return found;
}

void gdu_live_collect(gdu_live *out, const char *const *paths, size_t n_paths)
{
    memset(out, 0, sizeof *out);
    out->origin = GDU_LIVE_COLLECTED;
    out->euid = (int)geteuid();
    out->kernel_p2pdma = kallsyms_p2pdma();
    collect_cuda(out);
    collect_cufile(out);
    for (size_t i = 0; i < n_paths && out->n_paths < GDU_LIVE_MAX_PATHS; i++)
        gdu_live_probe_path(paths[i], &out->paths[out->n_paths++]);
}

const gdu_live_gpu *gdu_live_gpu_by_bdf(const gdu_live *live, const char *bdf)
{
    for (size_t i = 0; i < live->n_gpus; i++)
        if (strcmp(live->gpus[i].bdf, bdf) == 0)
            return &live->gpus[i];
    return NULL;
}

const gdu_live_gpu *gdu_live_gpu_by_ordinal(const gdu_live *live, int ordinal)
{
    for (size_t i = 0; i < live->n_gpus; i++)
        if (live->gpus[i].ordinal == ordinal)
            return &live->gpus[i];
    return NULL;
}

const gdu_live_pair *gdu_live_pair_find(const gdu_live *live, int a, int b)
{
    for (size_t i = 0; i < live->n_pairs; i++)
        if (live->pairs[i].a == a && live->pairs[i].b == b)
            return &live->pairs[i];
    return NULL;
}

const gdu_live_path *gdu_live_path_find(const gdu_live *live, const char *path)
{
    for (size_t i = 0; i < live->n_paths; i++)
        if (strcmp(live->paths[i].path, path) == 0)
            return &live->paths[i];
    return NULL;
}
