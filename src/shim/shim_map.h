/* A small hash map from 64-bit keys to caller-allocated nodes (intrusive,
 * chained): node addresses stay valid while other keys come and go. */
#ifndef GDUNLOCK_SHIM_MAP_H
#define GDUNLOCK_SHIM_MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct gdu_map_node {
    uint64_t key;
    struct gdu_map_node *next;
} gdu_map_node;

typedef struct {
    gdu_map_node **buckets;
    size_t nbuckets; /* a power of two, or 0 before the first insert */
    size_t count;
} gdu_map;

gdu_map_node *gdu_map_find(const gdu_map *m, uint64_t key);

/* Links n (whose key is set and not yet present). Returns 0, or -1 when the
 * table could not grow (then n is not linked). */
int gdu_map_insert(gdu_map *m, gdu_map_node *n);

/* Unlinks the node with this key and returns it (NULL if absent). */
gdu_map_node *gdu_map_remove(gdu_map *m, uint64_t key);

/* Calls fn on every node; fn may remove the node it is given (and no other). */
void gdu_map_each(gdu_map *m, void (*fn)(gdu_map_node *n, void *arg), void *arg);

/* Frees the bucket array (not the nodes). */
void gdu_map_destroy(gdu_map *m);

#endif
