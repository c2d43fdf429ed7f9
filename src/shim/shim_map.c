#include "shim/shim_map.h"

#include "shim/shim_pool.h"

static size_t slot(const gdu_map *m, uint64_t key)
{
    /* Handles and addresses are dense in their low bits; mix them first. */
    key ^= key >> 29;
    key *= 0xbf58476d1ce4e5b9ULL;
    key ^= key >> 32;
    return (size_t)key & (m->nbuckets - 1);
}

gdu_map_node *gdu_map_find(const gdu_map *m, uint64_t key)
{
    if (m->nbuckets == 0)
        return NULL;
    for (gdu_map_node *n = m->buckets[slot(m, key)]; n != NULL; n = n->next)
        if (n->key == key)
            return n;
    return NULL;
}

static int grow(gdu_map *m)
{
    size_t nb = m->nbuckets ? m->nbuckets * 2 : 64;
    gdu_map_node **b = gdu_pool_alloc(nb * sizeof *b);
    if (b == NULL)
        return -1;
    gdu_map old = *m;
    m->buckets = b;
    m->nbuckets = nb;
    for (size_t i = 0; i < old.nbuckets; i++) {
        gdu_map_node *n = old.buckets[i];
        while (n != NULL) {
            gdu_map_node *next = n->next;
            size_t s = slot(m, n->key);
            n->next = b[s];
            b[s] = n;
            n = next;
        }
    }
    gdu_pool_free(old.buckets, old.nbuckets * sizeof *old.buckets);
    return 0;
}

int gdu_map_insert(gdu_map *m, gdu_map_node *n)
{
    if ((m->nbuckets == 0 || m->count >= m->nbuckets) && grow(m) != 0 && m->nbuckets == 0)
        return -1;
    size_t s = slot(m, n->key);
    n->next = m->buckets[s];
    m->buckets[s] = n;
    m->count++;
    return 0;
}

gdu_map_node *gdu_map_remove(gdu_map *m, uint64_t key)
{
    if (m->nbuckets == 0)
        return NULL;
    for (gdu_map_node **p = &m->buckets[slot(m, key)]; *p != NULL; p = &(*p)->next) {
        if ((*p)->key == key) {
            gdu_map_node *n = *p;
            *p = n->next;
            m->count--;
            return n;
        }
    }
    return NULL;
}

void gdu_map_each(gdu_map *m, void (*fn)(gdu_map_node *n, void *arg), void *arg)
{
    for (size_t i = 0; i < m->nbuckets; i++) {
        gdu_map_node *n = m->buckets[i];
        while (n != NULL) {
            gdu_map_node *next = n->next;
            fn(n, arg);
            n = next;
        }
    }
}

void gdu_map_destroy(gdu_map *m)
{
    gdu_pool_free(m->buckets, m->nbuckets * sizeof *m->buckets);
    m->buckets = NULL;
    m->nbuckets = 0;
    m->count = 0;
}
