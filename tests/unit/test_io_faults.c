/* Error injection: the engine's pread/pwrite are replaced to return EINTR,
 * partial transfers, EIO in the middle of a transfer and ENOSPC; the engine
 * must retry what is retryable and never report a failed byte as moved. */
#include "io/io_internal.h"
#include "io_test_util.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <cmocka.h>

#define CHUNK (16u << 10)
#define SIZE ((uint64_t)CHUNK * 10)

static atomic_uint_fast64_t bad_offset; /* reads covering this offset fail with EIO */
static atomic_int interrupt_every;      /* every Nth call fails with EINTR (0: never) */
static atomic_int call_count;
static atomic_int partial;              /* transfer at most half of what is asked */
static atomic_uint_fast64_t space_left; /* pwrite fails with ENOSPC beyond this file offset */
static atomic_int refuse_direct;        /* O_DIRECT transfers fail with EINVAL */

static int refused(int fd)
{
    if (atomic_load(&refuse_direct) && (fcntl(fd, F_GETFL) & O_DIRECT)) {
        errno = EINVAL;
        return 1;
    }
    return 0;
}

static int maybe_interrupt(void)
{
    int every = atomic_load(&interrupt_every);
    if (every > 0 && atomic_fetch_add(&call_count, 1) % every == 0) {
        errno = EINTR;
        return 1;
    }
    return 0;
}

static ssize_t faulty_pread(int fd, void *buf, size_t n, off_t off)
{
    if (maybe_interrupt() || refused(fd))
        return -1;
    uint64_t bad = atomic_load(&bad_offset);
    if ((uint64_t)off <= bad && bad < (uint64_t)off + n) {
        errno = EIO;
        return -1;
    }
    if (atomic_load(&partial) && n > 1)
        n /= 2;
    return pread(fd, buf, n, off);
}

static ssize_t faulty_pwrite(int fd, const void *buf, size_t n, off_t off)
{
    if (maybe_interrupt() || refused(fd))
        return -1;
    uint64_t limit = atomic_load(&space_left);
    if ((uint64_t)off >= limit) {
        errno = ENOSPC;
        return -1;
    }
    if ((uint64_t)off + n > limit)
        n = (size_t)(limit - (uint64_t)off); /* a short write, then ENOSPC */
    return pwrite(fd, buf, n, off);
}

static const gdu_io_sys faulty = {faulty_pread, faulty_pwrite, NULL, NULL};

typedef struct {
    char dir[64];
    char *path;
    gdu_io_engine *e;
} fixture;

static int setup(void **state)
{
    fixture *fx = calloc(1, sizeof *fx);
    *state = fx;
    snprintf(fx->dir, sizeof fx->dir, "./gdu-io-faults-XXXXXX");
    if (mkdtemp(fx->dir) == NULL)
        return -1;
    fx->path = io_test_file(fx->dir, "data.bin", SIZE, 3);
    fx->e = io_test_engine(3, CHUNK, 2, GDU_IO_DIRECT_OFF);
    if (fx->path == NULL || fx->e == NULL)
        return -1;
    gdu_io_engine_set_sys(fx->e, &faulty);
    atomic_store(&bad_offset, UINT64_MAX);
    atomic_store(&interrupt_every, 0);
    atomic_store(&partial, 0);
    atomic_store(&space_left, UINT64_MAX);
    atomic_store(&refuse_direct, 0);
    return 0;
}

static int teardown(void **state)
{
    fixture *fx = *state;
    gdu_io_engine_destroy(fx->e);
    io_test_remove_dir(fx->dir, fx->path);
    free(fx);
    return 0;
}

static void eintr_and_partial_reads_are_retried(void **state)
{
    fixture *fx = *state;
    atomic_store(&interrupt_every, 2);
    atomic_store(&partial, 1);
    gdu_io_file *f = NULL;
    assert_int_equal(gdu_io_open(fx->e, fx->path, GDU_IO_READ, &f, NULL, 0), 0);
    uint8_t *buf = malloc(SIZE);
    uint64_t done = 0;
    char why[256] = "";
    assert_int_equal(gdu_io_read(f, 7, SIZE, buf, &done, why, sizeof why), 0);
    assert_int_equal(done, SIZE - 7);
    for (uint64_t i = 0; i < done; i++)
        assert_int_equal(buf[i], io_test_byte(7 + i, 3));
    free(buf);
    gdu_io_close(f);
}

static void eio_mid_transfer_is_reported_with_the_good_prefix(void **state)
{
    fixture *fx = *state;
    const uint64_t bad = 5 * CHUNK + 100; /* inside the 6th chunk */
    atomic_store(&bad_offset, bad);
    gdu_io_file *f = NULL;
    assert_int_equal(gdu_io_open(fx->e, fx->path, GDU_IO_READ, &f, NULL, 0), 0);
    uint8_t *buf = malloc(SIZE);
    uint64_t done = 0;
    char why[256] = "";
    int r = gdu_io_read(f, 0, SIZE, buf, &done, why, sizeof why);
    assert_int_equal(r, -EIO);
    assert_non_null(strstr(why, "Input/output error"));
    /* Only whole chunks before the failing one count, and they are right. */
    assert_int_equal(done, 5 * CHUNK);
    for (uint64_t i = 0; i < done; i++)
        assert_int_equal(buf[i], io_test_byte(i, 3));
    /* A batch: the extent that covers the bad offset fails, the others not. */
    gdu_io_extent x[3] = {
        {.offset = 0, .length = CHUNK, .mem = buf},
        {.offset = bad - 10, .length = 20, .mem = buf + CHUNK},
        {.offset = 8 * CHUNK, .length = CHUNK, .mem = buf + 2 * CHUNK},
    };
    gdu_io_request *req = NULL;
    assert_int_equal(gdu_io_submit(f, GDU_IO_OP_READ, x, 3, NULL, NULL, &req), 0);
    uint64_t bytes = 0;
    assert_int_equal(gdu_io_wait(req, &bytes, why, sizeof why), -EIO);
    assert_int_equal(x[0].status, 0);
    assert_int_equal(x[0].done, CHUNK);
    assert_int_equal(x[1].status, -EIO);
    assert_int_equal(x[1].done, 0);
    assert_int_equal(x[2].status, 0);
    assert_int_equal(x[2].done, CHUNK);
    assert_int_equal(bytes, 2 * CHUNK);
    free(buf);
    gdu_io_close(f);
}

/* A chunk read in pieces that fails in its fourth piece: the pieces before
 * it were copied and count, nothing after them does. */
static void eio_in_a_piece_keeps_the_pieces_before_it(void **state)
{
    fixture *fx = *state;
    gdu_io_engine_set_read_piece(fx->e, 4096);
    const uint64_t bad = 5 * CHUNK + 3 * 4096 + 100;
    atomic_store(&bad_offset, bad);
    atomic_store(&interrupt_every, 5);
    gdu_io_file *f = NULL;
    assert_int_equal(gdu_io_open(fx->e, fx->path, GDU_IO_READ, &f, NULL, 0), 0);
    uint8_t *buf = malloc(SIZE);
    memset(buf, 0xEE, SIZE);
    uint64_t done = 0;
    char why[256] = "";
    assert_int_equal(gdu_io_read(f, 0, SIZE, buf, &done, why, sizeof why), -EIO);
    assert_non_null(strstr(why, "Input/output error"));
    assert_int_equal(done, 5 * CHUNK + 3 * 4096);
    for (uint64_t i = 0; i < done; i++)
        assert_int_equal(buf[i], io_test_byte(i, 3));
    free(buf);
    gdu_io_close(f);
}

static void enospc_on_write_is_reported(void **state)
{
    fixture *fx = *state;
    char out[128];
    snprintf(out, sizeof out, "%s/out.bin", fx->dir);
    atomic_store(&space_left, 3 * CHUNK + 500);
    atomic_store(&interrupt_every, 3);
    gdu_io_file *f = NULL;
    assert_int_equal(
        gdu_io_open(fx->e, out, GDU_IO_WRITE | GDU_IO_CREATE | GDU_IO_TRUNCATE, &f, NULL, 0), 0);
    uint8_t *buf = malloc(SIZE);
    memset(buf, 0x5A, SIZE);
    uint64_t done = 0;
    char why[256] = "";
    assert_int_equal(gdu_io_write(f, 0, SIZE, buf, &done, why, sizeof why), -ENOSPC);
    assert_non_null(strstr(why, "No space left on device"));
    assert_int_equal(done, 3 * CHUNK); /* the chunk that hit ENOSPC does not count */
    free(buf);
    gdu_io_close(f);
}

/* A file system that accepts O_DIRECT at open but refuses the transfers:
 * the engine falls back to buffered I/O for that file, says so, and the
 * data is still right. */
static void direct_refused_mid_way_falls_back_to_buffered(void **state)
{
    fixture *fx = *state;
    gdu_io_engine *e = io_test_engine(2, CHUNK, 2, GDU_IO_DIRECT_ON);
    gdu_io_engine_set_sys(e, &faulty);
    atomic_store(&refuse_direct, 1);
    char out[128];
    snprintf(out, sizeof out, "%s/out.bin", fx->dir);
    gdu_io_file *f = NULL;
    assert_int_equal(gdu_io_open(e, out, GDU_IO_READ | GDU_IO_WRITE | GDU_IO_CREATE, &f, NULL, 0),
                     0);
    assert_true(gdu_io_file_direct(f));
    uint8_t *buf = malloc(SIZE), *back = malloc(SIZE);
    for (uint64_t i = 0; i < SIZE; i++)
        buf[i] = io_test_byte(i, 11);
    uint64_t done = 0;
    char why[256] = "";
    assert_int_equal(gdu_io_write(f, 0, SIZE, buf, &done, why, sizeof why), 0);
    assert_int_equal(done, SIZE);
    assert_int_equal(gdu_io_read(f, 0, SIZE, back, &done, why, sizeof why), 0);
    assert_int_equal(done, SIZE);
    assert_memory_equal(back, buf, SIZE);
    assert_false(gdu_io_file_direct(f));
    assert_non_null(strstr(gdu_io_file_reason(f), "O_DIRECT read refused"));
    assert_non_null(strstr(gdu_io_file_reason(f), "O_DIRECT write refused"));
    free(buf);
    free(back);
    gdu_io_close(f);
    gdu_io_engine_destroy(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(eintr_and_partial_reads_are_retried, setup, teardown),
        cmocka_unit_test_setup_teardown(eio_mid_transfer_is_reported_with_the_good_prefix, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(eio_in_a_piece_keeps_the_pieces_before_it, setup, teardown),
        cmocka_unit_test_setup_teardown(enospc_on_write_is_reported, setup, teardown),
        cmocka_unit_test_setup_teardown(direct_refused_mid_way_falls_back_to_buffered, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
