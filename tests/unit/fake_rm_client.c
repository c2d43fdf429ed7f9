#include "fake_rm_client.h"

#include "driverabi/nv503c.h"
#include "driverabi/nv_classes.h"
#include "driverabi/nv_escape.h"
#include "driverabi/nvos.h"
#include "driverabi/uvm_abi.h"

#include <stdlib.h>
#include <string.h>

void lc_setup(fake_rm *f)
{
    fake_rm_set_fd(f, FAKE_CTL_FD, GDU_FD_RM);
    fake_rm_set_fd(f, FAKE_UVM_FD, GDU_FD_UVM);
}

uint32_t lc_alloc(gdu_shim *s, uint32_t client, uint32_t parent, uint32_t handle, uint32_t cls,
                  void *params)
{
    gdu_nvos64 p = {.hRoot = client,
                    .hObjectParent = parent,
                    .hObjectNew = handle,
                    .hClass = cls,
                    .pAllocParms = (uint64_t)(uintptr_t)params};
    gdu_shim_ioctl(s, FAKE_CTL_FD, gdu_nv_ioctl_request(GDU_NV_ESC_RM_ALLOC, sizeof p), &p);
    return p.status;
}

uint32_t lc_free(gdu_shim *s, uint32_t client, uint32_t parent, uint32_t handle)
{
    gdu_nvos00 p = {.hRoot = client, .hObjectParent = parent, .hObjectOld = handle};
    gdu_shim_ioctl(s, FAKE_CTL_FD, gdu_nv_ioctl_request(GDU_NV_ESC_RM_FREE, sizeof p), &p);
    return p.status;
}

uint32_t lc_control(gdu_shim *s, uint32_t client, uint32_t object, uint32_t cmd, void *params,
                    uint32_t size)
{
    gdu_nvos54 p = {.hClient = client,
                    .hObject = object,
                    .cmd = cmd,
                    .params = (uint64_t)(uintptr_t)params,
                    .paramsSize = size};
    gdu_shim_ioctl(s, FAKE_CTL_FD, gdu_nv_ioctl_request(GDU_NV_ESC_RM_CONTROL, sizeof p), &p);
    return p.status;
}

uint32_t lc_map(gdu_shim *s, uint32_t client, uint32_t memory, uint64_t base, uint64_t length,
                uint64_t offset)
{
    gdu_uvm_map_external_params_256 *p = calloc(1, sizeof *p);
    p->base = base;
    p->length = length;
    p->offset = offset;
    p->gpuAttributesCount = 1;
    p->rmCtrlFd = FAKE_CTL_FD;
    p->hClient = client;
    p->hMemory = memory;
    gdu_shim_ioctl(s, FAKE_UVM_FD, GDU_UVM_MAP_EXTERNAL_ALLOCATION, p);
    uint32_t st = p->rmStatus;
    free(p);
    return st;
}

uint32_t lc_unmap(gdu_shim *s, uint64_t base, uint64_t length)
{
    gdu_uvm_free_params p = {.base = base, .length = length};
    gdu_shim_ioctl(s, FAKE_UVM_FD, GDU_UVM_FREE, &p);
    return p.rmStatus;
}

uint32_t lc_uvm_register_vaspace(gdu_shim *s, uint32_t client, uint32_t vaspace)
{
    gdu_uvm_register_gpu_vaspace_params p = {
        .rmCtrlFd = FAKE_CTL_FD, .hClient = client, .hVaSpace = vaspace};
    gdu_shim_ioctl(s, FAKE_UVM_FD, GDU_UVM_REGISTER_GPU_VASPACE, &p);
    return p.rmStatus;
}

uint32_t lc_unmap_external(gdu_shim *s, uint64_t base, uint64_t length)
{
    gdu_uvm_unmap_external_params p = {.base = base, .length = length};
    gdu_shim_ioctl(s, FAKE_UVM_FD, GDU_UVM_UNMAP_EXTERNAL, &p);
    return p.rmStatus;
}

int lc_pin(fake_rm *f, uint64_t va, uint64_t size)
{
    gdu_pin_verdict v;
    fake_rm_pin_lookup(f, va, size, &v);
    return (int)v.rule;
}

void lc_make_gpus(gdu_shim *s, fake_rm *f, uint32_t client, unsigned devices, lc_gpus *g)
{
    memset(g, 0, sizeof *g);
    g->client = client;
    fake_rm_next_client(f, client);
    lc_alloc(s, 0, 0, 0, GDU_NV01_ROOT_CLIENT, NULL);
    for (unsigned d = 0; d < devices; d++) {
        uint32_t base = 0x5c000100 + 0x10 * d;
        gdu_nv0080_alloc_params dp = {.deviceId = d};
        gdu_nv2080_alloc_params sp = {.subDeviceId = 0};
        g->device[d] = base;
        g->subdevice[d] = base + 1;
        g->vaspace[d][0] = base + 2;
        g->vaspace[d][1] = base + 3;
        lc_alloc(s, client, client, base, GDU_NV01_DEVICE_0, &dp);
        lc_alloc(s, client, base, base + 1, GDU_NV20_SUBDEVICE_0, &sp);
        lc_alloc(s, client, base, base + 2, GDU_FERMI_VASPACE_A, NULL);
        lc_alloc(s, client, base, base + 3, GDU_FERMI_VASPACE_A, NULL);
        lc_uvm_register_vaspace(s, client, base + 2); /* as libcuda does, before any mapping */
    }
}

uint32_t lc_alloc_mapped(gdu_shim *s, const lc_gpus *g, unsigned dev, uint32_t memory,
                         uint64_t base, uint64_t length)
{
    uint32_t st = lc_alloc(s, g->client, g->device[dev], memory, GDU_NV01_MEMORY_LOCAL_USER, NULL);
    return st != 0 ? st : lc_map(s, g->client, memory, base, length, 0);
}

uint32_t lc_free_mapped(gdu_shim *s, const lc_gpus *g, unsigned dev, uint32_t memory, uint64_t base,
                        uint64_t length)
{
    uint32_t st = lc_unmap(s, base, length);
    return st != 0 ? st : lc_free(s, g->client, g->device[dev], memory);
}

gdu_shim *lc_shim(fake_rm *f, const char *driver, int test_drop_native, uint64_t fault_at)
{
    gdu_shim_config cfg = {.log_level = GDU_LOG_DEBUG,
                           .test_drop_native = test_drop_native != 0,
                           .test_strict = test_drop_native == 2,
                           .fault_at = fault_at,
                           .driver_version = driver,
                           .pid = FAKE_RM_PID,
                           .rdma_attr_answer = true};
    gdu_shim_ops ops = fake_rm_ops(f);
    lc_setup(f);
    return gdu_shim_new(&cfg, &ops);
}
