/* uvm_device_p2p: UVM_ALLOC_DEVICE_P2P (cuFile's P2PDMA route) on a real
 * cuMemAlloc buffer of GPU 0, on each /dev/nvidia-uvm file the process has
 * (libcuda's; the one holding its VA space answers, others say
 * NV_ERR_ILLEGAL_ACTION). With the shim preloaded its test query gives the
 * buffer's RM handles; without, they are 0 (UVM checks them only after the
 * GPU's P2PDMA pages, so the status is the same). The source (580.142,
 * uvm_va_range_device_p2p.c:523-548) predicts NV_ERR_NOT_SUPPORTED on a
 * kernel without CONFIG_PCI_P2PDMA (a PCIe GPU's P2PDMA pages are never
 * made: uvm_pmm_gpu.c:3541-3560); a wrong block layout would read as
 * NV_ERR_INVALID_ARGUMENT (range) or NV_ERR_INVALID_DEVICE (UUID).
 * Lines: HANDLES ..., UVMFD <fd> <status name>, then RESULT <status name>. */
#include "driverabi/nv_status.h"
#include "driverabi/uvm_abi.h"
#include "shim_gpu_common.h"

#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

int main(void)
{
    shim_gpu_init(0);
    gdu_CUdeviceptr ptr;
    const size_t size = 2u << 20;
    CK(cu->cuMemAlloc(&ptr, size));
    gdu_uvm_alloc_device_p2p_params p = {.base = ptr, .length = size, .rmCtrlFd = -1};
    gdu_CUresult (*uuid)(void *, gdu_CUdevice);
    *(void **)&uuid = dlsym(cu->handle, "cuDeviceGetUuid_v2");
    if (uuid == NULL)
        *(void **)&uuid = dlsym(cu->handle, "cuDeviceGetUuid");
    if (uuid == NULL || uuid(&p.gpuUuid, 0) != GDU_CUDA_SUCCESS) {
        printf("RESULT no-uuid\n");
        return 1;
    }
    int (*mapping)(unsigned long long, unsigned[3]);
    *(void **)&mapping = dlsym(RTLD_DEFAULT, "gdunlock_test_mapping");
    unsigned h[3] = {0, 0, (unsigned)-1};
    if (mapping != NULL && mapping(ptr, h) == 0) {
        p.hClient = h[0];
        p.hMemory = h[1];
        p.rmCtrlFd = (int)h[2];
    }
    printf("HANDLES client 0x%x memory 0x%x rmCtrlFd %d (%s)\n", p.hClient, p.hMemory, p.rmCtrlFd,
           mapping != NULL ? "from the shim" : "no shim");
    const char *result = "no-uvm-file";
    static char name[64];
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL) {
        char link[300], target[256];
        snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n <= 0)
            continue;
        target[n] = '\0';
        if (strcmp(target, "/dev/nvidia-uvm") != 0)
            continue;
        gdu_uvm_alloc_device_p2p_params q = p;
        q.rmStatus = 0xffffffffu;
        int r = ioctl(atoi(e->d_name), GDU_UVM_ALLOC_DEVICE_P2P, &q);
        printf("UVMFD %s ioctl %d status %s\n", e->d_name, r, gdu_nv_status_name(q.rmStatus));
        if (r == 0 && q.rmStatus != 0x16 /* NV_ERR_ILLEGAL_ACTION: no VA space on it */) {
            snprintf(name, sizeof name, "%s", gdu_nv_status_name(q.rmStatus));
            result = name;
        }
    }
    if (d != NULL)
        closedir(d);
    printf("RESULT %s\n", result);
    return 0;
}
