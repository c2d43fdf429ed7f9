/* The answers to the GPUDirect RDMA attributes: the device's
 * (CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED), which libcufile reads
 * through libcuda and fastsafetensors through cudart, and each buffer's
 * (CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE), which libcufile asks in
 * cuFileBufRegister. They turn GPUDirect Storage off where these read 0, as
 * on GeForce. On a GPU the shim unlocks for nvidia-fs (for a buffer: one it
 * registered there) the shim answers 1. The libraries that read them for
 * GPUDirect RDMA with a network adapter (NCCL, ibverbs programs) keep
 * libcuda's answer unless the process runs under `gdunlock run --rdma`: their
 * NIC pins the same registrations through nvidia-peermem, whose lookup is
 * the one nvidia-fs uses (docs/rdma-model.md), but no GeForce has shown that
 * path working yet, so it is opt-in. */
#include "shim/shim_state.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

bool gdu_shim_caller_is_rdma_network(const char *caller)
{
    static const char *const prefixes[] = {
        "libnccl", /* NCCL and its net plugins (libnccl-net*.so) */
        "libnvshmem", "libucp",     "libuct",    "libucs",  "libfabric", "libmpi",
        "libgdrapi",  "libibverbs", "librdmacm", "libmlx5", "libhcoll",
    };
    if (caller == NULL)
        return false;
    const char *base = strrchr(caller, '/');
    base = base != NULL ? base + 1 : caller;
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (strncmp(base, prefixes[i], strlen(prefixes[i])) == 0)
            return true;
    return false;
}

static const gdu_gpu_stats *gpu_by_pci(const gdu_shim *s, const char *pci)
{
    for (unsigned i = 0; pci != NULL && i < GDU_SHIM_GPU_SLOTS; i++)
        if (s->gpus[i].seen && strcmp(s->gpus[i].pci, pci) == 0)
            return &s->gpus[i];
    return NULL;
}

static gdu_tpp_mode mode_by_pci(const gdu_shim *s, const char *pci)
{
    const gdu_gpu_stats *g = gpu_by_pci(s, pci);
    return g != NULL ? g->mode : GDU_TPP_NONE; /* not seen yet: unlocked at its first allocation */
}

/* Counts one query whose value (after the test mode) is 0 and says whether
 * the shim answers 1: where the unlock holds for it and the caller is no RDMA
 * networking library, or rdma_network is on. Under the lock. */
static bool answers(gdu_shim *s, gdu_attr_answers *a, bool unlocked, const char *caller)
{
    bool network = gdu_shim_caller_is_rdma_network(caller);
    bool answer = s->cfg.rdma_attr_answer && unlocked && !s->passive && !s->refused &&
                  s->layout_known && (!network || s->cfg.rdma_network);
    a->asked++;
    if (answer) {
        a->answered++;
        if (network)
            a->answered_for_network++;
    } else {
        a->kept++;
        if (network && a->kept_for[0] == '\0') {
            const char *base = strrchr(caller, '/');
            snprintf(a->kept_for, sizeof a->kept_for, "%s", base != NULL ? base + 1 : caller);
        }
    }
    return answer;
}

int gdu_shim_rdma_attribute(gdu_shim *s, int libcuda_value, const char *pci, const char *caller)
{
    int value = s->cfg.test_rdma_attr_zero ? 0 : libcuda_value;
    if (value != 0)
        return value; /* a GPU with GPUDirect RDMA natively is left as it is */
    pthread_mutex_lock(&s->lock);
    gdu_tpp_mode mode = mode_by_pci(s, pci);
    bool answer =
        answers(s, &s->rdma_device_attr, mode == GDU_TPP_NONE || mode == GDU_TPP_UNLOCKED, caller);
    pthread_mutex_unlock(&s->lock);
    if (answer)
        gdu_shim_log(s, GDU_LOG_DEBUG,
                     "GPUDirect RDMA attribute of GPU %s: 1 for %s (the storage unlock)",
                     pci != NULL ? pci : "?", caller != NULL ? caller : "an unknown caller");
    return answer ? 1 : value;
}

int gdu_shim_dma_buf_attribute(gdu_shim *s, int libcuda_value, const char *pci, const char *caller)
{
    int value = s->cfg.test_rdma_attr_zero ? 0 : libcuda_value;
    if (value != 0 || !s->cfg.rdma_network)
        return value;
    pthread_mutex_lock(&s->lock);
    const gdu_gpu_stats *g = gpu_by_pci(s, pci);
    gdu_tpp_mode mode = g != NULL ? g->mode : GDU_TPP_NONE;
    bool exports = (mode == GDU_TPP_NONE || mode == GDU_TPP_UNLOCKED) &&
                   (g == NULL || !g->dmabuf_unsupported) && s->ops.open_gpu_file != NULL;
    bool answer = answers(s, &s->dma_buf_attr, exports, caller);
    pthread_mutex_unlock(&s->lock);
    if (answer)
        gdu_shim_log(s, GDU_LOG_DEBUG, "DMA-BUF attribute of GPU %s: 1 for %s (the shim's export)",
                     pci != NULL ? pci : "?", caller != NULL ? caller : "an unknown caller");
    return answer ? 1 : value;
}

/* Whether the GPU VA ptr lies in memory registered with an NV503C of the
 * shim's own: what nvidia-fs finds there. Under the lock. */
static bool registered_by_unlock(gdu_shim *s, uint64_t ptr)
{
    const gdu_mapping *m = gdu_shim_mapping_at(s, ptr);
    const gdu_obj *mem = m != NULL ? gdu_shim_obj(s, m->client, m->memory) : NULL;
    const gdu_obj *tpp =
        mem != NULL && mem->reg_tpp != 0 ? gdu_shim_obj(s, mem->client, mem->reg_tpp) : NULL;
    return tpp != NULL && tpp->tpp_owned && ptr >= mem->reg_address &&
           ptr - mem->reg_address < mem->reg_size;
}

int gdu_shim_rdma_pointer_attribute(gdu_shim *s, int libcuda_value, uint64_t ptr,
                                    const char *caller)
{
    int value = s->cfg.test_rdma_attr_zero ? 0 : libcuda_value;
    if (value != 0)
        return value;
    pthread_mutex_lock(&s->lock);
    bool answer = answers(s, &s->rdma_pointer_attr, registered_by_unlock(s, ptr), caller);
    pthread_mutex_unlock(&s->lock);
    if (answer)
        gdu_shim_log(s, GDU_LOG_DEBUG,
                     "GPUDirect RDMA capability of buffer 0x%llx: 1 for %s (registered by the "
                     "unlock)",
                     (unsigned long long)ptr, caller != NULL ? caller : "an unknown caller");
    return answer ? 1 : value;
}

bool gdu_shim_tracing(const gdu_shim *s) { return s->cfg.log_level >= GDU_LOG_DEBUG; }

void gdu_shim_trace(gdu_shim *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    gdu_shim_vlog(s, GDU_LOG_DEBUG, fmt, ap);
    va_end(ap);
}
