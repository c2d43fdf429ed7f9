/* Gather chunks copied from a read-only mapping of the file: a column slice
 * takes only its own bytes out of the page cache, where a pread per row
 * costs a system call each and a pread over the gaps copies the whole rows
 * (io_chunk.c). The mapping lives as long as the file; at close the engine
 * keeps it for the file's next open a while, then its idle workers unmap
 * it. */
#include "io/io_internal.h"
#include "util/clock.h"

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

/* Under e->qlock: takes the mapping at *link out of the kept list. */
static gdu_io_unmapping *unlink_kept(gdu_io_engine *e, gdu_io_unmapping **link)
{
    gdu_io_unmapping *u = *link;
    *link = u->next;
    e->kept_count--;
    return u;
}

/* A mapping kept from an earlier open of the file, taken out of the list. */
static gdu_io_unmapping *take_kept(gdu_io_engine *e, const gdu_io_map_key *key)
{
    pthread_mutex_lock(&e->qlock);
    gdu_io_unmapping *u = NULL;
    for (gdu_io_unmapping **p = &e->kept; *p != NULL; p = &(*p)->next)
        if (same_key(&(*p)->key, key)) {
            u = unlink_kept(e, p);
            break;
        }
    pthread_mutex_unlock(&e->qlock);
    return u;
}

bool gdu_io_gather_mapped(gdu_io_file *f)
{
    pthread_mutex_lock(&f->lock);
    if (!f->gather_map_tried && !atomic_load(&f->direct_reads)) {
        f->gather_map_tried = true;
        struct stat st;
        if (fstat(f->fd, &st) == 0 && st.st_size > 0 && (uint64_t)st.st_size <= SIZE_MAX) {
            f->gather_key = key_of(&st);
            gdu_io_unmapping *u = take_kept(f->engine, &f->gather_key);
            if (u != NULL) {
                f->gather_map = u->addr;
                f->gather_map_len = u->len;
                free(u);
            } else {
                void *m = f->engine->sys.map(f->fd, (size_t)st.st_size);
                if (m != MAP_FAILED) {
                    f->gather_map = m;
                    f->gather_map_len = (uint64_t)st.st_size;
                }
            }
        }
    }
    /* direct_reads only ever turns off, so a mapping made stays usable. */
    bool mapped = f->gather_map != NULL;
    pthread_mutex_unlock(&f->lock);
    return mapped;
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
    uint64_t end_of_data =
        (uint64_t)st.st_size < f->gather_map_len ? (uint64_t)st.st_size : f->gather_map_len;
    gdu_io_runs x = gdu_io_runs_of(c->req);
    uint64_t placed = 0;
    for (size_t k = c->ext_index; k < c->ext_index + c->pieces; k++) {
        uint64_t offset = gdu_io_run_offset(x, k), length = gdu_io_run_length(x, k);
        if (offset >= end_of_data)
            return (int64_t)placed;
        uint64_t n = end_of_data - offset < length ? end_of_data - offset : length;
        memcpy(staging + placed, f->gather_map + offset, (size_t)n);
        placed += n;
        if (n < length) /* end of the file: the runs after it lie beyond it */
            return (int64_t)placed;
    }
    return (int64_t)placed;
}

/* Under e->qlock: moves u from the kept list (at *link) to the unmap list. */
static void unkeep(gdu_io_engine *e, gdu_io_unmapping **link)
{
    gdu_io_unmapping *u = unlink_kept(e, link);
    u->next = e->unmaps;
    e->unmaps = u;
}

void gdu_io_gather_unmap_later(gdu_io_file *f)
{
    if (f->gather_map == NULL)
        return;
    gdu_io_engine *e = f->engine;
    gdu_io_unmapping *u = malloc(sizeof *u);
    if (u == NULL) { /* no room to hand it over: unmap it here */
        munmap((void *)f->gather_map, (size_t)f->gather_map_len);
    } else {
        *u = (gdu_io_unmapping){.addr = (void *)f->gather_map,
                                .len = (size_t)f->gather_map_len,
                                .key = f->gather_key,
                                .until = gdu_now_seconds() + e->keep_map_seconds};
        pthread_mutex_lock(&e->qlock);
        u->next = e->kept;
        e->kept = u;
        if (++e->kept_count > GDU_IO_MAX_KEPT_MAPS) { /* the oldest, last, goes */
            gdu_io_unmapping **p = &e->kept;
            while ((*p)->next != NULL)
                p = &(*p)->next;
            unkeep(e, p);
        }
        /* an idle worker sets its wake-up by the new one, or unmaps the oldest */
        pthread_cond_broadcast(&e->qcond);
        pthread_mutex_unlock(&e->qlock);
    }
    f->gather_map = NULL;
}

bool gdu_io_expire_kept(gdu_io_engine *e, struct timespec *wake, bool *has_wake)
{
    double now = gdu_now_seconds(), next = 0;
    bool moved = false, any_left = false;
    for (gdu_io_unmapping **p = &e->kept; *p != NULL;) {
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
    gdu_io_unmapping *u = e->unmaps;
    if (u == NULL)
        return false;
    e->unmaps = u->next;
    pthread_mutex_unlock(&e->qlock);
    munmap(u->addr, u->len);
    free(u);
    pthread_mutex_lock(&e->qlock);
    return true;
}
