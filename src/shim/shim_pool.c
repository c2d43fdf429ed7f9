#include "shim/shim_pool.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Under AddressSanitizer the blocks come from its allocator, so that a
 * use after free in the shim's tracking is still caught. */
#if defined(__SANITIZE_ADDRESS__)
#define GDU_POOL_MALLOC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GDU_POOL_MALLOC 1
#endif
#endif

#if defined(GDU_POOL_MALLOC)
void *gdu_pool_alloc(size_t size) { return calloc(1, size); }

void gdu_pool_free(void *p, size_t size) { free(p); }
#else

/* Size classes 64 B .. 4 KiB; larger blocks are whole mappings. */
enum { POOL_CLASSES = 7, POOL_MIN_SHIFT = 6, POOL_CHUNK = 64 * 1024 };

typedef struct pool_free {
    struct pool_free *next;
} pool_free;

static pool_free *g_free[POOL_CLASSES];
/* A spin lock: callers hold the shim's mutex already, except tests running
 * several shims at once; nothing here can wait on anything else. */
static volatile char g_lock;

static int class_of(size_t size)
{
    for (int c = 0; c < POOL_CLASSES; c++)
        if (size <= ((size_t)1 << (POOL_MIN_SHIFT + c)))
            return c;
    return -1;
}

static void lock(void)
{
    while (__atomic_test_and_set(&g_lock, __ATOMIC_ACQUIRE))
        ;
}

static void unlock(void) { __atomic_clear(&g_lock, __ATOMIC_RELEASE); }

static void *map_pages(size_t size)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void *gdu_pool_alloc(size_t size)
{
    int c = class_of(size);
    if (c < 0)
        return map_pages(size); /* zeroed by the kernel */
    size_t block = (size_t)1 << (POOL_MIN_SHIFT + c);
    lock();
    if (g_free[c] == NULL) {
        char *chunk = map_pages(POOL_CHUNK);
        if (chunk == NULL) {
            unlock();
            return NULL;
        }
        for (size_t off = POOL_CHUNK; off >= block; off -= block) {
            pool_free *f = (pool_free *)(chunk + off - block);
            f->next = g_free[c];
            g_free[c] = f;
        }
    }
    pool_free *f = g_free[c];
    g_free[c] = f->next;
    unlock();
    memset(f, 0, block);
    return f;
}

void gdu_pool_free(void *p, size_t size)
{
    if (p == NULL)
        return;
    int c = class_of(size);
    if (c < 0) {
        munmap(p, size);
        return;
    }
    lock();
    pool_free *f = p;
    f->next = g_free[c];
    g_free[c] = f;
    unlock();
}
#endif
