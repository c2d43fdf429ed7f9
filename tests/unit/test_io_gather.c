/* Gather chunks: many short reads whose memory follows one another (a column
 * slice of a tensor: one short range per row) move together, through one
 * staging slot with one copy to memory, instead of one queue round and one
 * copy each. From the file's mapping (the default for a buffered file)
 * only their own bytes are copied; where the file cannot be mapped, ranges
 * a short gap apart are read with one pread. Every byte, the counts of
 * preads, mappings and copies, end of file, a file cut short and failures
 * are checked through the engine's system-call seam and a counting mover. */
#include "io/io_internal.h"
#include "io_test_util.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#define CHUNK (1u << 20)
#define SIZE ((uint64_t)8 << 20)
#define SEED 5

static atomic_int preads, copies;
static atomic_llong fail_at = -1; /* a pread covering this offset fails with EIO */
/* A pread at this offset waits until the gate opens (held says it waits). */
static atomic_llong gate_at = -1;
static atomic_bool gate_held, gate_open;
/* The memory of each copy, in order (one worker: the order chunks ran). */
static void *copied_to[64];

static ssize_t counting_pread(int fd, void *buf, size_t n, off_t off)
{
    atomic_fetch_add(&preads, 1);
    if (atomic_load(&gate_at) == (long long)off) {
        atomic_store(&gate_held, true);
        while (!atomic_load(&gate_open))
            sched_yield();
    }
    long long bad = atomic_load(&fail_at);
    if (bad >= off && bad < off + (long long)n) {
        errno = EIO;
        return -1;
    }
    return pread(fd, buf, n, off);
}

static atomic_int maps;

/* The pread route: the engine is refused the file's mapping. */
static void *refused_map(int fd, size_t len)
{
    (void)fd;
    (void)len;
    return MAP_FAILED;
}

static pthread_t map_thread; /* the thread that mapped the file last */

static void *counting_map(int fd, size_t len)
{
    atomic_fetch_add(&maps, 1);
    map_thread = pthread_self();
    return mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
}

static const gdu_io_sys counting_sys = {counting_pread, NULL, NULL, refused_map};
static const gdu_io_sys mapping_sys = {counting_pread, NULL, NULL, counting_map};

static int counting_to_mem(void *wctx, unsigned slot, void *mem, const void *staging, size_t n,
                           char *why, size_t len)
{
    int k = atomic_fetch_add(&copies, 1);
    if (k < 64)
        copied_to[k] = mem;
    return gdu_io_mover_host.to_mem(wctx, slot, mem, staging, n, why, len);
}

static char dir[64];
static char *path;

static int setup(void **state)
{
    snprintf(dir, sizeof dir, "./gdu-io-gather-XXXXXX");
    path = io_test_scratch(dir, SIZE, SEED);
    return path == NULL ? -1 : 0;
}

static int teardown(void **state)
{
    io_test_remove_dir(dir, path);
    return 0;
}

static gdu_io_engine *engine_of(const gdu_io_sys *sys, unsigned workers)
{
    static gdu_io_mover mover;
    mover = gdu_io_mover_host;
    mover.to_mem = counting_to_mem;
    gdu_io_engine *e = io_test_engine_moving(&mover, sys, workers, CHUNK, 2);
    assert_non_null(e);
    /* cmocka sets a SIGBUS handler of its own for each test */
    gdu_io_map_guard_take_over();
    atomic_store(&preads, 0);
    atomic_store(&copies, 0);
    atomic_store(&maps, 0);
    atomic_store(&fail_at, -1);
    atomic_store(&gate_at, -1);
    atomic_store(&gate_held, false);
    atomic_store(&gate_open, false);
    return e;
}

static gdu_io_engine *engine_with(const gdu_io_sys *sys) { return engine_of(sys, 4); }

static gdu_io_engine *counting_engine(void) { return engine_with(&counting_sys); }
static gdu_io_engine *mapping_engine(void) { return engine_with(&mapping_sys); }

/* Mappings in this process of the test folder's files whose path ends in
 * tail, from /proc/self/maps. */
static int mappings_of(const char *tail)
{
    FILE *m = fopen("/proc/self/maps", "r");
    assert_non_null(m);
    char line[4096];
    int n = 0;
    size_t len = strlen(tail);
    while (fgets(line, sizeof line, m) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        size_t at = strlen(line);
        if (strstr(line, dir + 1) != NULL && at >= len && strcmp(line + at - len, tail) == 0)
            n++;
    }
    fclose(m);
    return n;
}

/* Mappings of the test file. */
static int mappings_of_file(void) { return mappings_of(strrchr(path, '/')); }

/* rows ranges of `piece` bytes, `stride` apart from `first`, of the open
 * file f read into one buffer one after another (as a column slice is).
 * Returns the request's status; fills done[] and checks the bytes of every
 * extent's good prefix, and that the wait counted them all. */
static int read_seeded_rows_of(gdu_io_file *f, uint64_t first, uint64_t stride, uint64_t piece,
                               size_t rows, uint64_t *done, uint32_t seed)
{
    uint8_t *buf = malloc(rows * piece);
    gdu_io_extent *x = calloc(rows, sizeof *x);
    for (size_t i = 0; i < rows; i++)
        x[i] =
            (gdu_io_extent){.offset = first + i * stride, .length = piece, .mem = buf + i * piece};
    gdu_io_request *r = NULL;
    assert_int_equal(gdu_io_submit(f, GDU_IO_OP_READ, x, rows, NULL, NULL, &r), 0);
    char why[256] = "";
    uint64_t bytes = 0, sum = 0;
    int status = gdu_io_wait(r, &bytes, why, sizeof why);
    for (size_t i = 0; i < rows; i++) {
        done[i] = x[i].done;
        sum += x[i].done;
        for (uint64_t k = 0; k < x[i].done; k++)
            if (buf[i * piece + k] != io_test_byte(x[i].offset + k, seed))
                fail_msg("row %zu byte %llu wrong", i, (unsigned long long)k);
    }
    assert_int_equal(bytes, sum); /* what the wait counts is what the extents got */
    free(x);
    free(buf);
    return status;
}

/* read_seeded_rows_of a file holding the test file's pattern. */
static int read_rows_of(gdu_io_file *f, uint64_t first, uint64_t stride, uint64_t piece,
                        size_t rows, uint64_t *done)
{
    return read_seeded_rows_of(f, first, stride, piece, rows, done, SEED);
}

/* read_rows_of on the test file, opened for it and closed after. */
static int read_rows(gdu_io_engine *e, uint64_t first, uint64_t stride, uint64_t piece, size_t rows,
                     uint64_t *done)
{
    gdu_io_file *f = NULL;
    assert_int_equal(gdu_io_open(e, path, GDU_IO_READ, &f, NULL, 0), 0);
    int status = read_rows_of(f, first, stride, piece, rows, done);
    gdu_io_close(f);
    return status;
}

/* read_rows of a column that must arrive whole: every row's bytes done. */
static void read_rows_whole(gdu_io_engine *e, uint64_t first, uint64_t stride, uint64_t piece,
                            size_t rows)
{
    uint64_t *done = calloc(rows, sizeof *done);
    assert_non_null(done);
    assert_int_equal(read_rows(e, first, stride, piece, rows, done), 0);
    for (size_t i = 0; i < rows; i++)
        assert_int_equal(done[i], piece);
    free(done);
}

/* 100 rows of 2 KiB, 64 KiB apart: one pread each (the gaps are wider than
 * GDU_IO_GATHER_GAP), but one copy to memory in all, not 100. */
static void a_column_moves_in_few_copies(void **state)
{
    gdu_io_engine *e = counting_engine();
    read_rows_whole(e, 100, 65536, 2048, 100);
    assert_int_equal(atomic_load(&preads), 100);
    assert_int_equal(atomic_load(&copies), 1);
    gdu_io_engine_destroy(e);
}

/* Rows of 2 KiB 8 KiB apart: the gaps are read over, one pread per chunk;
 * a chunk holds 1 MiB of rows and gaps (128 rows), so 8 of each. */
static void short_gaps_are_read_over(void **state)
{
    gdu_io_engine *e = counting_engine();
    uint64_t done[1024];
    assert_int_equal(read_rows(e, 17, 8192, 2048, 1024, done), 0);
    for (size_t i = 0; i < 1024; i++)
        assert_int_equal(done[i], 2048);
    assert_int_equal(atomic_load(&preads), 8);
    assert_int_equal(atomic_load(&copies), 8);
    gdu_io_engine_destroy(e);
}

/* A column that runs past the end of the file: rows before it whole, the
 * row across it cut at the end, the rows after it empty; no error. */
static void expect_the_end_to_cut_the_rows(gdu_io_engine *e)
{
    const uint64_t stride = 8192, piece = 3000;
    const size_t rows = 64;
    uint64_t first = SIZE - 20 * stride - 1000;
    uint64_t done[64];
    assert_int_equal(read_rows(e, first, stride, piece, rows, done), 0);
    for (size_t i = 0; i < rows; i++) {
        uint64_t off = first + i * stride;
        uint64_t want = off >= SIZE ? 0 : SIZE - off < piece ? SIZE - off : piece;
        if (done[i] != want)
            fail_msg("row %zu: done %llu, want %llu", i, (unsigned long long)done[i],
                     (unsigned long long)want);
    }
}

static void end_of_file_cuts_the_rows(void **state)
{
    gdu_io_engine *e = counting_engine();
    expect_the_end_to_cut_the_rows(e);
    gdu_io_engine_destroy(e);
}

/* A failed pread fails the rows of its chunk (none of their bytes counted)
 * and no others. */
static void a_failure_belongs_to_its_chunk(void **state)
{
    gdu_io_engine *e = counting_engine();
    const size_t rows = 1024; /* 8 chunks of 128 rows; row 700 in the sixth */
    atomic_store(&fail_at, 100 + 700 * 8192 + 5);
    uint64_t done[1024];
    assert_int_equal(read_rows(e, 100, 8192, 2048, rows, done), -EIO);
    for (size_t i = 0; i < rows; i++)
        assert_int_equal(done[i], i >= 640 && i < 768 ? 0 : 2048);
    gdu_io_engine_destroy(e);
}

/* Ranges that do not ascend, or memory that does not follow on, are read
 * one by one, and still right. */
static void unordered_ranges_move_alone(void **state)
{
    gdu_io_engine *e = counting_engine();
    gdu_io_file *f = NULL;
    assert_int_equal(gdu_io_open(e, path, GDU_IO_READ, &f, NULL, 0), 0);
    uint8_t buf[4 * 1000];
    gdu_io_extent x[4] = {
        {.offset = 50000, .length = 1000, .mem = buf},
        {.offset = 10000, .length = 1000, .mem = buf + 1000}, /* goes back */
        {.offset = 20000, .length = 1000, .mem = buf + 3000}, /* memory skips */
        {.offset = 20500, .length = 1000, .mem = buf + 2000}, /* overlaps */
    };
    gdu_io_request *r = NULL;
    assert_int_equal(gdu_io_submit(f, GDU_IO_OP_READ, x, 4, NULL, NULL, &r), 0);
    assert_int_equal(gdu_io_wait(r, NULL, NULL, 0), 0);
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(x[i].done, 1000);
        uint8_t *mem = x[i].mem;
        for (uint64_t k = 0; k < 1000; k++)
            assert_int_equal(mem[k], io_test_byte(x[i].offset + k, SEED));
    }
    assert_int_equal(atomic_load(&copies), 4);
    gdu_io_close(f);
    gdu_io_engine_destroy(e);
}

/* From the file's mapping a column reads nothing with pread, not even the
 * gaps, and moves in chunks of GDU_IO_GATHER_CHUNK bytes of its own: 1024
 * rows of 2 KiB, every 8 KiB (what the pread route reads as 8 MiB of whole
 * rows), are 2 copies. One worker: with more, a queue shorter than the
 * workers moves in parts (a_short_queue_gathers_in_parts). */
static void a_mapped_column_reads_only_its_bytes(void **state)
{
    gdu_io_engine *e = engine_of(&mapping_sys, 1);
    read_rows_whole(e, 100, 8192, 2048, 1024);
    assert_int_equal(atomic_load(&preads), 0);
    assert_int_equal(atomic_load(&maps), 1);
    assert_int_equal(atomic_load(&copies), 2);
    gdu_io_engine_destroy(e);
}

/* With a dispatch unit of 4 MiB a mapped column moves in chunks of
 * GDU_IO_GATHER_CHUNK (2 MiB) of its own bytes, not in the 1 MiB that made
 * the 2- and 4-way columns slow: 2048 rows of 2 KiB, every 4 KiB, are 2
 * copies (one worker, as above). */
static void a_mapped_column_fills_two_mib_chunks(void **state)
{
    static gdu_io_mover mover;
    mover = gdu_io_mover_host;
    mover.to_mem = counting_to_mem;
    gdu_io_options o = io_test_options(1, (uint64_t)4 << 20, 2, GDU_IO_DIRECT_OFF);
    gdu_io_engine *e = NULL;
    char why[256];
    assert_int_equal(gdu_io_engine_create_moving(&o, &mover, &e, why, sizeof why), 0);
    gdu_io_engine_set_sys(e, &mapping_sys);
    gdu_io_map_guard_take_over();
    atomic_store(&copies, 0);
    atomic_store(&preads, 0);
    uint64_t *done = calloc(2048, sizeof *done);
    assert_int_equal(read_rows(e, 100, 4096, 2048, 2048, done), 0);
    for (size_t i = 0; i < 2048; i++)
        assert_int_equal(done[i], 2048);
    assert_int_equal(atomic_load(&preads), 0);
    assert_int_equal(atomic_load(&copies), 2);
    free(done);
    gdu_io_engine_destroy(e);
}

/* While fewer chunks are queued than there are workers, a column moves in
 * parts (GDU_IO_MAX_PARTS): the same 2 MiB column as above, 2 chunks of 1
 * MiB on 4 workers, is 2 copies of 512 KiB (two queued: halves) and 4 of
 * 256 KiB (one queued: quarters), and every row arrives whole. */
static void a_short_queue_gathers_in_parts(void **state)
{
    gdu_io_engine *e = mapping_engine();
    read_rows_whole(e, 100, 8192, 2048, 1024);
    assert_int_equal(atomic_load(&preads), 0);
    assert_int_equal(atomic_load(&copies), 2 + 4);
    gdu_io_engine_destroy(e);
}

/* Whole ranges map nothing: the mapping is for gathers only. */
static void whole_reads_map_nothing(void **state)
{
    gdu_io_engine *e = mapping_engine();
    gdu_io_file *f = NULL;
    assert_int_equal(gdu_io_open(e, path, GDU_IO_READ, &f, NULL, 0), 0);
    uint8_t *buf = malloc(3 << 20);
    uint64_t done = 0;
    assert_int_equal(gdu_io_read(f, 12345, 3 << 20, buf, &done, NULL, 0), 0);
    assert_int_equal(done, 3 << 20);
    assert_int_equal(atomic_load(&maps), 0);
    assert_int_equal(mappings_of_file(), 0);
    free(buf);
    gdu_io_close(f);
    gdu_io_engine_destroy(e);
}

/* The end of the file cuts a mapped column as it cuts a pread one. */
static void end_of_file_cuts_the_mapped_rows(void **state)
{
    gdu_io_engine *e = mapping_engine();
    expect_the_end_to_cut_the_rows(e);
    assert_int_equal(atomic_load(&preads), 0);
    gdu_io_engine_destroy(e);
}

/* A file cut short after it was mapped: the rows past its new end come
 * back short, as from pread, and the copy never touches the mapping there
 * (which would be SIGBUS, killing the test). */
/* A 1 MiB file of the pattern, dir/name (*file), opened on a new mapping
 * engine (*e); and the end of it all. */
static gdu_io_file *open_mapped_file(const char *name, char **file, gdu_io_engine **e)
{
    *file = io_test_file(dir, name, 1 << 20, SEED);
    assert_non_null(*file);
    *e = mapping_engine();
    gdu_io_file *f = NULL;
    assert_int_equal(gdu_io_open(*e, *file, GDU_IO_READ, &f, NULL, 0), 0);
    return f;
}

static void close_mapped_file(gdu_io_file *f, gdu_io_engine *e, char *file)
{
    gdu_io_close(f);
    gdu_io_engine_destroy(e);
    unlink(file);
    free(file);
}

enum { CUT_ROWS = 100, CUT_STRIDE = 8192, CUT_PIECE = 1000 }; /* a column of the 1 MiB files */

static void a_file_cut_after_mapping_reads_short(void **state)
{
    char *cut;
    gdu_io_engine *e;
    gdu_io_file *f = open_mapped_file("cut.bin", &cut, &e);
    uint64_t done[CUT_ROWS];
    assert_int_equal(read_rows_of(f, 0, CUT_STRIDE, CUT_PIECE, CUT_ROWS, done),
                     0); /* maps the whole 1 MiB */
    assert_int_equal(atomic_load(&maps), 1);
    assert_int_equal(truncate(cut, 50 * CUT_STRIDE + 10), 0);
    assert_int_equal(read_rows_of(f, 0, CUT_STRIDE, CUT_PIECE, CUT_ROWS, done), 0);
    for (size_t i = 0; i < CUT_ROWS; i++)
        assert_int_equal(done[i], i < 50 ? CUT_PIECE : i == 50 ? 10 : 0);
    close_mapped_file(f, e, cut);
}

/* The mapping the seam gives instead of the file's: a one-page file mapped
 * at the file's length, so that the copy faults (SIGBUS) past its first
 * page while fstat shows the file whole, as when another process cuts the
 * file between the gather's size check and its copy. */
static char *short_stand_in;

static void *cut_under_the_copy_map(int fd, size_t len)
{
    atomic_fetch_add(&maps, 1);
    int short_fd = open(short_stand_in, O_RDONLY | O_CLOEXEC);
    void *m = short_fd < 0 ? MAP_FAILED : mmap(NULL, len, PROT_READ, MAP_SHARED, short_fd, 0);
    if (short_fd >= 0)
        close(short_fd);
    return m;
}

static const gdu_io_sys cut_under_the_copy_sys = {counting_pread, NULL, NULL,
                                                  cut_under_the_copy_map};

/* A fault in the copy out of the mapping is no signal that kills the
 * process: the chunk is read with pread instead, which gives what the
 * file holds (here all of it: only the mapping was short). */
static void a_fault_in_the_mapped_copy_reads_with_pread(void **state)
{
    short_stand_in = io_test_file(dir, "stand-in.bin", 4096, SEED);
    assert_non_null(short_stand_in);
    gdu_io_engine *e = engine_with(&cut_under_the_copy_sys);
    read_rows_whole(e, 0, CUT_STRIDE, CUT_PIECE, CUT_ROWS);
    assert_int_equal(atomic_load(&maps), 1);
    assert_true(atomic_load(&preads) > 0); /* the chunks past the first page */
    gdu_io_engine_destroy(e);
    unlink(short_stand_in);
    free(short_stand_in);
}

/* SIGBUS that is not a guarded copy's goes to the handler that was there
 * before the engine's (a test's own here, which stays under the engine's
 * for the tests after it): a fault in another mapping, and a SIGBUS sent
 * to the process. */
static sigjmp_buf caught_back;
static volatile sig_atomic_t caught_code, expecting;

static void catch_sigbus(int sig, siginfo_t *info, void *ctx)
{
    if (!expecting) { /* the default action: a fault happens again and kills */
        signal(sig, SIG_DFL);
        if (info->si_code <= 0)
            raise(sig);
        return;
    }
    expecting = 0;
    caught_code = info->si_code;
    siglongjmp(caught_back, 1);
}

static void other_sigbus_goes_to_the_handler_before(void **state)
{
    struct sigaction mine = {.sa_sigaction = catch_sigbus, .sa_flags = SA_SIGINFO};
    sigemptyset(&mine.sa_mask);
    assert_int_equal(sigaction(SIGBUS, &mine, NULL), 0);
    gdu_io_engine *e = mapping_engine(); /* its first mapped gather installs the guard */
    read_rows_whole(e, 0, 8192, 1000, 100);
    gdu_io_engine_destroy(e);
    char *page = io_test_file(dir, "page.bin", 4096, SEED);
    int fd = open(page, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    const volatile char *m = mmap(NULL, 2 * 4096, PROT_READ, MAP_SHARED, fd, 0);
    assert_true(m != MAP_FAILED);
    caught_code = 0;
    expecting = 1;
    if (sigsetjmp(caught_back, 1) == 0) {
        char past = m[4096]; /* past the file's end: SIGBUS */
        fail_msg("read %d past the file's end, no SIGBUS", past);
    }
    assert_int_equal(caught_code, BUS_ADRERR);
    caught_code = 0;
    expecting = 1;
    if (sigsetjmp(caught_back, 1) == 0) {
        raise(SIGBUS);
        fail_msg("the SIGBUS sent never reached the handler");
    }
    assert_true(caught_code <= 0);
    munmap((void *)m, 2 * 4096);
    close(fd);
    unlink(page);
    free(page);
}

/* A file cut short when its first gather maps it, and made whole again:
 * the later gathers see all of it (a mapping made at the cut length,
 * kept for the open, cut every later column short). */
static void a_file_whole_again_gathers_whole(void **state)
{
    char *cut;
    gdu_io_engine *e;
    gdu_io_file *f = open_mapped_file("regrown.bin", &cut, &e);
    uint64_t done[CUT_ROWS];
    assert_int_equal(truncate(cut, 10 * CUT_STRIDE), 0);
    assert_int_equal(read_rows_of(f, 0, CUT_STRIDE, CUT_PIECE, CUT_ROWS, done), 0);
    assert_int_equal(done[9], CUT_PIECE);
    assert_int_equal(done[10], 0);
    free(io_test_file(dir, "regrown.bin", 1 << 20, SEED)); /* the same inode, whole */
    assert_int_equal(read_rows_of(f, 0, CUT_STRIDE, CUT_PIECE, CUT_ROWS, done), 0);
    for (size_t i = 0; i < CUT_ROWS; i++)
        if (done[i] != CUT_PIECE)
            fail_msg("row %zu: %llu of %d bytes once the file is whole", i,
                     (unsigned long long)done[i], CUT_PIECE);
    assert_int_equal(atomic_load(&preads), 0);
    close_mapped_file(f, e, cut);
}

/* The mapping lives while the file is open and is gone once the engine is
 * (its idle workers unmap closed files' mappings once kept their time;
 * destroy unmaps the rest). */
static void a_closed_files_mapping_is_unmapped(void **state)
{
    gdu_io_engine *e = mapping_engine();
    gdu_io_file *f = NULL;
    assert_int_equal(gdu_io_open(e, path, GDU_IO_READ, &f, NULL, 0), 0);
    uint64_t done[64];
    assert_int_equal(read_rows_of(f, 0, 4096, 512, 64, done), 0);
    assert_int_equal(mappings_of_file(), 1);
    gdu_io_close(f);
    gdu_io_engine_destroy(e);
    assert_int_equal(mappings_of_file(), 0);
}

#define KEEP_LONG 600.0 /* seconds: kept for the whole test, valgrind or not */

/* Opens dir/name on e, reads `rows` rows of 1000 bytes 8192 apart (planned
 * by the caller below GDU_IO_PLAN_ON_WORKER rows), checks them against
 * seed's pattern and that each arrived whole, and closes it. */
static void read_named_rows(gdu_io_engine *e, const char *name, size_t rows, uint32_t seed)
{
    char file[512];
    snprintf(file, sizeof file, "%s/%s", dir, name);
    gdu_io_file *f = NULL;
    assert_int_equal(gdu_io_open(e, file, GDU_IO_READ, &f, NULL, 0), 0);
    uint64_t *done = calloc(rows, sizeof *done);
    assert_int_equal(read_seeded_rows_of(f, 300, 8192, 1000, rows, done, seed), 0);
    for (size_t i = 0; i < rows; i++)
        if (done[i] != 1000)
            fail_msg("%s: row %zu of %zu got %llu bytes", name, i, rows,
                     (unsigned long long)done[i]);
    free(done);
    gdu_io_close(f);
}

/* mappings_of(tail) once the engine's idle workers have unmapped them, or
 * what is left after 10 s. */
static int mappings_after_unmapping(const char *tail)
{
    int left = mappings_of(tail);
    for (int ms = 0; ms < 10000 && left > 0; ms += 5) {
        usleep(5000);
        left = mappings_of(tail);
    }
    return left;
}

/* A file closed and opened again gathers from the mapping its close left:
 * one mapping for both opens (none made afresh, no teardown between), every
 * byte right, and the engine's end unmaps it. */
static void a_reopened_file_takes_its_kept_mapping(void **state)
{
    gdu_io_engine *e = mapping_engine();
    e->keep_map_seconds = KEEP_LONG;
    const char *name = strrchr(path, '/') + 1;
    for (int open = 0; open < 3; open++)
        read_named_rows(e, name, 64, SEED);
    assert_int_equal(atomic_load(&maps), 1);
    assert_int_equal(mappings_of_file(), 1);
    gdu_io_engine_destroy(e);
    assert_int_equal(mappings_of_file(), 0);
}

/* A file that grew since its close is mapped anew: the kept mapping ends at
 * the old size, and the rows past it come whole from the new one. */
static void a_grown_file_is_mapped_anew(void **state)
{
    char *grown = io_test_file(dir, "grown.bin", 1 << 20, SEED);
    assert_non_null(grown);
    gdu_io_engine *e = mapping_engine();
    e->keep_map_seconds = KEEP_LONG;
    read_named_rows(e, "grown.bin", 100, SEED);
    free(io_test_file(dir, "grown.bin", 2 << 20, SEED)); /* the same inode, twice the size */
    read_named_rows(e, "grown.bin", 200, SEED);          /* rows up to 1.6 MiB */
    assert_int_equal(atomic_load(&maps), 2);
    gdu_io_engine_destroy(e);
    unlink(grown);
    free(grown);
}

/* A file replaced at its path (a new checkpoint renamed over the old one,
 * the same size) is mapped anew: the kept mapping shows the old file. */
static void a_replaced_file_is_mapped_anew(void **state)
{
    char *old = io_test_file(dir, "swap.bin", 1 << 20, SEED);
    char *next = io_test_file(dir, "swap.next", 1 << 20, SEED + 1);
    assert_non_null(old);
    assert_non_null(next);
    gdu_io_engine *e = mapping_engine();
    e->keep_map_seconds = KEEP_LONG;
    read_named_rows(e, "swap.bin", 100, SEED);
    assert_int_equal(rename(next, old), 0);
    read_named_rows(e, "swap.bin", 100, SEED + 1);
    assert_int_equal(atomic_load(&maps), 2);
    gdu_io_engine_destroy(e);
    unlink(old);
    free(old);
    free(next);
}

/* A kept mapping is unmapped by an idle worker once its time is up, with
 * nothing else happening: a deleted checkpoint's blocks are not held. */
static void a_kept_mapping_goes_when_its_time_is_up(void **state)
{
    gdu_io_engine *e = mapping_engine();
    e->keep_map_seconds = 0.02;
    read_named_rows(e, strrchr(path, '/') + 1, 64, SEED);
    assert_int_equal(mappings_after_unmapping(strrchr(path, '/')), 0);
    gdu_io_engine_destroy(e);
}

/* No more than GDU_IO_MAX_KEPT_MAPS are kept: one file more unmaps the
 * oldest, and the newest stays kept (taken by its next open). */
static void the_oldest_kept_mapping_makes_room(void **state)
{
    enum { FILES = GDU_IO_MAX_KEPT_MAPS + 1 };
    char *files[FILES];
    char name[32];
    gdu_io_engine *e = mapping_engine();
    e->keep_map_seconds = KEEP_LONG;
    for (int i = 0; i < FILES; i++) {
        snprintf(name, sizeof name, "kept-%02d.bin", i);
        files[i] = io_test_file(dir, name, 1 << 20, SEED);
        assert_non_null(files[i]);
        read_named_rows(e, name, 64, SEED);
    }
    assert_int_equal(mappings_after_unmapping("/kept-00.bin"), 0);
    for (int i = 1; i < FILES; i++) {
        snprintf(name, sizeof name, "/kept-%02d.bin", i);
        assert_int_equal(mappings_of(name), 1);
    }
    snprintf(name, sizeof name, "kept-%02d.bin", FILES - 1);
    read_named_rows(e, name, 64, SEED);
    assert_int_equal(atomic_load(&maps), FILES);
    gdu_io_engine_destroy(e);
    for (int i = 0; i < FILES; i++) {
        unlink(files[i]);
        free(files[i]);
    }
}

/* The extents of a box, built by the library: row-major order, memory one
 * run after another; arguments that cannot describe one are refused. */
static void a_box_becomes_its_extents(void **state)
{
    gdu_io_extent x[24];
    const uint64_t counts[] = {2, 3, 4}, strides[] = {1000, 100, 10};
    char *mem = (char *)0x10000;
    assert_int_equal(gdu_io_extents_box(x, 24, 7, counts, strides, 3, 5, mem), 0);
    size_t k = 0;
    for (uint64_t a = 0; a < 2; a++)
        for (uint64_t b = 0; b < 3; b++)
            for (uint64_t c = 0; c < 4; c++, k++) {
                assert_int_equal(x[k].offset, 7 + a * 1000 + b * 100 + c * 10);
                assert_int_equal(x[k].length, 5);
                assert_ptr_equal(x[k].mem, mem + k * 5);
            }
    assert_int_equal(gdu_io_extents_box(x, 1, 42, NULL, NULL, 0, 9, mem), 0);
    assert_int_equal(x[0].offset, 42);
    assert_int_equal(gdu_io_extents_box(x, 23, 7, counts, strides, 3, 5, mem), -EINVAL);
    assert_int_equal(gdu_io_extents_box(x, 24, 7, counts, strides, 3, 5, NULL), -EINVAL);
    const uint64_t huge[] = {3, 1}, far[] = {(uint64_t)1 << 62, 1};
    assert_int_equal(gdu_io_extents_box(x, 3, 0, huge, far, 2, 5, mem), -EINVAL);
    assert_int_equal(gdu_io_extents_box(NULL, 24, 7, counts, strides, 3, 5, mem), -EINVAL);
}

/* An extent that cannot be read (memory NULL, an offset past INT64_MAX)
 * in the middle of a column fails the whole submit, of a short column
 * (planned by the caller) as of a long one (planned on a worker): no
 * request, nothing mapped, read or copied. */
static void a_bad_extent_inside_a_gather_is_refused(void **state)
{
    gdu_io_engine *e = mapping_engine();
    gdu_io_file *f = NULL;
    assert_int_equal(gdu_io_open(e, path, GDU_IO_READ, &f, NULL, 0), 0);
    static uint8_t buf[1024 * 512];
    static gdu_io_extent x[1024];
    for (size_t rows = 64; rows <= 1024; rows *= 16)
        for (int bad = 0; bad < 2; bad++) {
            for (size_t i = 0; i < rows; i++)
                x[i] = (gdu_io_extent){.offset = 4096 * i, .length = 512, .mem = buf + 512 * i};
            if (bad == 0)
                x[30].mem = NULL;
            else
                x[30].offset = (uint64_t)INT64_MAX + 1;
            gdu_io_request *r = (gdu_io_request *)buf;
            assert_int_equal(gdu_io_submit(f, GDU_IO_OP_READ, x, rows, NULL, NULL, &r), -EINVAL);
            assert_null(r);
        }
    assert_int_equal(atomic_load(&maps), 0);
    assert_int_equal(atomic_load(&preads), 0);
    assert_int_equal(atomic_load(&copies), 0);
    gdu_io_close(f);
    gdu_io_engine_destroy(e);
}

/* A read of many extents is planned on a worker (GDU_IO_PLAN_ON_WORKER):
 * the file's mapping for its gathers is made there, not on the submitting
 * thread, which a short column still plans itself. Bytes checked both ways. */
_Static_assert(GDU_IO_PLAN_ON_WORKER > 64 && GDU_IO_PLAN_ON_WORKER <= 1024,
               "the test's 64 rows are planned by the caller, its 1024 by a worker");
static void many_extents_are_planned_on_a_worker(void **state)
{
    for (size_t rows = 64; rows <= 1024; rows *= 16) {
        gdu_io_engine *e = mapping_engine(); /* its own: no mapping kept from the last */
        gdu_io_file *f = NULL;
        assert_int_equal(gdu_io_open(e, path, GDU_IO_READ, &f, NULL, 0), 0);
        uint64_t done[1024];
        assert_int_equal(read_rows_of(f, 300, 8192, 1000, rows, done), 0);
        for (size_t i = 0; i < rows; i++)
            assert_int_equal(done[i], 1000);
        bool here = pthread_equal(map_thread, pthread_self());
        if (rows == 64 ? !here : here)
            fail_msg("%zu rows were planned on the %s thread", rows, here ? "caller's" : "worker");
        assert_int_equal(atomic_load(&maps), 1);
        gdu_io_close(f);
        gdu_io_engine_destroy(e);
    }
}

/* A request planned on a worker keeps its place in the queue: its chunks
 * run before those of a request submitted after it. One worker, held in a
 * read by a gate while a column (planned later) and then a whole read are
 * queued. */
static void a_planned_request_keeps_its_place(void **state)
{
    gdu_io_engine *e = engine_of(&mapping_sys, 1);
    gdu_io_file *f = NULL;
    assert_int_equal(gdu_io_open(e, path, GDU_IO_READ, &f, NULL, 0), 0);
    static uint8_t first[4096], column[1024 * 1000], last[4096];
    atomic_store(&gate_at, 0);
    gdu_io_extent held = {.offset = 0, .length = sizeof first, .mem = first};
    gdu_io_request *r[3];
    assert_int_equal(gdu_io_submit(f, GDU_IO_OP_READ, &held, 1, NULL, NULL, &r[0]), 0);
    while (!atomic_load(&gate_held))
        sched_yield();
    gdu_io_extent rows[1024];
    for (size_t i = 0; i < 1024; i++)
        rows[i] =
            (gdu_io_extent){.offset = 300 + i * 8192, .length = 1000, .mem = column + i * 1000};
    assert_int_equal(gdu_io_submit(f, GDU_IO_OP_READ, rows, 1024, NULL, NULL, &r[1]), 0);
    gdu_io_extent after = {.offset = SIZE - sizeof last, .length = sizeof last, .mem = last};
    assert_int_equal(gdu_io_submit(f, GDU_IO_OP_READ, &after, 1, NULL, NULL, &r[2]), 0);
    atomic_store(&gate_open, true);
    for (int k = 0; k < 3; k++)
        assert_int_equal(gdu_io_wait(r[k], NULL, NULL, 0), 0);
    int n = atomic_load(&copies);
    assert_true(n >= 3 && n <= 64);
    assert_ptr_equal(copied_to[0], first);
    assert_ptr_equal(copied_to[1], column); /* the column's first chunk */
    assert_ptr_equal(copied_to[n - 1], last);
    for (size_t i = 0; i < 1024; i++)
        for (size_t k = 0; k < 1000; k += 999)
            assert_int_equal(column[i * 1000 + k], io_test_byte(300 + i * 8192 + k, SEED));
    gdu_io_close(f);
    gdu_io_engine_destroy(e);
}

/* A box read (gdu_io_submit_box) moves what a read of the extents
 * gdu_io_extents_box makes of it moves: the same bytes into the same
 * places in as many copies, 64 runs planned by the caller, 1024 by a
 * worker (which also makes the extents), counted by the wait; a box
 * whose last runs pass the end of the file is cut where the extents are. */
static void a_box_reads_what_its_extents_read(void **state)
{
    static uint8_t by_box[1024 * 1000], by_extents[1024 * 1000];
    static gdu_io_extent x[1024];
    for (size_t rows = 64; rows <= 1024; rows *= 16)
        for (int at_end = 0; at_end < 2; at_end++) {
            const uint64_t counts[] = {4, rows / 4};
            const uint64_t strides[] = {at_end ? (uint64_t)1 << 20 : ((uint64_t)2 << 20) + 96,
                                        8192};
            const uint64_t offset = at_end ? SIZE - (rows / 4) * 8192 : 300;
            uint64_t bytes[2] = {0, 0};
            int copied[2];
            for (int way = 0; way < 2; way++) {
                uint8_t *buf = way == 0 ? by_box : by_extents;
                memset(buf, 0xee, rows * 1000);
                gdu_io_engine *e = mapping_engine();
                gdu_io_file *f = NULL;
                assert_int_equal(gdu_io_open(e, path, GDU_IO_READ, &f, NULL, 0), 0);
                gdu_io_request *r = NULL;
                if (way == 0) {
                    assert_int_equal(gdu_io_submit_box(f, GDU_IO_OP_READ, offset, counts, strides,
                                                       2, 1000, buf, NULL, NULL, &r),
                                     0);
                } else {
                    assert_int_equal(
                        gdu_io_extents_box(x, rows, offset, counts, strides, 2, 1000, buf), 0);
                    assert_int_equal(gdu_io_submit(f, GDU_IO_OP_READ, x, rows, NULL, NULL, &r), 0);
                }
                assert_int_equal(gdu_io_wait(r, &bytes[way], NULL, 0), 0);
                bool here = pthread_equal(map_thread, pthread_self());
                if (rows == 64 ? !here : here)
                    fail_msg("%zu runs were planned on the %s thread", rows,
                             here ? "caller's" : "worker");
                copied[way] = atomic_load(&copies);
                gdu_io_close(f);
                gdu_io_engine_destroy(e);
            }
            assert_int_equal(bytes[0], bytes[1]);
            assert_int_equal(copied[0], copied[1]);
            assert_memory_equal(by_box, by_extents, rows * 1000);
            uint64_t want = 0;
            for (size_t i = 0; i < rows; i++) {
                uint64_t off = offset + (i / (rows / 4)) * strides[0] + (i % (rows / 4)) * 8192;
                uint64_t n = off >= SIZE ? 0 : SIZE - off < 1000 ? SIZE - off : 1000;
                want += n;
                for (uint64_t k = 0; k < n; k += 333)
                    assert_int_equal(by_box[i * 1000 + k], io_test_byte(off + k, SEED));
            }
            assert_int_equal(bytes[0], want);
            if (at_end ? want == rows * 1000 : want != rows * 1000)
                fail_msg("the box of %zu runs %s the end of the file", rows,
                         at_end ? "does not pass" : "passes");
        }
}

/* A box planned on a worker whose runs fall in one dimension (1024 rows; 4
 * blocks of 256 rows, each block right after the last) makes no extents:
 * its runs are computed where they are needed, so a rank's column slice
 * allocates nothing per row but its end marks. Boxes that do not fall in
 * one dimension still make them. */
static void a_box_of_one_dimension_makes_no_extents(void **state)
{
    static uint8_t buf[1024 * 1000];
    const struct {
        uint64_t counts[2], strides[2];
        unsigned ndims;
        bool kept_whole;
    } boxes[] = {
        {{1024}, {8192}, 1, true},
        {{4, 256}, {256 * 8192, 8192}, 2, true},
        {{1, 1024}, {12345, 8192}, 2, true},
        {{4, 256}, {256 * 8192 + 96, 8192}, 2, false},
    };
    for (size_t b = 0; b < sizeof boxes / sizeof boxes[0]; b++) {
        gdu_io_engine *e = mapping_engine();
        gdu_io_file *f = NULL;
        assert_int_equal(gdu_io_open(e, path, GDU_IO_READ, &f, NULL, 0), 0);
        memset(buf, 0xee, sizeof buf);
        gdu_io_request *r = NULL;
        assert_int_equal(gdu_io_submit_box(f, GDU_IO_OP_READ, 300, boxes[b].counts,
                                           boxes[b].strides, boxes[b].ndims, 1000, buf, NULL, NULL,
                                           &r),
                         0);
        if ((r->ext == NULL) != boxes[b].kept_whole)
            fail_msg("box %zu: extents %s", b, r->ext == NULL ? "not made" : "made");
        uint64_t bytes = 0;
        assert_int_equal(gdu_io_wait(r, &bytes, NULL, 0), 0);
        assert_int_equal(bytes, sizeof buf);
        for (size_t i = 0; i < 1024; i++) {
            /* row i: 8192 bytes after the last, and 96 more at each block of
             * the box that is not kept whole */
            uint64_t off = 300 + i * 8192 + (boxes[b].kept_whole ? 0 : (i / 256) * 96);
            for (uint64_t k = 0; k < 1000; k += 111)
                assert_int_equal(buf[i * 1000 + k], io_test_byte(off + k, SEED));
        }
        gdu_io_close(f);
        gdu_io_engine_destroy(e);
    }
}

/* rows runs of `piece` bytes, `stride` apart from `first`, read as a box
 * kept whole (one dimension, planned on a worker) on the test file;
 * returns the request's status, its bytes in *bytes, and checks that every
 * row whole[i] says arrived whole holds the file's bytes. */
static int read_box_rows(gdu_io_engine *e, uint64_t first, uint64_t stride, uint64_t piece,
                         size_t rows, const uint64_t *whole, uint64_t *bytes)
{
    gdu_io_file *f = NULL;
    assert_int_equal(gdu_io_open(e, path, GDU_IO_READ, &f, NULL, 0), 0);
    uint8_t *buf = malloc(rows * piece);
    assert_non_null(buf);
    const uint64_t counts[] = {rows}, strides[] = {stride};
    gdu_io_request *r = NULL;
    assert_int_equal(
        gdu_io_submit_box(f, GDU_IO_OP_READ, first, counts, strides, 1, piece, buf, NULL, NULL, &r),
        0);
    assert_null(r->ext);
    int status = gdu_io_wait(r, bytes, NULL, 0);
    for (size_t i = 0; i < rows; i++)
        for (uint64_t k = 0; k < whole[i]; k++)
            if (buf[i * piece + k] != io_test_byte(first + i * stride + k, SEED))
                fail_msg("row %zu byte %llu wrong", i, (unsigned long long)k);
    gdu_io_close(f);
    free(buf);
    return status;
}

/* A box kept whole moves and counts what the same runs as extents do, in
 * as many copies: from the mapping and by pread, whole, cut by the end of
 * the file, with a failing pread (its chunk's rows not counted), and in
 * parts while the queue is short (4 workers). */
static void a_box_kept_whole_counts_as_its_extents_do(void **state)
{
    const struct {
        const gdu_io_sys *sys;
        unsigned workers;
        uint64_t first, stride, piece;
        long long fail;
        int status;
    } cases[] = {
        {&mapping_sys, 1, 100, 8192, 2048, -1, 0},
        {&mapping_sys, 4, 100, 8192, 2048, -1, 0},
        {&mapping_sys, 1, SIZE - 200 * 8192 - 1000, 8192, 3000, -1, 0},
        {&counting_sys, 4, 100, 8192, 2048, -1, 0},
        {&counting_sys, 1, SIZE - 200 * 8192 - 1000, 8192, 3000, -1, 0},
        {&counting_sys, 1, 100, 8192, 2048, 100 + 700 * 8192 + 5, -EIO},
    };
    const size_t rows = 1024;
    uint64_t *done = calloc(rows, sizeof *done);
    assert_non_null(done);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        gdu_io_engine *e = engine_of(cases[c].sys, cases[c].workers);
        atomic_store(&fail_at, cases[c].fail);
        assert_int_equal(read_rows(e, cases[c].first, cases[c].stride, cases[c].piece, rows, done),
                         cases[c].status);
        int copies_of_extents = atomic_load(&copies);
        uint64_t want = 0;
        for (size_t i = 0; i < rows; i++)
            want += done[i];
        gdu_io_engine_destroy(e);
        e = engine_of(cases[c].sys, cases[c].workers);
        atomic_store(&fail_at, cases[c].fail);
        uint64_t bytes = 0;
        assert_int_equal(
            read_box_rows(e, cases[c].first, cases[c].stride, cases[c].piece, rows, done, &bytes),
            cases[c].status);
        if (bytes != want || atomic_load(&copies) != copies_of_extents)
            fail_msg("case %zu: %llu bytes in %d copies, extents %llu in %d", c,
                     (unsigned long long)bytes, atomic_load(&copies), (unsigned long long)want,
                     copies_of_extents);
        gdu_io_engine_destroy(e);
    }
    free(done);
}

/* A box that cannot be read is refused before anything is queued: no
 * counts or strides, too many dimensions, a count of 0, a run past 2^63,
 * no memory, more bytes than memory holds, a bad operation; small boxes
 * and boxes a worker would plan alike. */
static void a_bad_box_is_refused(void **state)
{
    gdu_io_engine *e = mapping_engine();
    gdu_io_file *f = NULL;
    assert_int_equal(gdu_io_open(e, path, GDU_IO_READ, &f, NULL, 0), 0);
    static uint8_t buf[1024 * 512];
    static uint64_t counts[GDU_IO_BOX_MAX_DIMS + 1], strides[GDU_IO_BOX_MAX_DIMS + 1];
    for (unsigned d = 0; d <= GDU_IO_BOX_MAX_DIMS; d++)
        counts[d] = 1, strides[d] = 4096;
    for (uint64_t rows = 64; rows <= 1024; rows *= 16) {
        counts[0] = rows;
        const uint64_t zero[] = {rows, 0}, far[] = {(uint64_t)1 << 62, 4096};
        const uint64_t big[] = {rows, (uint64_t)1 << 60};
        struct {
            gdu_io_op op;
            uint64_t offset;
            const uint64_t *counts, *strides;
            unsigned ndims;
            uint64_t length;
            void *mem;
        } bad[] = {
            {GDU_IO_OP_READ, 0, NULL, strides, 1, 512, buf},
            {GDU_IO_OP_READ, 0, counts, NULL, 1, 512, buf},
            {GDU_IO_OP_READ, 0, counts, strides, GDU_IO_BOX_MAX_DIMS + 1, 512, buf},
            {GDU_IO_OP_READ, 0, zero, strides, 2, 512, buf},
            {GDU_IO_OP_READ, 0, counts, far, 2, 512, buf},
            {GDU_IO_OP_READ, (uint64_t)INT64_MAX + 1, counts, strides, 1, 512, buf},
            {GDU_IO_OP_READ, 0, counts, strides, 1, (uint64_t)INT64_MAX, buf},
            {GDU_IO_OP_READ, 0, counts, strides, 1, 512, NULL},
            {GDU_IO_OP_READ, 0, big, strides, 2, 512, buf},
            {GDU_IO_OP_WRITE, 0, counts, strides, 1, 512, buf}, /* opened for reading */
            {(gdu_io_op)7, 0, counts, strides, 1, 512, buf},
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            gdu_io_request *r = (gdu_io_request *)buf;
            if (gdu_io_submit_box(f, bad[i].op, bad[i].offset, bad[i].counts, bad[i].strides,
                                  bad[i].ndims, bad[i].length, bad[i].mem, NULL, NULL,
                                  &r) != -EINVAL)
                fail_msg("bad box %zu of %llu runs was not refused", i, (unsigned long long)rows);
            assert_null(r);
        }
        assert_int_equal(gdu_io_submit_box(NULL, GDU_IO_OP_READ, 0, counts, strides, 1, 512, buf,
                                           NULL, NULL, &(gdu_io_request *){NULL}),
                         -EINVAL);
        assert_int_equal(
            gdu_io_submit_box(f, GDU_IO_OP_READ, 0, counts, strides, 1, 512, buf, NULL, NULL, NULL),
            -EINVAL);
    }
    assert_int_equal(atomic_load(&maps), 0);
    assert_int_equal(atomic_load(&preads), 0);
    assert_int_equal(atomic_load(&copies), 0);
    gdu_io_close(f);
    gdu_io_engine_destroy(e);
}

/* A box written (gdu_io_submit_box, op WRITE) puts each run of its memory
 * at its place in the file and leaves the gaps between them as they were;
 * 300 runs, so a read's planning threshold does not apply to writes. */
static void a_box_writes_its_runs_where_they_belong(void **state)
{
    enum { ROWS = 300, STRIDE = 3000, PIECE = 700 };
    char *out = io_test_file(dir, "box-write.bin", 1 << 20, SEED);
    assert_non_null(out);
    static uint8_t src[ROWS * PIECE], got[1 << 20];
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = (uint8_t)(i * 7 + 3);
    gdu_io_engine *e = counting_engine();
    gdu_io_file *f = NULL;
    assert_int_equal(gdu_io_open(e, out, GDU_IO_READ | GDU_IO_WRITE, &f, NULL, 0), 0);
    const uint64_t counts[] = {3, ROWS / 3}, strides[] = {(ROWS / 3) * STRIDE + 5000, STRIDE};
    const uint64_t offset = 123;
    gdu_io_request *r = NULL;
    assert_int_equal(gdu_io_submit_box(f, GDU_IO_OP_WRITE, offset, counts, strides, 2, PIECE, src,
                                       NULL, NULL, &r),
                     0);
    uint64_t bytes = 0;
    assert_int_equal(gdu_io_wait(r, &bytes, NULL, 0), 0);
    assert_int_equal(bytes, ROWS * PIECE);
    uint64_t done = 0;
    assert_int_equal(gdu_io_read(f, 0, sizeof got, got, &done, NULL, 0), 0);
    assert_int_equal(done, sizeof got);
    static bool written[1 << 20];
    memset(written, 0, sizeof written);
    for (size_t i = 0; i < ROWS; i++) {
        uint64_t at = offset + (i / (ROWS / 3)) * strides[0] + (i % (ROWS / 3)) * STRIDE;
        assert_memory_equal(got + at, src + i * PIECE, PIECE);
        memset(written + at, 1, PIECE);
    }
    for (size_t k = 0; k < sizeof got; k++)
        if (!written[k] && got[k] != io_test_byte(k, SEED))
            fail_msg("byte %zu between the runs was changed", k);
    gdu_io_close(f);
    gdu_io_engine_destroy(e);
    unlink(out);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        /* first: the engine's SIGBUS guard is installed at the first mapped gather */
        cmocka_unit_test(other_sigbus_goes_to_the_handler_before),
        cmocka_unit_test(a_column_moves_in_few_copies),
        cmocka_unit_test(short_gaps_are_read_over),
        cmocka_unit_test(end_of_file_cuts_the_rows),
        cmocka_unit_test(a_failure_belongs_to_its_chunk),
        cmocka_unit_test(unordered_ranges_move_alone),
        cmocka_unit_test(a_mapped_column_reads_only_its_bytes),
        cmocka_unit_test(a_mapped_column_fills_two_mib_chunks),
        cmocka_unit_test(a_short_queue_gathers_in_parts),
        cmocka_unit_test(whole_reads_map_nothing),
        cmocka_unit_test(end_of_file_cuts_the_mapped_rows),
        cmocka_unit_test(a_file_cut_after_mapping_reads_short),
        cmocka_unit_test(a_fault_in_the_mapped_copy_reads_with_pread),
        cmocka_unit_test(a_file_whole_again_gathers_whole),
        cmocka_unit_test(a_closed_files_mapping_is_unmapped),
        cmocka_unit_test(a_reopened_file_takes_its_kept_mapping),
        cmocka_unit_test(a_grown_file_is_mapped_anew),
        cmocka_unit_test(a_replaced_file_is_mapped_anew),
        cmocka_unit_test(a_kept_mapping_goes_when_its_time_is_up),
        cmocka_unit_test(the_oldest_kept_mapping_makes_room),
        cmocka_unit_test(a_box_becomes_its_extents),
        cmocka_unit_test(a_bad_extent_inside_a_gather_is_refused),
        cmocka_unit_test(many_extents_are_planned_on_a_worker),
        cmocka_unit_test(a_planned_request_keeps_its_place),
        cmocka_unit_test(a_box_reads_what_its_extents_read),
        cmocka_unit_test(a_box_of_one_dimension_makes_no_extents),
        cmocka_unit_test(a_box_kept_whole_counts_as_its_extents_do),
        cmocka_unit_test(a_bad_box_is_refused),
        cmocka_unit_test(a_box_writes_its_runs_where_they_belong),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
