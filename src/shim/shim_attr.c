/* The answer to CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED. libcufile
 * reads it through libcuda and fastsafetensors through cudart, and both turn
 * GPUDirect Storage off where it is 0, as it is on GeForce. On a GPU the shim
 * unlocks for nvidia-fs it answers 1, but not to the libraries that read it
 * for GPUDirect RDMA with a network adapter: the unlock does not make that
 * path work, so they keep libcuda's answer. */
#include "shim/shim_state.h"

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

static gdu_tpp_mode mode_by_pci(const gdu_shim *s, const char *pci)
{
    if (pci == NULL)
        return GDU_TPP_NONE;
    for (unsigned i = 0; i < GDU_SHIM_GPU_SLOTS; i++)
        if (s->gpus[i].seen && strcmp(s->gpus[i].pci, pci) == 0)
            return s->gpus[i].mode;
    return GDU_TPP_NONE; /* not seen yet: unlocked at its first allocation */
}

int gdu_shim_rdma_attribute(gdu_shim *s, int libcuda_value, const char *pci, const char *caller)
{
    int value = s->cfg.test_rdma_attr_zero ? 0 : libcuda_value;
    if (value != 0)
        return value; /* a GPU with GPUDirect RDMA natively is left as it is */
    pthread_mutex_lock(&s->lock);
    gdu_tpp_mode mode = mode_by_pci(s, pci);
    bool unlockable = !s->passive && !s->refused && s->layout_known &&
                      (mode == GDU_TPP_NONE || mode == GDU_TPP_UNLOCKED);
    bool network = gdu_shim_caller_is_rdma_network(caller);
    bool answer = s->cfg.rdma_attr_answer && unlockable && !network;
    s->rdma_attr_asked++;
    if (answer) {
        s->rdma_attr_answered++;
    } else {
        s->rdma_attr_kept++;
        if (network && s->rdma_attr_kept_for[0] == '\0') {
            const char *base = strrchr(caller, '/');
            snprintf(s->rdma_attr_kept_for, sizeof s->rdma_attr_kept_for, "%s",
                     base != NULL ? base + 1 : caller);
        }
    }
    pthread_mutex_unlock(&s->lock);
    if (answer)
        gdu_shim_log(s, GDU_LOG_DEBUG,
                     "GPUDirect RDMA attribute of GPU %s: 1 for %s (the storage unlock)",
                     pci != NULL ? pci : "?", caller != NULL ? caller : "an unknown caller");
    return answer ? 1 : value;
}
