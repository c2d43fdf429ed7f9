#include "p2p/p2p_gpus.h"

#include <stdio.h>
#include <string.h>

#define CHECK(call, what)                                                                          \
    do {                                                                                           \
        gdu_CUresult r_ = (call);                                                                  \
        if (r_ != GDU_CUDA_SUCCESS) {                                                              \
            snprintf(why, why_len, "%s: %s", what, gdu_cuda_result_name(r_));                      \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

int gdu_p2p_gpu_query(const gdu_cuda *cu, int ordinal, gdu_p2p_gpu *out, char *why, size_t why_len)
{
    gdu_CUdevice dev;
    memset(out, 0, sizeof *out);
    out->ordinal = ordinal;
    CHECK(cu->cuDeviceGet(&dev, ordinal), "cuDeviceGet");
    CHECK(cu->cuDeviceGetName(out->name, sizeof out->name, dev), "cuDeviceGetName");
    CHECK(cu->cuDeviceGetPCIBusId(out->pci_bus_id, sizeof out->pci_bus_id, dev),
          "cuDeviceGetPCIBusId");
    size_t mem = 0;
    CHECK(cu->cuDeviceTotalMem(&mem, dev), "cuDeviceTotalMem");
    out->memory_bytes = mem;
    int v = 0;
    CHECK(cu->cuDeviceGetAttribute(&v, GDU_CU_ATTR_PCI_DOMAIN_ID, dev), "cuDeviceGetAttribute");
    out->domain = (unsigned)v;
    CHECK(cu->cuDeviceGetAttribute(&v, GDU_CU_ATTR_PCI_BUS_ID, dev), "cuDeviceGetAttribute");
    out->bus = (unsigned)v;
    CHECK(cu->cuDeviceGetAttribute(&v, GDU_CU_ATTR_PCI_DEVICE_ID, dev), "cuDeviceGetAttribute");
    out->device = (unsigned)v;
    CHECK(cu->cuDeviceGetAttribute(&out->cc_major, GDU_CU_ATTR_COMPUTE_CAPABILITY_MAJOR, dev),
          "cuDeviceGetAttribute");
    CHECK(cu->cuDeviceGetAttribute(&out->cc_minor, GDU_CU_ATTR_COMPUTE_CAPABILITY_MINOR, dev),
          "cuDeviceGetAttribute");
    return 0;
}

int gdu_p2p_cuda_pair_query(const gdu_cuda *cu, int src, int dst, gdu_p2p_cuda_pair *out, char *why,
                            size_t why_len)
{
    gdu_CUdevice s, d;
    memset(out, 0, sizeof *out);
    CHECK(cu->cuDeviceGet(&s, src), "cuDeviceGet");
    CHECK(cu->cuDeviceGet(&d, dst), "cuDeviceGet");
    if (s == d)
        return 0; /* CUDA defines no peer attributes of a device with itself */
    CHECK(cu->cuDeviceCanAccessPeer(&out->can_access, s, d), "cuDeviceCanAccessPeer");
    CHECK(
        cu->cuDeviceGetP2PAttribute(&out->performance_rank, GDU_CU_P2P_ATTR_PERFORMANCE_RANK, s, d),
        "cuDeviceGetP2PAttribute(PERFORMANCE_RANK)");
    CHECK(
        cu->cuDeviceGetP2PAttribute(&out->access_supported, GDU_CU_P2P_ATTR_ACCESS_SUPPORTED, s, d),
        "cuDeviceGetP2PAttribute(ACCESS_SUPPORTED)");
    CHECK(cu->cuDeviceGetP2PAttribute(&out->native_atomics, GDU_CU_P2P_ATTR_NATIVE_ATOMIC_SUPPORTED,
                                      s, d),
          "cuDeviceGetP2PAttribute(NATIVE_ATOMIC_SUPPORTED)");
    CHECK(cu->cuDeviceGetP2PAttribute(&out->cuda_array_access,
                                      GDU_CU_P2P_ATTR_CUDA_ARRAY_ACCESS_SUPPORTED, s, d),
          "cuDeviceGetP2PAttribute(CUDA_ARRAY_ACCESS_SUPPORTED)");
    return 0;
}
