/* libnccl_gdunlock_probe.so: asks for the GPUDirect RDMA attribute from a
 * library named as NCCL's are, through the function pointer it is given (as
 * NCCL calls the driver through pointers it looked up): the shim must give
 * it libcuda's own answer. */
int gdunlock_probe_ask(int (*get)(int *, int, int), int *value);
int gdunlock_probe_ask_pointer(int (*get)(void *, int, unsigned long long), unsigned long long ptr,
                               int *value);
int gdunlock_probe_ask_attribute(int (*get)(int *, int, int), int attribute, int device,
                                 int *value);

int gdunlock_probe_ask(int (*get)(int *, int, int), int *value)
{
    /* Not a tail call: this library must be on the stack when it asks. */
    volatile int r = get(value, 116, 0);
    return r;
}

/* The same for a buffer's CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE (15). */
int gdunlock_probe_ask_pointer(int (*get)(void *, int, unsigned long long), unsigned long long ptr,
                               int *value)
{
    volatile int r = get(value, 15, ptr);
    return r;
}

/* Any device attribute of any device: the DMA-BUF (124) and VMM GPUDirect
 * RDMA (110) attributes NCCL 2.28.9 also reads (init.cc:365, alloc.h:223). */
int gdunlock_probe_ask_attribute(int (*get)(int *, int, int), int attribute, int device, int *value)
{
    volatile int r = get(value, attribute, device);
    return r;
}
