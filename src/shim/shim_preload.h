/* The pieces of libgdunlock.so (the preloaded library) that its two exported
 * halves share: shim_interpose.c (ioctl and the file-descriptor calls, the
 * configuration, the report, the test queries), shim_cuda_hooks.c (the CUDA
 * and cuFile entry points) and shim_dlsym.c (dlsym). Not part of the core. */
#ifndef GDUNLOCK_SHIM_PRELOAD_H
#define GDUNLOCK_SHIM_PRELOAD_H

#include "shim/shim_core.h"

/* The process's shim, set up on first use; NULL when gdunlock is off
 * (GDUNLOCK=0) or out of memory. */
gdu_shim *gdu_preload_shim(void);

/* libc's dlsym (the shim exports its own on x86-64: shim_dlsym.c). */
void *gdu_preload_real_dlsym(void *handle, const char *name);

/* dlsym on an explicit handle, the shim's hooks put in place (shim_cuda_hooks.c). */
void *gdu_dlsym_handle(void *handle, const char *name);

#endif
