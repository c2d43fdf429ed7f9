/* Reads submitted before their memory (gdu_io_submit_box_deferred, then
 * gdu_io_place): the workers read into staging at once, copy nothing until
 * the memory is given, then move exactly what gdu_io_submit_box moves;
 * cancelled, waited on or closed unplaced, they end without writing and
 * without hanging. Reads and copies are counted through the engine's
 * system-call seam and a counting mover. */
#include "io/io_internal.h"
#include "io_test_util.h"

#include <errno.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#define CHUNK (1u << 20)
#define SIZE ((uint64_t)8 << 20)
#define SEED 11
#define WORKERS 4
#define SLOTS 2

static atomic_int preads, copies;

static ssize_t counting_pread(int fd, void *buf, size_t n, off_t off)
{
    atomic_fetch_add(&preads, 1);
    return pread(fd, buf, n, off);
}

static void *refused_map(int fd, size_t len)
{
    (void)fd;
    (void)len;
    return MAP_FAILED;
}

static void *file_map(int fd, size_t len) { return mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0); }

/* Gathers by pread, so that their reads are counted too. */
static const gdu_io_sys pread_sys = {counting_pread, NULL, NULL, refused_map};
static const gdu_io_sys mapping_sys = {counting_pread, NULL, NULL, file_map};

static int counting_to_mem(void *wctx, unsigned slot, void *mem, const void *staging, size_t n,
                           char *why, size_t len)
{
    atomic_fetch_add(&copies, 1);
    return gdu_io_mover_host.to_mem(wctx, slot, mem, staging, n, why, len);
}

static char dir[64];
static char *path;

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "./gdu-io-deferred-XXXXXX");
    path = io_test_scratch(dir, SIZE, SEED);
    return path == NULL ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    io_test_remove_dir(dir, path);
    return 0;
}

static gdu_io_engine *engine_with(const gdu_io_sys *sys)
{
    static gdu_io_mover mover;
    mover = gdu_io_mover_host;
    mover.to_mem = counting_to_mem;
    gdu_io_engine *e = io_test_engine_moving(&mover, sys, WORKERS, CHUNK, SLOTS);
    assert_non_null(e);
    atomic_store(&preads, 0);
    atomic_store(&copies, 0);
    return e;
}

/* The boxes the loader reads: whole ranges of several chunks (cut into
 * parts while the queue is short), columns gathered by the caller's
 * planning (64 rows) and by a worker's, kept whole (1024 rows) or as
 * extents (two dimensions that do not merge). */
typedef struct {
    const char *name;
    uint64_t offset, length;
    unsigned ndims;
    uint64_t counts[2], strides[2];
} box;

static const box boxes[] = {
    {"3 MiB whole", 4096 + 100, 3 * CHUNK, 0, {0}, {0}},
    {"64 rows", 300, 1000, 1, {64}, {8192}},
    {"1024 rows", 300, 1000, 1, {1024}, {8192}},
    {"4 x 256 rows", 300, 1000, 2, {4, 256}, {256 * 8192 + 96, 8192}},
};

static size_t box_runs(const box *b)
{
    return b->ndims == 0 ? 1 : b->counts[0] * (b->ndims == 2 ? b->counts[1] : 1);
}

static uint64_t box_bytes(const box *b) { return box_runs(b) * b->length; }

/* The file offset of run i of b. */
static uint64_t run_offset(const box *b, size_t i)
{
    if (b->ndims < 2)
        return b->offset + i * b->strides[0];
    return b->offset + (i / b->counts[1]) * b->strides[0] + (i % b->counts[1]) * b->strides[1];
}

static void expect_file_bytes(const box *b, const uint8_t *buf)
{
    for (size_t i = 0; i < box_runs(b); i++)
        for (uint64_t k = 0; k < b->length; k += 97)
            if (buf[i * b->length + k] != io_test_byte(run_offset(b, i) + k, SEED))
                fail_msg("%s: run %zu byte %llu wrong", b->name, i, (unsigned long long)k);
}

static gdu_io_request *submit_deferred(gdu_io_file *f, const box *b)
{
    gdu_io_request *r = NULL;
    assert_int_equal(gdu_io_submit_box_deferred(f, b->offset, b->counts, b->strides, b->ndims,
                                                b->length, NULL, NULL, &r),
                     0);
    return r;
}

/* Waits up to 10 s for at least n preads; false if they did not come. */
static bool preads_reach(int n)
{
    struct timespec pause = {0, 1000000};
    for (int i = 0; i < 10000; i++) {
        if (atomic_load(&preads) >= n)
            return true;
        nanosleep(&pause, NULL);
    }
    return false;
}

/* The workers read a deferred request's bytes into staging before its
 * memory is given, and copy none of them until then: each box's first
 * chunk is read while the caller still allocates (had the engine waited
 * for the memory before reading, no pread would come), and nothing is
 * written through the stand-in address. Placed, every byte arrives. */
static void reads_start_before_the_memory_is_given(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof boxes / sizeof boxes[0]; k++) {
        const box *b = &boxes[k];
        gdu_io_engine *e = engine_with(&pread_sys);
        gdu_io_file *f = NULL;
        assert_int_equal(gdu_io_open(e, path, GDU_IO_READ, &f, NULL, 0), 0);
        uint8_t *buf = malloc(box_bytes(b));
        assert_non_null(buf);
        memset(buf, 0xee, box_bytes(b));
        gdu_io_request *r = submit_deferred(f, b);
        if (!preads_reach(1))
            fail_msg("%s: nothing was read before the memory was given", b->name);
        assert_int_equal(atomic_load(&copies), 0);
        assert_int_equal(gdu_io_poll(r), 0);
        assert_int_equal(gdu_io_place(r, buf), 0);
        uint64_t bytes = 0;
        assert_int_equal(gdu_io_wait(r, &bytes, NULL, 0), 0);
        assert_int_equal(bytes, box_bytes(b));
        expect_file_bytes(b, buf);
        free(buf);
        gdu_io_close(f);
        gdu_io_engine_destroy(e);
    }
}

/* A deferred read moves what gdu_io_submit_box moves, in as many copies,
 * from the file's mapping and by pread, placed at once (before or while
 * the workers take its chunks) or once its chunks wait in staging. */
static void a_deferred_read_moves_what_a_plain_one_does(void **state)
{
    (void)state;
    const gdu_io_sys *systems[] = {&pread_sys, &mapping_sys};
    for (size_t k = 0; k < sizeof boxes / sizeof boxes[0]; k++)
        for (size_t s = 0; s < 2; s++)
            for (int late = 0; late < 2; late++) {
                const box *b = &boxes[k];
                uint8_t *bufs[2];
                int copied[2];
                for (int way = 0; way < 2; way++) {
                    gdu_io_engine *e = engine_with(systems[s]);
                    gdu_io_file *f = NULL;
                    assert_int_equal(gdu_io_open(e, path, GDU_IO_READ, &f, NULL, 0), 0);
                    bufs[way] = malloc(box_bytes(b));
                    assert_non_null(bufs[way]);
                    memset(bufs[way], 0xee, box_bytes(b));
                    gdu_io_request *r = NULL;
                    if (way == 0) {
                        assert_int_equal(gdu_io_submit_box(f, GDU_IO_OP_READ, b->offset, b->counts,
                                                           b->strides, b->ndims, b->length,
                                                           bufs[way], NULL, NULL, &r),
                                         0);
                    } else {
                        r = submit_deferred(f, b);
                        if (late && s == 0 && !preads_reach(1))
                            fail_msg("%s: nothing read", b->name);
                        assert_int_equal(gdu_io_place(r, bufs[way]), 0);
                    }
                    uint64_t bytes = 0;
                    assert_int_equal(gdu_io_wait(r, &bytes, NULL, 0), 0);
                    assert_int_equal(bytes, box_bytes(b));
                    copied[way] = atomic_load(&copies);
                    gdu_io_close(f);
                    gdu_io_engine_destroy(e);
                }
                assert_int_equal(copied[0], copied[1]);
                assert_memory_equal(bufs[0], bufs[1], box_bytes(b));
                expect_file_bytes(b, bufs[1]);
                free(bufs[0]);
                free(bufs[1]);
            }
}

/* Cancelled (gdu_io_place with NULL) after its reads began, a deferred
 * read completes with -ECANCELED and no byte counted or copied; it cannot
 * be placed afterwards, nor can a plain request be placed at all. */
static void a_cancelled_read_copies_nothing(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof boxes / sizeof boxes[0]; k++) {
        gdu_io_engine *e = engine_with(&pread_sys);
        gdu_io_file *f = NULL;
        assert_int_equal(gdu_io_open(e, path, GDU_IO_READ, &f, NULL, 0), 0);
        gdu_io_request *r = submit_deferred(f, &boxes[k]);
        assert_true(preads_reach(1));
        assert_int_equal(gdu_io_place(r, NULL), 0);
        assert_int_equal(gdu_io_place(r, r), -EALREADY);
        char why[256] = "";
        uint64_t bytes = 1;
        assert_int_equal(gdu_io_wait(r, &bytes, why, sizeof why), -ECANCELED);
        assert_int_equal(bytes, 0);
        assert_non_null(strstr(why, "cancelled"));
        assert_int_equal(atomic_load(&copies), 0);

        uint8_t one[64];
        const uint64_t counts[] = {1}, strides[] = {0};
        assert_int_equal(gdu_io_submit_box(f, GDU_IO_OP_READ, 0, counts, strides, 1, sizeof one,
                                           one, NULL, NULL, &r),
                         0);
        assert_int_equal(gdu_io_place(r, one), -EINVAL);
        assert_int_equal(gdu_io_wait(r, NULL, NULL, 0), 0);
        assert_int_equal(gdu_io_place(NULL, one), -EINVAL);
        gdu_io_close(f);
        gdu_io_engine_destroy(e);
    }
}

/* Waited on while unplaced, a deferred read is cancelled rather than
 * waited for forever. */
static void waiting_on_an_unplaced_read_cancels_it(void **state)
{
    (void)state;
    gdu_io_engine *e = engine_with(&mapping_sys);
    gdu_io_file *f = NULL;
    assert_int_equal(gdu_io_open(e, path, GDU_IO_READ, &f, NULL, 0), 0);
    for (size_t k = 0; k < sizeof boxes / sizeof boxes[0]; k++) {
        gdu_io_request *r = submit_deferred(f, &boxes[k]);
        uint64_t bytes = 1;
        assert_int_equal(gdu_io_wait(r, &bytes, NULL, 0), -ECANCELED);
        assert_int_equal(bytes, 0);
    }
    assert_int_equal(atomic_load(&copies), 0);
    gdu_io_close(f);
    gdu_io_engine_destroy(e);
}

/* Closing a file with deferred reads never placed (a caller that gave up
 * on them) cancels them, where waiting for them would hang. In a child
 * process, which a hang would have killed by its alarm before it said
 * "closed" through the pipe; it then becomes /bin/true, since the requests
 * it gave up on cannot be freed after the close (an exit, even by SIGKILL,
 * has valgrind report them lost). */
static void closing_a_file_cancels_its_unplaced_reads(void **state)
{
    (void)state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        alarm(20);
        gdu_io_engine *e = engine_with(&pread_sys);
        gdu_io_file *f = NULL;
        if (gdu_io_open(e, path, GDU_IO_READ, &f, NULL, 0) == 0) {
            for (size_t k = 0; k < sizeof boxes / sizeof boxes[0]; k++)
                submit_deferred(f, &boxes[k]);
            gdu_io_close(f);
            gdu_io_engine_destroy(e);
            if (atomic_load(&copies) == 0 && write(fds[1], "closed", 6) != 6)
                _exit(3);
        }
        execl("/bin/true", "true", (char *)NULL);
        _exit(4);
    }
    close(fds[1]);
    char said[8] = "";
    ssize_t n = read(fds[0], said, sizeof said - 1);
    close(fds[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (n != 6 || strcmp(said, "closed") != 0)
        fail_msg("the child did not close (%s)", WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM
                                                     ? "SIGALRM: the close hung"
                                                     : "it failed, or copied");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reads_start_before_the_memory_is_given),
        cmocka_unit_test(a_deferred_read_moves_what_a_plain_one_does),
        cmocka_unit_test(a_cancelled_read_copies_nothing),
        cmocka_unit_test(waiting_on_an_unplaced_read_cancels_it),
        cmocka_unit_test(closing_a_file_cancels_its_unplaced_reads),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
