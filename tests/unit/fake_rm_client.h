/* What libcuda does, as ioctls through a shim core in front of a fake RM:
 * the building blocks of the synthetic shim tests. fd 3 is /dev/nvidiactl,
 * fd 4 /dev/nvidia-uvm. Each call returns RM's (or UVM's) status. */
#ifndef GDUNLOCK_TESTS_FAKE_RM_CLIENT_H
#define GDUNLOCK_TESTS_FAKE_RM_CLIENT_H

#include "fake_rm.h"

#include <stdint.h>

enum { FAKE_CTL_FD = 3, FAKE_UVM_FD = 4 };

/* Declares the two fds to the fake. */
void lc_setup(fake_rm *f);
uint32_t lc_alloc(gdu_shim *s, uint32_t client, uint32_t parent, uint32_t handle, uint32_t cls,
                  void *params);
uint32_t lc_free(gdu_shim *s, uint32_t client, uint32_t parent, uint32_t handle);
uint32_t lc_control(gdu_shim *s, uint32_t client, uint32_t object, uint32_t cmd, void *params,
                    uint32_t size);
uint32_t lc_map(gdu_shim *s, uint32_t client, uint32_t memory, uint64_t base, uint64_t length,
                uint64_t offset);
uint32_t lc_unmap(gdu_shim *s, uint64_t base, uint64_t length);

/* UVM_REGISTER_GPU_VASPACE of vaspace (libcuda registers one per GPU). */
uint32_t lc_uvm_register_vaspace(gdu_shim *s, uint32_t client, uint32_t vaspace);
/* UVM_UNMAP_EXTERNAL of [base, base + length). */
uint32_t lc_unmap_external(gdu_shim *s, uint64_t base, uint64_t length);
/* The kernel lookup's verdict (a gdu_pin_rule; 0: found) for the buffer in
 * the fake's state. */
int lc_pin(fake_rm *f, uint64_t va, uint64_t size);

/* A client with `devices` devices, each with one subdevice and two VA
 * spaces, the first registered with UVM. Handles: client 0xc1d00001 (+n for later calls), device d
 * 0x5c000100 + 0x10 * d, its subdevice +1, VA spaces +2 and +3. */
typedef struct {
    uint32_t client;
    uint32_t device[4], subdevice[4], vaspace[4][2];
} lc_gpus;

void lc_make_gpus(gdu_shim *s, fake_rm *f, uint32_t client, unsigned devices, lc_gpus *g);

/* cuMemAlloc-like: a video memory object under the device, mapped at base. */
uint32_t lc_alloc_mapped(gdu_shim *s, const lc_gpus *g, unsigned dev, uint32_t memory,
                         uint64_t base, uint64_t length);
/* cuMemFree-like: unmap, then free the memory. */
uint32_t lc_free_mapped(gdu_shim *s, const lc_gpus *g, unsigned dev, uint32_t memory, uint64_t base,
                        uint64_t length);

/* A shim configured for tests (driver 580.159.04, debug logging); test_drop_native:
 * 0 off, 1 the test mode, 2 the strict test mode. */
gdu_shim *lc_shim(fake_rm *f, const char *driver, int test_drop_native, uint64_t fault_at);

#endif
