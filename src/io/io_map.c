/* Gather chunks copied from a read-only mapping of the file: a column slice
 * takes only its own bytes out of the page cache, where a pread per row
 * costs a system call each and a pread over the gaps copies the whole rows
 * (io_chunk.c). The mapping lives as long as the file; at close the engine's
 * idle workers unmap it. */
#include "io/io_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

bool gdu_io_gather_mapped(gdu_io_file *f)
{
    pthread_mutex_lock(&f->lock);
    if (!f->gather_map_tried && !atomic_load(&f->direct_reads)) {
        f->gather_map_tried = true;
        struct stat st;
        if (fstat(f->fd, &st) == 0 && st.st_size > 0 && (uint64_t)st.st_size <= SIZE_MAX) {
            void *m = f->engine->sys.map(f->fd, (size_t)st.st_size);
            if (m != MAP_FAILED) {
                f->gather_map = m;
                f->gather_map_len = (uint64_t)st.st_size;
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

void gdu_io_gather_unmap_later(gdu_io_file *f)
{
    if (f->gather_map == NULL)
        return;
    gdu_io_engine *e = f->engine;
    gdu_io_unmapping *u = malloc(sizeof *u);
    if (u == NULL) { /* no room to hand it over: unmap it here */
        munmap((void *)f->gather_map, (size_t)f->gather_map_len);
    } else {
        *u = (gdu_io_unmapping){.addr = (void *)f->gather_map, .len = (size_t)f->gather_map_len};
        pthread_mutex_lock(&e->qlock);
        u->next = e->unmaps;
        e->unmaps = u;
        pthread_cond_broadcast(&e->qcond);
        pthread_mutex_unlock(&e->qlock);
    }
    f->gather_map = NULL;
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
