/* Shared by the shim's GPU test programs (tests/gpu/shim_*.c): CUDA set-up,
 * VMM buffers, checksums, and the shim's test queries (found with dlsym, so
 * the programs also run without the shim). Every line they print starts with
 * a keyword that tests/gpu/shim.sh greps for. */
#ifndef GDUNLOCK_TESTS_GPU_SHIM_GPU_COMMON_H
#define GDUNLOCK_TESTS_GPU_SHIM_GPU_COMMON_H

#include "cuda/cuda_api.h"

#include <stdbool.h>
#include <stdint.h>

extern const gdu_cuda *cu;

/* Exit status of a program that found no usable GPU (it prints "NOGPU: why"). */
enum { SHIM_GPU_NO_GPU = 69 };

/* Loads libcuda and makes device's primary context current; exits with
 * SHIM_GPU_NO_GPU where there is none. */
gdu_CUcontext shim_gpu_init(int device);
int shim_gpu_device_count(void);

/* Exits with status 1 and a line naming the call when r is an error. */
void shim_gpu_check(gdu_CUresult r, const char *what);
#define CK(call) shim_gpu_check((call), #call)

/* A VMM buffer (cuMemCreate + reserve + map + access) of size bytes. */
typedef struct {
    gdu_CUdeviceptr ptr;
    size_t size;
    gdu_CUmemGenericAllocationHandle handle;
} shim_vmm;
void shim_vmm_alloc(int device, size_t size, shim_vmm *v);
/* The same with gpuDirectRDMACapable as asked (NCCL sets it where the VMM
 * GPUDirect RDMA attribute reads 1). */
void shim_vmm_alloc_rdma(int device, size_t size, bool rdma_capable, shim_vmm *v);
void shim_vmm_free(shim_vmm *v);

/* Fills [ptr, ptr+size) with bytes seed, seed+1, ... (per 1 MiB block) and
 * returns a checksum of what reads back. */
uint64_t shim_gpu_fill_and_sum(gdu_CUdeviceptr ptr, size_t size, unsigned seed);

/* The shim's registration probe for ptr: "1 NV_ERR_INSERT_DUPLICATE_NAME (0x19)"
 * style text into buf; returns the probe's result (-2: no shim loaded). */
int shim_gpu_probe(gdu_CUdeviceptr ptr, char *buf, size_t len);

/* Prints "PTR <device> <name> <ptr> <size>" and, with the shim, "PIN <device>
 * <name> <verdict> <errno> <why>": what the model of the kernel's lookup
 * finds for the buffer now (gdunlock_test_pin_lookup). */
void shim_gpu_pin(int device, const char *name, gdu_CUdeviceptr ptr, size_t size);

/* Writes the shim's report with every registration RM holds (gdunlock_test_report)
 * to path; nothing without the shim or a path. */
void shim_gpu_dump_report(const char *path);

/* Prints "TOTALS registered=.. unregistered=.. live=.. already=.. created=..
 * failures=.. rm_calls=.. mappings=.. objects=..", or "TOTALS none" without
 * the shim; returns false without it. */
int shim_gpu_totals(const char *tag, unsigned long long out[9]);

#endif
