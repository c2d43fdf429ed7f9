/* The model: the files of a checkpoint, their headers, the merged tensor
 * table, and once loaded one memory block per file. */
#ifndef GDUNLOCK_ST_MODEL_INTERNAL_H
#define GDUNLOCK_ST_MODEL_INTERNAL_H

#include "gdunlock/safetensors.h"
#include "safetensors/st_block.h"
#include "safetensors/st_pread.h"

typedef struct st_pending_load st_pending_load;

typedef struct st_file {
    char *path;
    gdu_st_header *header;
    st_block *block; /* NULL before loading */
    int fd;          /* the descriptor the header was read from, or -1 (see ST_KEEP_FILES) */
    st_identity id;  /* the file the header was read from */
} st_file;

/* A model keeps the descriptor each header was read from, and every later
 * read (loads, verify, readers) goes through it: it reads the file that was
 * validated, whatever its path names by then. Only so many stay open (a
 * checkpoint may have more shards than a process may open files): at most
 * ST_KEEP_FILES and an eighth of the open-file limit (RLIMIT_NOFILE). A
 * file past those is opened again by its path when it is needed, and
 * refused (GDU_ST_ERR_CHANGED) unless it is the same file (device, inode),
 * unchanged (size, modification and change time: a rewrite in place that
 * put the modification time back still moves the change time). */
#define ST_KEEP_FILES 64

/* min(max, the open-file limit / divisor), at least 1. */
size_t st_files_within_limit(size_t max, unsigned divisor);

/* The descriptor to read file f through: the kept one, or the path opened
 * again and checked to be the file validated. Give it back with
 * st_file_descriptor_done. */
gdu_st_status st_file_descriptor(const gdu_st_model *m, size_t f, int *fd, gdu_st_error *err);
void st_file_descriptor_done(const gdu_st_model *m, size_t f, int fd);

struct gdu_st_model {
    st_file *files;
    size_t file_count;
    gdu_st_tensor *tensors; /* file by file, each file's in offset order */
    size_t tensor_count;
    gdu_st_tensor **by_name; /* the tensors sorted by name (then file) */
    gdu_st_load_stats stats;
    /* A load running on the model, between gdu_st_load_start and _finish
     * (st_load.c), and how to finish it: freeing the model mid-load finishes
     * the load first, so that no read lands in memory after its block is
     * gone, without the model knowing how a load runs. */
    st_pending_load *pending;
    gdu_st_status (*finish_pending)(gdu_st_model *m, gdu_st_error *err);
};

#endif
