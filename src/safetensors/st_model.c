/* Opening a checkpoint (one file or a sharded index) into a tensor table. */
#include "safetensors/st_error.h"
#include "safetensors/st_index.h"
#include "safetensors/st_model_internal.h"
#include "util/text.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* Reads a whole small file (an index JSON) into a malloc'd buffer. */
static gdu_st_status read_small_file(const char *path, char **out, size_t *len, gdu_st_error *err)
{
    int fd = st_open_regular(path);
    if (fd < 0)
        return st_open_fail(err, path, fd);
    struct stat st;
    gdu_st_status s = GDU_ST_OK;
    if (fstat(fd, &st) != 0)
        s = st_fail(err, GDU_ST_ERR_IO, "%s: fstat: %s", path, strerror(errno));
    else if ((uint64_t)st.st_size > GDU_ST_MAX_HEADER_BYTES)
        s = st_fail(err, GDU_ST_ERR_INDEX, "%s: %lld bytes, too large for an index", path,
                    (long long)st.st_size);
    char *buf = s == GDU_ST_OK ? malloc((size_t)st.st_size + 1) : NULL;
    if (s == GDU_ST_OK && buf == NULL)
        s = st_fail(err, GDU_ST_ERR_NOMEM, "out of memory");
    size_t done = 0;
    while (s == GDU_ST_OK && done < (size_t)st.st_size) {
        ssize_t r = read(fd, buf + done, (size_t)st.st_size - done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            s = st_fail(err, GDU_ST_ERR_IO, "%s: %s", path, r < 0 ? strerror(errno) : "short read");
        else
            done += (size_t)r;
    }
    close(fd);
    if (s != GDU_ST_OK) {
        free(buf);
        return s;
    }
    *out = buf;
    *len = done;
    return GDU_ST_OK;
}

/* Whether resolved path p lies under resolved folder dir. */
static int lies_under(const char *p, const char *dir)
{
    size_t n = strlen(dir);
    if (n == 1 && dir[0] == '/')
        return p[0] == '/';
    return strncmp(p, dir, n) == 0 && p[n] == '/';
}

/* Where an index's shards may lie: its folder, resolved (symbolic links
 * followed), and for a Hugging Face cache repository whose snapshots/REV/
 * folder holds the index (there every file is a link to ../../blobs/HASH)
 * that repository's blobs/ folder; resolved once per checkpoint, not per
 * shard. */
typedef struct st_shard_root {
    const char *dir; /* as the index names it */
    char *root;      /* resolved, or NULL (errno in resolve_errno) */
    char *blobs;     /* the cache's blobs/ folder, or NULL */
    int resolve_errno;
} st_shard_root;

static gdu_st_status shard_root_resolve(st_shard_root *r, const char *dir, gdu_st_error *err)
{
    *r = (st_shard_root){dir, realpath(dir, NULL), NULL, 0};
    if (r->root == NULL) {
        r->resolve_errno = errno;
        return GDU_ST_OK; /* said at the first shard, as before it is opened */
    }
    char *rev = strrchr(r->root, '/');
    if (rev == NULL || rev == r->root)
        return GDU_ST_OK;
    size_t snapshots_end = (size_t)(rev - r->root);
    const char *snapshots = memrchr(r->root, '/', snapshots_end);
    if (snapshots == NULL ||
        (size_t)(r->root + snapshots_end - snapshots) != strlen("/snapshots") ||
        strncmp(snapshots, "/snapshots", strlen("/snapshots")) != 0)
        return GDU_ST_OK;
    if (asprintf(&r->blobs, "%.*s/blobs", (int)(snapshots - r->root), r->root) < 0) {
        r->blobs = NULL;
        return st_fail(err, GDU_ST_ERR_NOMEM, "out of memory");
    }
    return GDU_ST_OK;
}

static void shard_root_free(st_shard_root *r)
{
    free(r->root);
    free(r->blobs);
}

/* Where the open descriptor fd lies, resolved (malloc'd), or NULL with
 * errno: the kernel's name of the open file (/proc/self/fd/N), one
 * readlink where resolving that link took one a path component;
 * realpath where that name is not a path (a deleted file's, or no /proc),
 * and of path without /proc. */
static char *where_fd_lies(int fd, const char *path)
{
    char proc[64], link[PATH_MAX + 1];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(proc, link, sizeof link);
    static const char deleted[] = " (deleted)";
    size_t d = sizeof deleted - 1;
    if (n > 0 && (size_t)n < sizeof link && link[0] == '/' &&
        ((size_t)n < d || memcmp(link + n - d, deleted, d) != 0))
        return strndup(link, (size_t)n);
    return realpath(access(proc, F_OK) == 0 ? proc : path, NULL);
}

/* A shard must resolve (symbolic links followed) inside root (see
 * st_shard_root). What is checked is where the open descriptor fd lies
 * (through /proc/self/fd, else its path): the file read, not what the
 * path named a moment earlier. */
static gdu_st_status check_inside(const st_shard_root *r, int fd, const char *path,
                                  const char *name, gdu_st_error *err)
{
    if (r->root == NULL)
        return st_fail(err, GDU_ST_ERR_OPEN, "%s: %s", r->dir, strerror(r->resolve_errno));
    char *real = where_fd_lies(fd, path);
    gdu_st_status s = GDU_ST_OK;
    if (real == NULL)
        s = st_fail(err, GDU_ST_ERR_OPEN, "%s: %s", path, strerror(errno));
    else if (!lies_under(real, r->root) && (r->blobs == NULL || !lies_under(real, r->blobs)))
        s = st_fail(err, GDU_ST_ERR_PATH_ESCAPE,
                    "shard '%.120s' resolves to %.200s, outside the index's folder: shards "
                    "must lie under it",
                    name, real);
    free(real);
    return s;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int by_string(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* What a folder holds (GDU_ST_FOLDER): its index (*index_name, malloc'd)
 * where it has exactly one, else its .safetensors files, sorted, as the
 * shards of a checkpoint without an index (index->shards), as the Python
 * iterator reads a folder. */
static gdu_st_status read_folder(const char *dir, char **index_name, st_index *index,
                                 gdu_st_error *err)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return st_fail(err, GDU_ST_ERR_OPEN, "%s: %s", dir, strerror(errno));
    size_t n = 0, cap = 0, indexes = 0;
    char **names = NULL;
    gdu_st_status s = GDU_ST_OK;
    struct dirent *e;
    while (s == GDU_ST_OK && (e = readdir(d)) != NULL) {
        int is_index = ends_with(e->d_name, ".safetensors.index.json");
        if (e->d_name[0] == '.' || (!is_index && !ends_with(e->d_name, ".safetensors")))
            continue;
        if (is_index && indexes++ == 0) {
            free(*index_name);
            if ((*index_name = strdup(e->d_name)) == NULL)
                s = st_fail(err, GDU_ST_ERR_NOMEM, "out of memory");
        }
        if (is_index)
            continue;
        if (n + 2 > cap) {
            cap = cap ? cap * 2 : 16;
            char **grown = realloc(names, cap * sizeof *names);
            if (grown == NULL) {
                s = st_fail(err, GDU_ST_ERR_NOMEM, "out of memory");
                break;
            }
            names = grown;
        }
        if ((names[n] = strdup(e->d_name)) == NULL)
            s = st_fail(err, GDU_ST_ERR_NOMEM, "out of memory");
        else
            names[++n] = NULL;
    }
    closedir(d);
    if (s == GDU_ST_OK && indexes > 1)
        s = st_fail(err, GDU_ST_ERR_OPEN,
                    "%s holds %zu *.safetensors.index.json files: name the one to load", dir,
                    indexes);
    else if (s == GDU_ST_OK && indexes == 0 && n == 0)
        s = st_fail(err, GDU_ST_ERR_OPEN, "%s: no .safetensors file or index in it", dir);
    if (s != GDU_ST_OK || indexes == 1) {
        gdu_st_string_list_free(names);
        if (s != GDU_ST_OK) { /* the caller frees the index's name only with GDU_ST_OK */
            free(*index_name);
            *index_name = NULL;
        }
        return s;
    }
    qsort(names, n, sizeof *names, by_string);
    index->shards = names;
    index->shard_count = n;
    return GDU_ST_OK;
}

/* m's files: the shards index names, in folder (malloc'd into *folder). */
static gdu_st_status shard_files(gdu_st_model *m, const char *dir, size_t dir_len,
                                 const st_index *index, char **folder, gdu_st_error *err)
{
    m->files = calloc(index->shard_count, sizeof *m->files);
    if (m->files == NULL || (*folder = strndup(dir, dir_len)) == NULL)
        return st_fail(err, GDU_ST_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < index->shard_count; i++) {
        m->files[i].fd = -1;
        if (asprintf(&m->files[i].path, "%s/%s", *folder, index->shards[i]) < 0) {
            m->files[i].path = NULL;
            return st_fail(err, GDU_ST_ERR_NOMEM, "out of memory");
        }
        m->file_count++;
    }
    return GDU_ST_OK;
}

/* Fills the model's file list: the file itself, the index's shards resolved
 * against the index's folder, or (GDU_ST_FOLDER) what a folder holds
 * (*folder, malloc'd; NULL for a single file). */
static gdu_st_status list_files(gdu_st_model *m, const char *path, unsigned flags, st_index *index,
                                char **folder, gdu_st_error *err)
{
    struct stat st;
    if ((flags & GDU_ST_FOLDER) && stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        char *index_name = NULL;
        gdu_st_status s = read_folder(path, &index_name, index, err);
        if (s != GDU_ST_OK || index_name == NULL)
            return s == GDU_ST_OK ? shard_files(m, path, strlen(path), index, folder, err) : s;
        char *index_path = NULL;
        if (asprintf(&index_path, "%s/%s", path, index_name) < 0)
            index_path = NULL;
        free(index_name);
        if (index_path == NULL)
            return st_fail(err, GDU_ST_ERR_NOMEM, "out of memory");
        s = list_files(m, index_path, 0, index, folder, err);
        free(index_path);
        return s;
    }
    if (!ends_with(path, ".json")) {
        m->files = calloc(1, sizeof *m->files);
        if (m->files == NULL || (m->files[0].path = strdup(path)) == NULL)
            return st_fail(err, GDU_ST_ERR_NOMEM, "out of memory");
        m->files[0].fd = -1;
        m->file_count = 1;
        return GDU_ST_OK;
    }
    char *text = NULL;
    size_t len = 0;
    gdu_st_status s = read_small_file(path, &text, &len, err);
    if (s != GDU_ST_OK)
        return s;
    s = st_index_parse(text, len, index, err);
    free(text);
    if (s != GDU_ST_OK) {
        st_prefix(err, path);
        return s;
    }
    const char *slash = strrchr(path, '/');
    size_t dir_len = slash ? (slash == path ? 1 : (size_t)(slash - path)) : 1;
    return shard_files(m, slash ? path : ".", dir_len, index, folder, err);
}

/* Opens file f, checks that a shard lies inside folder (when not NULL),
 * reads and validates its header, and keeps the descriptor when f is among
 * the first keep files. */
static gdu_st_status open_file(gdu_st_model *m, size_t f, const st_shard_root *folder,
                               const char *name, unsigned flags, size_t keep, gdu_st_error *err)
{
    st_file *file = &m->files[f];
    int fd = st_open_regular(file->path);
    if (fd < 0)
        return st_open_fail(err, file->path, fd);
    gdu_st_status s = folder ? check_inside(folder, fd, file->path, name, err) : GDU_ST_OK;
    if (s == GDU_ST_OK) {
        s = gdu_st_header_read_fd(fd, flags, &file->header, err);
        if (s != GDU_ST_OK)
            st_prefix(err, file->path);
    }
    if (s == GDU_ST_OK && st_identity_of(fd, &file->id) != 0)
        s = st_fail(err, GDU_ST_ERR_IO, "%s: fstat: %s", file->path, strerror(errno));
    if (s == GDU_ST_OK && f < keep)
        file->fd = fd;
    else
        close(fd);
    return s;
}

size_t st_files_within_limit(size_t max, unsigned divisor)
{
    struct rlimit lim;
    if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY)
        return max;
    size_t n = (size_t)(lim.rlim_cur / divisor);
    return n < 1 ? 1 : n < max ? n : max;
}

gdu_st_status st_file_descriptor(const gdu_st_model *m, size_t f, int *out, gdu_st_error *err)
{
    const st_file *file = &m->files[f];
    if (file->fd >= 0) {
        *out = file->fd;
        return GDU_ST_OK;
    }
    /* st_open_regular's checks only where the file is not the one
     * validated (to name what is there): that one is the regular data file
     * they found (same device and inode). O_NONBLOCK: a FIFO put at the
     * path does not block the open. */
    int fd = open(file->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return st_open_fail(err, file->path, -errno);
    st_identity now;
    if (st_identity_of(fd, &now) != 0 || !st_identity_equal(&now, &file->id)) {
        close(fd);
        fd = st_open_regular(file->path);
        if (fd < 0)
            return st_open_fail(err, file->path, fd);
        close(fd);
        return st_fail(err, GDU_ST_ERR_CHANGED,
                       "%s is not the file that was opened and validated (replaced, or written "
                       "since: its size, modification or change time differs): open the "
                       "checkpoint again",
                       file->path);
    }
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
        int e = errno;
        close(fd);
        return st_fail(err, GDU_ST_ERR_IO, "%s: fcntl: %s", file->path, strerror(e));
    }
    *out = fd;
    return GDU_ST_OK;
}

void st_file_descriptor_done(const gdu_st_model *m, size_t f, int fd)
{
    if (fd != m->files[f].fd)
        close(fd);
}

/* Orders names as bytes (NUL bytes included), a prefix first. */
static int compare_names(const char *a, size_t a_len, const char *b, size_t b_len)
{
    int c = memcmp(a, b, a_len < b_len ? a_len : b_len);
    return c != 0 ? c : (a_len > b_len) - (a_len < b_len);
}

/* by_name's order: by name, then by file (the earlier file first). */
static int by_name(const void *x, const void *y)
{
    const gdu_st_tensor *a = *(const gdu_st_tensor *const *)x,
                        *b = *(const gdu_st_tensor *const *)y;
    int c = compare_names(a->name, a->name_len, b->name, b->name_len);
    return c != 0 ? c : (a->file > b->file) - (a->file < b->file);
}

/* Builds the merged tensor table and the name lookup (the tensors sorted by
 * name: 8 bytes a tensor, and no hash a hostile header could flood);
 * refuses a name found in two shards. */
static gdu_st_status build_table(gdu_st_model *m, gdu_st_error *err)
{
    size_t total = 0;
    for (size_t f = 0; f < m->file_count; f++)
        total += gdu_st_header_tensor_count(m->files[f].header);
    m->tensors = calloc(total ? total : 1, sizeof *m->tensors);
    m->by_name = calloc(total ? total : 1, sizeof *m->by_name);
    if (m->tensors == NULL || m->by_name == NULL)
        return st_fail(err, GDU_ST_ERR_NOMEM, "out of memory for %zu tensors", total);
    for (size_t f = 0; f < m->file_count; f++) {
        const gdu_st_header *h = m->files[f].header;
        for (size_t i = 0; i < gdu_st_header_tensor_count(h); i++) {
            const gdu_st_tensor_info *info = gdu_st_header_tensor(h, i);
            gdu_st_tensor *t = &m->tensors[m->tensor_count];
            m->by_name[m->tensor_count++] = t;
            t->name = info->name;
            t->name_len = info->name_len;
            t->dtype = info->dtype;
            t->ndim = info->ndim;
            t->shape = info->shape;
            t->nbytes = info->end - info->begin;
            t->device = -1;
            t->file = (uint32_t)f;
            t->file_offset = gdu_st_header_data_offset(h) + info->begin;
        }
    }
    qsort(m->by_name, m->tensor_count, sizeof *m->by_name, by_name);
    for (size_t i = 1; i < m->tensor_count; i++) {
        const gdu_st_tensor *a = m->by_name[i - 1], *b = m->by_name[i];
        if (compare_names(a->name, a->name_len, b->name, b->name_len) == 0) {
            char first[160], second[160];
            return st_fail(err, GDU_ST_ERR_DUPLICATE_TENSOR, "tensor '%.80s' is in both %s and %s",
                           a->name,
                           gdu_text_shorten(m->files[a->file].path, 150, first, sizeof first),
                           gdu_text_shorten(m->files[b->file].path, 150, second, sizeof second));
        }
    }
    return GDU_ST_OK;
}

static int by_shard_name(const void *key, const void *shard)
{
    return strcmp(key, *(char *const *)shard);
}

/* Every tensor the index maps must be in the shard it names. */
static gdu_st_status check_index(const gdu_st_model *m, const st_index *index, gdu_st_error *err)
{
    const char *tensor;
    json_t *shard;
    json_object_foreach(index->weight_map, tensor, shard)
    {
        long i = gdu_st_model_find(m, tensor);
        const char *name = json_string_value(shard);
        char **hit = bsearch(name, index->shards, index->shard_count, sizeof *index->shards,
                             by_shard_name); /* the shard names are sorted */
        if (i < 0 || hit == NULL || m->tensors[i].file != (size_t)(hit - index->shards))
            return st_fail(err, GDU_ST_ERR_INDEX,
                           "the index maps tensor '%.80s' to %.120s, which does not hold it",
                           tensor, name);
    }
    return GDU_ST_OK;
}

gdu_st_status gdu_st_open(const char *path, gdu_st_model **out, gdu_st_error *err)
{
    return gdu_st_open_flags(path, 0, out, err);
}

gdu_st_status gdu_st_open_flags(const char *path, unsigned flags, gdu_st_model **out,
                                gdu_st_error *err)
{
    if (path == NULL || out == NULL)
        return st_fail(err, GDU_ST_ERR_INVALID_ARGUMENT, "NULL argument");
    *out = NULL;
    if (flags & ~(GDU_ST_LENIENT | GDU_ST_FOLDER))
        return st_unknown_flags(err, flags & ~GDU_ST_FOLDER);
    gdu_st_model *m = calloc(1, sizeof *m);
    if (m == NULL)
        return st_fail(err, GDU_ST_ERR_NOMEM, "out of memory");
    st_index index = {0};
    char *folder = NULL;
    gdu_st_status s = list_files(m, path, flags, &index, &folder, err);
    size_t keep = st_files_within_limit(ST_KEEP_FILES, 8);
    st_shard_root root = {0};
    if (s == GDU_ST_OK && folder != NULL)
        s = shard_root_resolve(&root, folder, err);
    for (size_t f = 0; s == GDU_ST_OK && f < m->file_count; f++) {
        s = open_file(m, f, folder ? &root : NULL, folder ? index.shards[f] : NULL,
                      flags & GDU_ST_LENIENT, keep, err);
        if (s == GDU_ST_ERR_PATH_ESCAPE)
            st_prefix(err, path);
    }
    shard_root_free(&root);
    free(folder);
    if (s == GDU_ST_OK) {
        s = build_table(m, err);
        if (s == GDU_ST_OK && index.root != NULL)
            s = check_index(m, &index, err);
        if (s != GDU_ST_OK && index.root != NULL)
            st_prefix(err, path);
    }
    st_index_free(&index);
    if (s != GDU_ST_OK) {
        gdu_st_model_free(m);
        return s;
    }
    *out = m;
    return st_ok(err);
}

void gdu_st_model_free(gdu_st_model *m)
{
    if (m == NULL)
        return;
    if (m->pending != NULL)
        m->finish_pending(m, NULL);
    for (size_t f = 0; f < m->file_count; f++) {
        st_block_release(m->files[f].block);
        gdu_st_header_free(m->files[f].header);
        free(m->files[f].path);
        if (m->files[f].fd >= 0)
            close(m->files[f].fd);
    }
    free(m->files);
    free(m->tensors);
    free(m->by_name);
    free(m);
}

size_t gdu_st_model_tensor_count(const gdu_st_model *m) { return m ? m->tensor_count : 0; }

const gdu_st_tensor *gdu_st_model_tensor(const gdu_st_model *m, size_t index)
{
    return m && index < m->tensor_count ? &m->tensors[index] : NULL;
}

long gdu_st_model_find_n(const gdu_st_model *m, const char *name, size_t len)
{
    size_t lo = 0, hi = m && name ? m->tensor_count : 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const gdu_st_tensor *t = m->by_name[mid];
        int c = compare_names(name, len, t->name, t->name_len);
        if (c == 0)
            return (long)(t - m->tensors);
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return -1;
}

long gdu_st_model_find(const gdu_st_model *m, const char *name)
{
    return name ? gdu_st_model_find_n(m, name, strlen(name)) : -1;
}

size_t gdu_st_model_file_count(const gdu_st_model *m) { return m ? m->file_count : 0; }

const char *gdu_st_model_file_path(const gdu_st_model *m, size_t index)
{
    return m && index < m->file_count ? m->files[index].path : NULL;
}

const gdu_st_header *gdu_st_model_file_header(const gdu_st_model *m, size_t index)
{
    return m && index < m->file_count ? m->files[index].header : NULL;
}

gdu_st_status gdu_st_model_file_open(const gdu_st_model *m, size_t index, gdu_io_engine *engine,
                                     gdu_io_file **out, gdu_st_error *err)
{
    if (out != NULL)
        *out = NULL;
    if (m == NULL || engine == NULL || out == NULL)
        return st_fail(err, GDU_ST_ERR_INVALID_ARGUMENT, "NULL argument");
    if (index >= m->file_count)
        return st_fail(err, GDU_ST_ERR_INVALID_ARGUMENT, "file %zu of a checkpoint of %zu", index,
                       m->file_count);
    int fd = -1;
    gdu_st_status s = st_file_descriptor(m, index, &fd, err);
    if (s != GDU_ST_OK)
        return s;
    char why[256] = "";
    int rc = gdu_io_open_fd(engine, fd, GDU_IO_READ, out, why, sizeof why);
    st_file_descriptor_done(m, index, fd);
    if (rc == -EMFILE || rc == -ENFILE)
        return st_open_fail(err, m->files[index].path, rc);
    if (rc != 0)
        return st_fail(err, GDU_ST_ERR_OPEN, "%s: %s", m->files[index].path, why);
    return st_ok(err);
}

gdu_st_load_stats gdu_st_model_stats(const gdu_st_model *m)
{
    return m ? m->stats : (gdu_st_load_stats){0};
}

const char *gdu_st_version(void) { return GDUNLOCK_VERSION; }
