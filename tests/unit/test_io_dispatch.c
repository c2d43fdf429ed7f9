/* How requests are handed to the workers: buffered reads in read pieces
 * whatever the chunk size, O_DIRECT reads and writes in whole chunks; and
 * the chunk size an engine gets when the caller leaves it 0 (16 MiB with
 * O_DIRECT on, else 4 MiB). The system calls are counted through the
 * engine's injectable pread/pwrite. */
#include "io/io_internal.h"
#include "io_test_util.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <cmocka.h>

#define CHUNK (64u << 10)
#define PIECE (16u << 10)
#define SIZE ((uint64_t)CHUNK * 8)

static atomic_int reads, direct_reads;
static atomic_uint_fast64_t largest;

static ssize_t counting_pread(int fd, void *buf, size_t n, off_t off)
{
    atomic_fetch_add(&reads, 1);
    if (fcntl(fd, F_GETFL) & O_DIRECT)
        atomic_fetch_add(&direct_reads, 1);
    uint64_t seen = atomic_load(&largest);
    while (n > seen && !atomic_compare_exchange_weak(&largest, &seen, n)) {
    }
    return pread(fd, buf, n, off);
}

static ssize_t plain_pwrite(int fd, const void *buf, size_t n, off_t off)
{
    return pwrite(fd, buf, n, off);
}

static const gdu_io_sys counting = {counting_pread, plain_pwrite, NULL, NULL};

static char dir[64];
static char *path;

static int setup(void **state)
{
    snprintf(dir, sizeof dir, "./gdu-io-dispatch-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return -1;
    path = io_test_file(dir, "data.bin", SIZE, 9);
    return path == NULL ? -1 : 0;
}

static int teardown(void **state)
{
    io_test_remove_dir(dir, path);
    return 0;
}

/* Reads [0, len) of the test file with one request on e (pieces of PIECE,
 * preads counted): its status, *done its good bytes, each checked, and
 * *direct the file's direct flag. */
static int read_prefix(gdu_io_engine *e, uint64_t len, uint64_t *done, bool *direct)
{
    atomic_store(&reads, 0);
    atomic_store(&direct_reads, 0);
    atomic_store(&largest, 0);
    gdu_io_engine_set_sys(e, &counting);
    gdu_io_engine_set_read_piece(e, PIECE);
    gdu_io_file *f = NULL;
    assert_int_equal(gdu_io_open(e, path, GDU_IO_READ, &f, NULL, 0), 0);
    uint8_t *buf = calloc(1, len);
    assert_non_null(buf);
    char why[256] = "";
    int status = gdu_io_read(f, 0, len, buf, done, why, sizeof why);
    for (uint64_t i = 0; i < *done; i++)
        if (buf[i] != io_test_byte(i, 9))
            fail_msg("byte %llu wrong", (unsigned long long)i);
    *direct = gdu_io_file_direct(f);
    free(buf);
    gdu_io_close(f);
    return status;
}

/* Reads the whole file with one request and checks every byte; returns the
 * file's direct flag. */
static bool read_all(gdu_io_engine *e)
{
    uint64_t done = 0;
    bool direct = false;
    assert_int_equal(read_prefix(e, SIZE, &done, &direct), 0);
    assert_int_equal(done, SIZE);
    return direct;
}

/* One worker: with more, the last pieces, fewer than the workers, move in
 * parts (a_short_queue_moves_in_parts). */
static void buffered_reads_go_out_in_pieces(void **state)
{
    gdu_io_engine *e = io_test_engine(1, CHUNK, 2, GDU_IO_DIRECT_OFF);
    assert_non_null(e);
    assert_false(read_all(e));
    assert_int_equal(atomic_load(&reads), SIZE / PIECE);
    assert_int_equal(atomic_load(&largest), PIECE);
    gdu_io_engine_destroy(e);
}

static void direct_reads_go_out_in_whole_chunks(void **state)
{
    gdu_io_engine *e = io_test_engine(3, CHUNK, 2, GDU_IO_DIRECT_ON);
    assert_non_null(e);
    if (!read_all(e)) { /* this folder's file system refuses O_DIRECT (tmpfs) */
        gdu_io_engine_destroy(e);
        skip();
    }
    assert_int_equal(atomic_load(&direct_reads), SIZE / CHUNK);
    assert_int_equal(atomic_load(&largest), CHUNK);
    gdu_io_engine_destroy(e);
}

/* One piece queued and four workers: the piece moves in four parts of a
 * quarter each (GDU_IO_MAX_PARTS), so that the idle workers share it; one
 * worker alone reads it whole. */
static void a_short_queue_moves_in_parts(void **state)
{
    uint64_t done = 0;
    bool direct = false;
    gdu_io_engine *e = io_test_engine(4, CHUNK, 2, GDU_IO_DIRECT_OFF);
    assert_non_null(e);
    assert_int_equal(read_prefix(e, PIECE, &done, &direct), 0);
    assert_int_equal(done, PIECE);
    assert_int_equal(atomic_load(&reads), 4);
    assert_int_equal(atomic_load(&largest), PIECE / 4);
    gdu_io_engine_destroy(e);
    e = io_test_engine(1, CHUNK, 2, GDU_IO_DIRECT_OFF);
    assert_non_null(e);
    assert_int_equal(read_prefix(e, PIECE, &done, &direct), 0);
    assert_int_equal(done, PIECE);
    assert_int_equal(atomic_load(&reads), 1);
    gdu_io_engine_destroy(e);
}

/* Parts are cut so that the idle workers take them in one round, workers /
 * queued of them: four pieces on four workers move whole while three or four
 * are queued, the third in halves (two queued), the last in quarters. */
static void parts_fill_the_idle_workers_once(void **state)
{
    uint64_t done = 0;
    bool direct = false;
    gdu_io_engine *e = io_test_engine(4, CHUNK, 2, GDU_IO_DIRECT_OFF);
    assert_non_null(e);
    assert_int_equal(read_prefix(e, 4 * PIECE, &done, &direct), 0);
    assert_int_equal(done, 4 * PIECE);
    assert_int_equal(atomic_load(&reads), 1 + 1 + 2 + 4);
    assert_int_equal(atomic_load(&largest), PIECE);
    gdu_io_engine_destroy(e);
}

static atomic_llong fail_at = -1;

static ssize_t failing_pread(int fd, void *buf, size_t n, off_t off)
{
    if (off == atomic_load(&fail_at)) {
        errno = EIO;
        return -1;
    }
    return counting_pread(fd, buf, n, off);
}

/* A part that fails fails its request, and the bytes reported good stop
 * where it starts, whatever the parts after it did. */
static void a_failing_part_cuts_the_request(void **state)
{
    static const gdu_io_sys failing = {failing_pread, plain_pwrite, NULL, NULL};
    gdu_io_engine *e = io_test_engine(4, CHUNK, 2, GDU_IO_DIRECT_OFF);
    assert_non_null(e);
    atomic_store(&fail_at, PIECE / 2);
    uint64_t done = 1;
    gdu_io_engine_set_sys(e, &failing);
    gdu_io_file *f = NULL;
    assert_int_equal(gdu_io_open(e, path, GDU_IO_READ, &f, NULL, 0), 0);
    gdu_io_engine_set_read_piece(e, PIECE);
    uint8_t buf[PIECE];
    char why[256] = "";
    assert_int_equal(gdu_io_read(f, 0, PIECE, buf, &done, why, sizeof why), -EIO);
    assert_int_equal(done, PIECE / 2);
    for (uint64_t i = 0; i < done; i++)
        assert_int_equal(buf[i], io_test_byte(i, 9));
    gdu_io_close(f);
    gdu_io_engine_destroy(e);
    atomic_store(&fail_at, -1);
}

static size_t default_chunk(gdu_io_direct direct)
{
    gdu_io_options o;
    gdu_io_options_default(&o, NULL, 0);
    o.backend = GDU_IO_BACKEND_HOST;
    o.workers = 1;
    o.staging_per_worker = 1;
    o.chunk_size = 0;
    o.direct = direct;
    gdu_io_engine *e = NULL;
    char why[256];
    assert_int_equal(gdu_io_engine_create(&o, &e, why, sizeof why), 0);
    size_t chunk = gdu_io_engine_options(e)->chunk_size;
    gdu_io_engine_destroy(e);
    return chunk;
}

static void the_default_chunk_depends_on_o_direct(void **state)
{
    unsetenv("GDUNLOCK_IO_DIRECT");
    unsetenv("GDUNLOCK_IO_CHUNK");
    assert_int_equal(default_chunk(GDU_IO_DIRECT_ON), GDU_IO_DEFAULT_DIRECT_CHUNK);
    assert_int_equal(default_chunk(GDU_IO_DIRECT_AUTO), GDU_IO_DEFAULT_CHUNK);
    assert_int_equal(default_chunk(GDU_IO_DIRECT_OFF), GDU_IO_DEFAULT_CHUNK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(buffered_reads_go_out_in_pieces),
        cmocka_unit_test(direct_reads_go_out_in_whole_chunks),
        cmocka_unit_test(a_short_queue_moves_in_parts),
        cmocka_unit_test(parts_fill_the_idle_workers_once),
        cmocka_unit_test(a_failing_part_cuts_the_request),
        cmocka_unit_test(the_default_chunk_depends_on_o_direct),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
