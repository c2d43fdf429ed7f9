/* Gather chunks copied from a read-only mapping of the file: a column slice
 * takes only its own bytes out of the page cache, where a pread per row
 * costs a system call each and a pread over the gaps copies the whole rows
 * (io_chunk.c). The mapping lives as long as the file; at close the engine
 * keeps it for the file's next open a while, then its idle workers unmap
 * it. */
#include "io/io_internal.h"
#include "util/clock.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>

static gdu_io_map_key key_of(const struct stat *st)
{
    return (gdu_io_map_key){(uint64_t)st->st_dev, (uint64_t)st->st_ino, (uint64_t)st->st_size};
}

static bool same_key(const gdu_io_map_key *a, const gdu_io_map_key *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size;
}

/* Unmaps and frees a list of mappings. */
static void drop_all(gdu_io_mapping *m)
{
    while (m != NULL) {
        gdu_io_mapping *next = m->next;
        munmap(m->addr, m->len);
        free(m);
        m = next;
    }
}

/* Under e->qlock: takes the mapping at *link out of the kept list. */
static gdu_io_mapping *unlink_kept(gdu_io_engine *e, gdu_io_mapping **link)
{
    gdu_io_mapping *u = *link;
    *link = u->next;
    e->kept_count--;
    return u;
}

/* A mapping kept from an earlier open of the file, taken out of the list. */
static gdu_io_mapping *take_kept(gdu_io_engine *e, const gdu_io_map_key *key)
{
    pthread_mutex_lock(&e->qlock);
    gdu_io_mapping *u = NULL;
    for (gdu_io_mapping **p = &e->kept; *p != NULL; p = &(*p)->next)
        if (same_key(&(*p)->key, key)) {
            u = unlink_kept(e, p);
            break;
        }
    pthread_mutex_unlock(&e->qlock);
    return u;
}

/* A mapping of the file as st shows it: the one kept from its last close,
 * or a new one; NULL where it cannot be mapped. */
static gdu_io_mapping *map_file(gdu_io_file *f, const struct stat *st)
{
    gdu_io_map_key key = key_of(st);
    gdu_io_mapping *m = take_kept(f->engine, &key);
    if (m != NULL)
        return m;
    m = malloc(sizeof *m);
    void *addr = m != NULL ? f->engine->sys.map(f->fd, (size_t)st->st_size) : MAP_FAILED;
    if (addr == MAP_FAILED) {
        free(m);
        return NULL;
    }
    *m = (gdu_io_mapping){.addr = addr, .len = (size_t)st->st_size, .key = key};
    return m;
}

bool gdu_io_gather_mapped(gdu_io_file *f)
{
    pthread_mutex_lock(&f->lock);
    struct stat st;
    gdu_io_mapping *now = atomic_load(&f->gather_map);
    bool wanted = !atomic_load(&f->direct_reads) && (now != NULL || !f->gather_map_tried);
    if (wanted && fstat(f->fd, &st) == 0 && st.st_size > 0 && (uint64_t)st.st_size <= SIZE_MAX &&
        (now == NULL || (uint64_t)st.st_size > now->len) &&
        f->gather_maps < GDU_IO_MAX_MAPS_PER_OPEN) {
        /* The first mapping, or one that shows what the file grew by: a
         * mapping made while the file was cut short would cut every later
         * gather. Workers may still copy from the one it replaces. */
        f->gather_map_tried = true;
        gdu_io_mapping *m = map_file(f, &st);
        if (m != NULL) {
            f->gather_maps++;
            if (now != NULL) {
                now->next = f->gather_replaced;
                f->gather_replaced = now;
            }
            atomic_store(&f->gather_map, m);
        }
    }
    /* direct_reads only ever turns off, and a mapping stays until close. */
    bool mapped = atomic_load(&f->gather_map) != NULL;
    pthread_mutex_unlock(&f->lock);
    return mapped;
}

/* A gather chunk's copy out of a mapping, bounded by the file's end. */
typedef struct {
    const gdu_io_chunk *c;
    const char *map;
    uint64_t end_of_data;
    char *staging;
    uint64_t placed;
} map_copy;

static void copy_runs(void *arg)
{
    map_copy *j = arg;
    const gdu_io_chunk *c = j->c;
    gdu_io_runs x = gdu_io_runs_of(c->req);
    for (size_t k = c->ext_index; k < c->ext_index + c->pieces; k++) {
        uint64_t offset = gdu_io_run_offset(x, k), length = gdu_io_run_length(x, k);
        if (offset >= j->end_of_data)
            return;
        uint64_t n = j->end_of_data - offset < length ? j->end_of_data - offset : length;
        memcpy(j->staging + j->placed, j->map + offset, (size_t)n);
        j->placed += n;
        if (n < length) /* end of the file: the runs after it lie beyond it */
            return;
    }
}

int64_t gdu_io_gather_from_map(gdu_io_file *f, const gdu_io_chunk *c, char *staging, char *why,
                               size_t len)
{
    struct stat st;
    if (fstat(f->fd, &st) != 0) {
        int err = errno;
        snprintf(why, len, "fstat before a gather: %s", strerror(err));
        return -err;
    }
    const gdu_io_mapping *m = atomic_load(&f->gather_map);
    if ((uint64_t)st.st_size <= m->len) {
        map_copy j = {
            .c = c, .map = m->addr, .end_of_data = (uint64_t)st.st_size, .staging = staging};
        if (gdu_io_map_guard(m->addr, m->len, copy_runs, &j) == 0)
            return (int64_t)j.placed;
    }
    /* Cut under the copy, grown past the mapping, or no guard to be had (a
     * SIGBUS handler set after the engine's): as a pread gives it. */
    return gdu_io_gather_into_staging(f, c, 0, staging, why, len);
}

/* Under e->qlock: moves u from the kept list (at *link) to the unmap list. */
static void unkeep(gdu_io_engine *e, gdu_io_mapping **link)
{
    gdu_io_mapping *u = unlink_kept(e, link);
    u->next = e->unmaps;
    e->unmaps = u;
}

void gdu_io_gather_unmap_later(gdu_io_file *f)
{
    gdu_io_mapping *m = atomic_load(&f->gather_map);
    if (m == NULL)
        return;
    gdu_io_engine *e = f->engine;
    m->until = gdu_now_seconds() + e->keep_map_seconds;
    pthread_mutex_lock(&e->qlock);
    m->next = e->kept;
    e->kept = m;
    if (++e->kept_count > GDU_IO_MAX_KEPT_MAPS) { /* the oldest, last, goes */
        gdu_io_mapping **p = &e->kept;
        while ((*p)->next != NULL)
            p = &(*p)->next;
        unkeep(e, p);
    }
    /* the ones it replaced show less of the file: unmapped, not kept */
    while (f->gather_replaced != NULL) {
        gdu_io_mapping *old = f->gather_replaced;
        f->gather_replaced = old->next;
        old->next = e->unmaps;
        e->unmaps = old;
    }
    /* an idle worker sets its wake-up by the new one, or unmaps the oldest */
    pthread_cond_broadcast(&e->qcond);
    pthread_mutex_unlock(&e->qlock);
    atomic_store(&f->gather_map, NULL);
}

void gdu_io_gather_unmap_now(gdu_io_file *f)
{
    gdu_io_mapping *m = atomic_load(&f->gather_map);
    if (m != NULL)
        m->next = f->gather_replaced;
    else
        m = f->gather_replaced;
    atomic_store(&f->gather_map, NULL);
    f->gather_replaced = NULL;
    drop_all(m);
}

bool gdu_io_expire_kept(gdu_io_engine *e, struct timespec *wake, bool *has_wake)
{
    double now = gdu_now_seconds(), next = 0;
    bool moved = false, any_left = false;
    for (gdu_io_mapping **p = &e->kept; *p != NULL;) {
        if (e->stopping || (*p)->until <= now) {
            unkeep(e, p);
            moved = true;
        } else {
            if (!any_left || (*p)->until < next)
                next = (*p)->until;
            any_left = true;
            p = &(*p)->next;
        }
    }
    *has_wake = !moved && any_left;
    if (*has_wake) {
        time_t sec = (time_t)next;
        long nsec = (long)((next - (double)sec) * 1e9);
        *wake = (struct timespec){.tv_sec = sec, .tv_nsec = nsec < 1000000000 ? nsec : 999999999};
    }
    return moved;
}

bool gdu_io_unmap_one(gdu_io_engine *e)
{
    gdu_io_mapping *u = e->unmaps;
    if (u == NULL)
        return false;
    e->unmaps = u->next;
    pthread_mutex_unlock(&e->qlock);
    munmap(u->addr, u->len);
    free(u);
    pthread_mutex_lock(&e->qlock);
    return true;
}

/* The engines of this process, for the fork handlers. Held across fork()
 * with every engine's qlock, so that the child's copies of the lists are
 * whole. */
static pthread_mutex_t tracked_lock = PTHREAD_MUTEX_INITIALIZER;
static gdu_io_engine *tracked;
static pthread_once_t fork_handlers = PTHREAD_ONCE_INIT;

static void lock_for_fork(void)
{
    pthread_mutex_lock(&tracked_lock);
    for (gdu_io_engine *e = tracked; e != NULL; e = e->tracked_next)
        pthread_mutex_lock(&e->qlock);
}

static void unlock_after_fork(void)
{
    for (gdu_io_engine *e = tracked; e != NULL; e = e->tracked_next)
        pthread_mutex_unlock(&e->qlock);
    pthread_mutex_unlock(&tracked_lock);
}

/* In the child: its engines are its parent's (gdu_io_engine_foreign), and
 * no worker of theirs will ever unmap what they kept. */
static void drop_in_child(void)
{
    for (gdu_io_engine *e = tracked; e != NULL; e = e->tracked_next) {
        drop_all(e->kept);
        drop_all(e->unmaps);
        e->kept = e->unmaps = NULL;
        e->kept_count = 0;
        pthread_mutex_unlock(&e->qlock);
    }
    tracked = NULL;
    pthread_mutex_unlock(&tracked_lock);
}

static void install_fork_handlers(void)
{
    pthread_atfork(lock_for_fork, unlock_after_fork, drop_in_child);
}

void gdu_io_maps_track(gdu_io_engine *e)
{
    pthread_once(&fork_handlers, install_fork_handlers);
    pthread_mutex_lock(&tracked_lock);
    e->tracked_next = tracked;
    tracked = e;
    pthread_mutex_unlock(&tracked_lock);
}

void gdu_io_maps_untrack(gdu_io_engine *e)
{
    pthread_mutex_lock(&tracked_lock);
    for (gdu_io_engine **p = &tracked; *p != NULL; p = &(*p)->tracked_next)
        if (*p == e) {
            *p = e->tracked_next;
            break;
        }
    pthread_mutex_unlock(&tracked_lock);
}
