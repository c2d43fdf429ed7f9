/* Byte-exact transfers through the host backend: random offsets and sizes
 * (1 byte, unaligned, across chunk boundaries, at and past end of file), on
 * the build disk (O_DIRECT works) and on tmpfs (O_DIRECT refused before
 * Linux 6.6), reads and
 * writes, batches, callbacks and many threads at once. */
#include "io/io_internal.h"
#include "io_test_util.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/stat.h>
#include <cmocka.h>

#define CHUNK (64u << 10)
#define FILE_SIZE ((uint64_t)3 * CHUNK * 5 + 4097) /* not a multiple of anything useful */

typedef struct {
    char dir[256];
    char *path;
} fixture;

static int make_dir(fixture *fx, const char *parent)
{
    snprintf(fx->dir, sizeof fx->dir, "%s/gdu-io-test-XXXXXX", parent);
    if (mkdtemp(fx->dir) == NULL)
        return -1;
    fx->path = io_test_file(fx->dir, "data.bin", FILE_SIZE, 7);
    return fx->path ? 0 : -1;
}

static int setup_disk(void **state)
{
    fixture *fx = calloc(1, sizeof *fx);
    *state = fx;
    return make_dir(fx, ".");
}

static int setup_tmpfs(void **state)
{
    fixture *fx = calloc(1, sizeof *fx);
    *state = fx;
    return make_dir(fx, "/dev/shm");
}

static int teardown(void **state)
{
    fixture *fx = *state;
    io_test_remove_dir(fx->dir, fx->path);
    free(fx);
    return 0;
}

/* Reads [off, off+len) and checks every byte and the exact count. */
static void check_read(gdu_io_file *f, uint64_t off, uint64_t len)
{
    uint8_t *buf = malloc(len ? len : 1);
    memset(buf, 0xEE, len);
    uint64_t done = 12345;
    char why[256] = "";
    int r = gdu_io_read(f, off, len, buf, &done, why, sizeof why);
    assert_int_equal(r, 0);
    uint64_t expect = off >= FILE_SIZE ? 0 : (off + len > FILE_SIZE ? FILE_SIZE - off : len);
    assert_int_equal(done, expect);
    for (uint64_t i = 0; i < expect; i++)
        if (buf[i] != io_test_byte(off + i, 7))
            fail_msg("byte %llu of read at %llu+%llu differs", (unsigned long long)i,
                     (unsigned long long)off, (unsigned long long)len);
    for (uint64_t i = expect; i < len; i++)
        assert_int_equal(buf[i], 0xEE); /* nothing written past what was read */
    free(buf);
}

/* piece: the engine's read piece size for buffered reads (0: its default). */
static void random_reads(const char *path, gdu_io_direct direct, bool expect_direct, size_t piece)
{
    gdu_io_engine *e = io_test_engine(4, CHUNK, 2, direct);
    assert_non_null(e);
    if (piece != 0)
        gdu_io_engine_set_read_piece(e, piece);
    gdu_io_file *f = NULL;
    char why[256];
    assert_int_equal(gdu_io_open(e, path, GDU_IO_READ, &f, why, sizeof why), 0);
    assert_int_equal(gdu_io_file_direct(f), expect_direct);
    assert_int_equal(gdu_io_file_backend(f), GDU_IO_BACKEND_HOST);
    assert_int_equal(gdu_io_file_size(f), (int64_t)FILE_SIZE);
    /* Edge cases first. */
    const uint64_t cases[][2] = {
        {0, 1},
        {1, 1},
        {4095, 2},
        {CHUNK - 1, 2},
        {CHUNK, CHUNK},
        {CHUNK - 3, 3 * CHUNK + 7},
        {0, FILE_SIZE},
        {FILE_SIZE - 1, 1},
        {FILE_SIZE - 10, 100},
        {FILE_SIZE, 10},
        {FILE_SIZE + 4096, 5},
        {123, 0},
        {4096, 4096},
        {0, FILE_SIZE + 9999},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_read(f, cases[i][0], cases[i][1]);
    uint64_t rng = 0x1234567;
    for (int i = 0; i < 150; i++) {
        uint64_t off = io_test_rand(&rng) % (FILE_SIZE + 100);
        uint64_t len = 1 + io_test_rand(&rng) % (i % 3 == 0 ? 16 : 3 * CHUNK);
        check_read(f, off, len);
    }
    gdu_io_close(f);
    gdu_io_engine_destroy(e);
}

static void reads_on_disk_buffered(void **state)
{
    random_reads(((fixture *)*state)->path, GDU_IO_DIRECT_OFF, false, 0);
}

/* Chunks read in pieces (3 pages: not a divisor of the chunk, so piece and
 * chunk boundaries interleave), each piece copied as soon as it is read. */
static void reads_on_disk_buffered_in_pieces(void **state)
{
    random_reads(((fixture *)*state)->path, GDU_IO_DIRECT_OFF, false, 3 * 4096);
}

static void reads_on_disk_direct(void **state)
{
    random_reads(((fixture *)*state)->path, GDU_IO_DIRECT_ON, true, 0);
}

/* tmpfs refused O_DIRECT before Linux 6.6 and accepts it since: whichever
 * this kernel does, the engine must follow it, say so, and read right. */
static void reads_on_tmpfs_follow_what_it_accepts(void **state)
{
    fixture *fx = *state;
    int probe = open(fx->path, O_RDONLY | O_DIRECT);
    bool accepted = probe >= 0;
    if (probe >= 0)
        close(probe);
    random_reads(fx->path, GDU_IO_DIRECT_ON, accepted, 0);
    gdu_io_engine *e = io_test_engine(2, CHUNK, 2, GDU_IO_DIRECT_ON);
    gdu_io_file *f = NULL;
    assert_int_equal(gdu_io_open(e, fx->path, GDU_IO_READ, &f, NULL, 0), 0);
    assert_non_null(strstr(gdu_io_file_reason(f),
                           accepted ? "O_DIRECT reads" : "O_DIRECT refused by the file system"));
    gdu_io_close(f);
    gdu_io_engine_destroy(e);
}

/* The page cache as the tests say it is (gdu_io_sys.resident): the file's
 * pages in [cached_lo, cached_hi) are resident, the others not. The real
 * page cache is shared with every process on the machine and eviction is
 * only advice, so a test that evicted pages and then asked the kernel failed
 * whenever other tests read files beside it. */
static uint64_t cached_lo, cached_hi;

static int model_resident(void *map, uint64_t offset, size_t len, unsigned char *vec)
{
    (void)map;
    for (size_t p = 0; p * 4096 < len; p++) {
        uint64_t at = offset + p * 4096;
        vec[p] = at >= cached_lo && at < cached_hi;
    }
    return 0;
}

static const gdu_io_sys modelled_cache = {NULL, NULL, model_resident, NULL};

static gdu_io_engine *engine_seeing(uint64_t lo, uint64_t hi)
{
    cached_lo = lo;
    cached_hi = hi;
    gdu_io_engine *e = io_test_engine(2, CHUNK, 2, GDU_IO_DIRECT_AUTO);
    gdu_io_engine_set_sys(e, &modelled_cache);
    return e;
}

static void auto_direct_follows_the_page_cache(void **state)
{
    fixture *fx = *state;
    gdu_io_engine *e = engine_seeing(0, UINT64_MAX);
    gdu_io_file *f = NULL;
    /* Cached: buffered. */
    assert_int_equal(gdu_io_open(e, fx->path, GDU_IO_READ, &f, NULL, 0), 0);
    assert_false(gdu_io_file_direct(f));
    assert_non_null(strstr(gdu_io_file_reason(f), "100% of the file in page cache"));
    gdu_io_close(f);
    /* Not cached: O_DIRECT, and the bytes still right. */
    cached_hi = 0;
    assert_int_equal(gdu_io_open(e, fx->path, GDU_IO_READ, &f, NULL, 0), 0);
    assert_true(gdu_io_file_direct(f));
    assert_non_null(strstr(gdu_io_file_reason(f), "0% of the file in page cache"));
    check_read(f, 5, 2 * CHUNK);
    gdu_io_close(f);
    gdu_io_engine_destroy(e);
}

/* The percentage of the file a reason says is in the page cache, or -1. */
static int reason_cached_percent(const gdu_io_file *f)
{
    const char *r = gdu_io_file_reason(f), *p = strstr(r, "% of the file in page cache");
    if (p == NULL)
        return -1;
    while (p > r && p[-1] >= '0' && p[-1] <= '9')
        p--;
    return atoi(p);
}

/* The cached percentage the probe reports for an 8 MiB file whose bytes
 * [lo, hi) are cached, and whether it then chose O_DIRECT. */
static int probed_percent(const char *path, uint64_t lo, uint64_t hi, bool *direct)
{
    gdu_io_engine *e = engine_seeing(lo, hi);
    gdu_io_file *f = NULL;
    assert_int_equal(gdu_io_open(e, path, GDU_IO_READ, &f, NULL, 0), 0);
    int percent = reason_cached_percent(f);
    *direct = gdu_io_file_direct(f);
    gdu_io_close(f);
    gdu_io_engine_destroy(e);
    return percent;
}

/* The residency probe samples the whole file, not its start: whichever half
 * or quarter is cached, it sees about that much (and reads with O_DIRECT
 * below half). A probe that looked only at the file's first pages would say
 * 100% or 0%. */
static void auto_direct_samples_the_whole_file(void **state)
{
    fixture *fx = *state;
    const uint64_t size = 8u << 20;
    char *path = io_test_file(fx->dir, "residency.bin", size, 3);
    const struct {
        uint64_t lo, hi;
        int min, max;
        bool direct;
    } cases[] = {
        {0, size / 2, 45, 55, false},       {size / 2, size, 45, 55, false},
        {0, size / 4, 20, 30, true},        {size / 2, size * 3 / 4, 20, 30, true},
        {size * 3 / 4, size, 20, 30, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bool direct = false;
        int percent = probed_percent(path, cases[i].lo, cases[i].hi, &direct);
        if (percent < cases[i].min || percent > cases[i].max || direct != cases[i].direct)
            fail_msg("bytes [%llu, %llu) cached: probe says %d%%, O_DIRECT %d",
                     (unsigned long long)cases[i].lo, (unsigned long long)cases[i].hi, percent,
                     direct);
    }
    unlink(path);
    free(path);
}

/* Random writes applied to a model buffer and to the file through the
 * engine; then the whole file must equal the model. */
static void random_writes(fixture *fx, gdu_io_direct direct)
{
    char out[300];
    snprintf(out, sizeof out, "%s/out.bin", fx->dir);
    const uint64_t size = 5 * CHUNK + 333;
    uint8_t *model = calloc(1, size);
    gdu_io_engine *e = io_test_engine(3, CHUNK, 3, direct);
    gdu_io_file *f = NULL;
    char why[256];
    assert_int_equal(gdu_io_open(e, out,
                                 GDU_IO_READ | GDU_IO_WRITE | GDU_IO_CREATE | GDU_IO_TRUNCATE, &f,
                                 why, sizeof why),
                     0);
    uint64_t rng = 99;
    uint64_t hi = 0;
    for (int i = 0; i < 60; i++) {
        uint64_t off = io_test_rand(&rng) % size;
        uint64_t len = 1 + io_test_rand(&rng) % (i % 4 == 0 ? 9 : 2 * CHUNK);
        if (off + len > size)
            len = size - off;
        uint8_t *src = malloc(len);
        for (uint64_t k = 0; k < len; k++)
            src[k] = (uint8_t)io_test_rand(&rng);
        uint64_t done = 0;
        assert_int_equal(gdu_io_write(f, off, len, src, &done, why, sizeof why), 0);
        assert_int_equal(done, len);
        memcpy(model + off, src, len);
        if (off + len > hi)
            hi = off + len;
        free(src);
    }
    assert_int_equal(gdu_io_sync(f, why, sizeof why), 0);
    assert_int_equal(gdu_io_file_size(f), (int64_t)hi);
    uint8_t *back = malloc(hi);
    uint64_t done = 0;
    assert_int_equal(gdu_io_read(f, 0, hi, back, &done, why, sizeof why), 0);
    assert_int_equal(done, hi);
    assert_memory_equal(back, model, hi);
    free(back);
    gdu_io_close(f);
    gdu_io_engine_destroy(e);
    free(model);
}

static void writes_buffered(void **state) { random_writes(*state, GDU_IO_DIRECT_OFF); }
static void writes_direct(void **state) { random_writes(*state, GDU_IO_DIRECT_ON); }

typedef struct {
    int calls;
    int status;
    uint64_t bytes;
    pthread_mutex_t lock;
} cb_record;

static void record_cb(void *user, int status, uint64_t bytes)
{
    cb_record *r = user;
    pthread_mutex_lock(&r->lock);
    r->calls++;
    r->status = status;
    r->bytes = bytes;
    pthread_mutex_unlock(&r->lock);
}

static void batch_with_callback(void **state)
{
    fixture *fx = *state;
    gdu_io_engine *e = io_test_engine(4, CHUNK, 2, GDU_IO_DIRECT_ON);
    gdu_io_file *f = NULL;
    assert_int_equal(gdu_io_open(e, fx->path, GDU_IO_READ, &f, NULL, 0), 0);
    enum { N = 40 };
    gdu_io_extent x[N];
    uint8_t *mem[N];
    uint64_t rng = 5, expect = 0;
    for (int i = 0; i < N; i++) {
        x[i].offset = io_test_rand(&rng) % FILE_SIZE;
        x[i].length = 1 + io_test_rand(&rng) % (2 * CHUNK);
        mem[i] = malloc(x[i].length);
        x[i].mem = mem[i];
        uint64_t end =
            x[i].offset + x[i].length > FILE_SIZE ? FILE_SIZE : x[i].offset + x[i].length;
        expect += end - x[i].offset;
    }
    cb_record rec = {0, -1, 0, PTHREAD_MUTEX_INITIALIZER};
    gdu_io_request *r = NULL;
    assert_int_equal(gdu_io_submit(f, GDU_IO_OP_READ, x, N, record_cb, &rec, &r), 0);
    uint64_t bytes = 0;
    assert_int_equal(gdu_io_wait(r, &bytes, NULL, 0), 0);
    assert_int_equal(bytes, expect);
    assert_int_equal(rec.calls, 1);
    assert_int_equal(rec.status, 0);
    assert_int_equal(rec.bytes, expect);
    for (int i = 0; i < N; i++) {
        assert_int_equal(x[i].status, 0);
        for (uint64_t k = 0; k < x[i].done; k++)
            assert_int_equal(mem[i][k], io_test_byte(x[i].offset + k, 7));
        free(mem[i]);
    }
    /* An empty batch completes at once. */
    assert_int_equal(gdu_io_submit(f, GDU_IO_OP_READ, NULL, 0, NULL, NULL, &r), 0);
    assert_int_equal(gdu_io_poll(r), 1);
    assert_int_equal(gdu_io_wait(r, &bytes, NULL, 0), 0);
    assert_int_equal(bytes, 0);
    gdu_io_close(f);
    gdu_io_engine_destroy(e);
}

typedef struct {
    gdu_io_file *f;
    uint64_t seed;
    int failures;
} thread_arg;

static void *reader_thread(void *p)
{
    thread_arg *a = p;
    uint64_t rng = a->seed;
    for (int i = 0; i < 30; i++) {
        enum { N = 4 };
        gdu_io_extent x[N];
        uint8_t *mem[N];
        for (int k = 0; k < N; k++) {
            x[k].offset = io_test_rand(&rng) % FILE_SIZE;
            x[k].length = 1 + io_test_rand(&rng) % CHUNK;
            mem[k] = malloc(x[k].length);
            x[k].mem = mem[k];
        }
        gdu_io_request *r = NULL;
        if (gdu_io_submit(a->f, GDU_IO_OP_READ, x, N, NULL, NULL, &r) != 0 ||
            gdu_io_wait(r, NULL, NULL, 0) != 0)
            a->failures++;
        for (int k = 0; k < N; k++) {
            uint64_t end =
                x[k].offset + x[k].length > FILE_SIZE ? FILE_SIZE : x[k].offset + x[k].length;
            if (x[k].done != end - x[k].offset)
                a->failures++;
            for (uint64_t j = 0; j < x[k].done; j++)
                if (mem[k][j] != io_test_byte(x[k].offset + j, 7)) {
                    a->failures++;
                    break;
                }
            free(mem[k]);
        }
    }
    return NULL;
}

static void many_threads_at_once(void **state)
{
    fixture *fx = *state;
    gdu_io_engine *e = io_test_engine(6, CHUNK, 3, GDU_IO_DIRECT_ON);
    gdu_io_file *f = NULL;
    assert_int_equal(gdu_io_open(e, fx->path, GDU_IO_READ, &f, NULL, 0), 0);
    enum { T = 8 };
    pthread_t th[T];
    thread_arg args[T];
    for (int i = 0; i < T; i++) {
        args[i] = (thread_arg){f, 1000u + (uint64_t)i, 0};
        pthread_create(&th[i], NULL, reader_thread, &args[i]);
    }
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(args[i].failures, 0);
    }
    gdu_io_close(f);
    gdu_io_engine_destroy(e);
}

static void bad_requests_are_refused(void **state)
{
    fixture *fx = *state;
    gdu_io_engine *e = io_test_engine(1, CHUNK, 1, GDU_IO_DIRECT_OFF);
    gdu_io_file *f = NULL;
    char why[256] = "";
    assert_int_equal(gdu_io_open(e, "/nonexistent/x", GDU_IO_READ, &f, why, sizeof why), -ENOENT);
    assert_non_null(strstr(why, "/nonexistent/x"));
    assert_int_equal(gdu_io_open(e, fx->path, 0, &f, why, sizeof why), -EINVAL);
    assert_int_equal(gdu_io_open(e, fx->path, GDU_IO_READ | GDU_IO_TRUNCATE, &f, why, sizeof why),
                     -EINVAL);
    assert_int_equal(gdu_io_open(e, fx->path, GDU_IO_READ, &f, why, sizeof why), 0);
    uint8_t b[8];
    uint64_t done = 9;
    assert_int_equal(gdu_io_write(f, 0, 8, b, &done, why, sizeof why), -EINVAL);
    assert_int_equal(done, 0);
    assert_int_equal(gdu_io_read(f, 0, 8, NULL, &done, why, sizeof why), -EINVAL);
    assert_int_equal(gdu_io_read(f, UINT64_MAX - 2, 8, b, &done, why, sizeof why), -EINVAL);
    gdu_io_close(f);
    gdu_io_engine_destroy(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(reads_on_disk_buffered, setup_disk, teardown),
        cmocka_unit_test_setup_teardown(reads_on_disk_buffered_in_pieces, setup_disk, teardown),
        cmocka_unit_test_setup_teardown(reads_on_disk_direct, setup_disk, teardown),
        cmocka_unit_test_setup_teardown(reads_on_tmpfs_follow_what_it_accepts, setup_tmpfs,
                                        teardown),
        cmocka_unit_test_setup_teardown(auto_direct_follows_the_page_cache, setup_disk, teardown),
        cmocka_unit_test_setup_teardown(auto_direct_samples_the_whole_file, setup_disk, teardown),
        cmocka_unit_test_setup_teardown(writes_buffered, setup_disk, teardown),
        cmocka_unit_test_setup_teardown(writes_direct, setup_disk, teardown),
        cmocka_unit_test_setup_teardown(batch_with_callback, setup_disk, teardown),
        cmocka_unit_test_setup_teardown(many_threads_at_once, setup_disk, teardown),
        cmocka_unit_test_setup_teardown(bad_requests_are_refused, setup_disk, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
