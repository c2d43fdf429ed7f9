/* Memory for the shim's tracking that never calls malloc: pages from mmap,
 * kept in free lists by size class. The ioctl hook may run in a signal
 * handler that interrupted its thread inside malloc; calloc there would
 * deadlock on malloc's own lock, mmap cannot. */
#ifndef GDUNLOCK_SHIM_POOL_H
#define GDUNLOCK_SHIM_POOL_H

#include <stddef.h>

/* size bytes, zeroed; NULL when the system gives no memory. */
void *gdu_pool_alloc(size_t size);
/* Gives back p, which gdu_pool_alloc(size) returned (NULL: nothing). */
void gdu_pool_free(void *p, size_t size);

#endif
