/* Opening files on the engine: only regular files, never a blocking open (a
 * FIFO without a writer, swapped in for a file, hung a plain open forever),
 * and a descriptor handed in is read as the file it is, not as whatever
 * its path names later (a checkpoint replaced by rename after its header was
 * validated). An alarm turns a hang into a failure. */
#include "io_test_util.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/stat.h>
#include <cmocka.h>

#define SIZE ((uint64_t)3 * 4096 + 77)

typedef struct {
    char dir[256];
    char *path;
    gdu_io_engine *engine;
} fixture;

static int setup(void **state)
{
    fixture *fx = calloc(1, sizeof *fx);
    *state = fx;
    snprintf(fx->dir, sizeof fx->dir, "./gdu-io-open-XXXXXX"); /* the build disk: O_DIRECT */
    if (fx == NULL || mkdtemp(fx->dir) == NULL)
        return -1;
    fx->path = io_test_file(fx->dir, "data.bin", SIZE, 3);
    fx->engine = io_test_engine(2, 4096, 2, GDU_IO_DIRECT_ON);
    alarm(20);
    return fx->path && fx->engine ? 0 : -1;
}

static int teardown(void **state)
{
    fixture *fx = *state;
    alarm(0);
    gdu_io_engine_destroy(fx->engine);
    char other[512];
    snprintf(other, sizeof other, "%s/other", fx->dir);
    unlink(other);
    io_test_remove_dir(fx->dir, fx->path);
    free(fx);
    return 0;
}

/* Whole-file read through f: every byte of the pattern seeded seed. */
static void expect_pattern(gdu_io_file *f, uint32_t seed)
{
    uint8_t buf[SIZE];
    uint64_t done = 0;
    char why[256] = "";
    assert_int_equal(gdu_io_read(f, 0, SIZE, buf, &done, why, sizeof why), 0);
    assert_int_equal(done, SIZE);
    for (uint64_t i = 0; i < SIZE; i++)
        if (buf[i] != io_test_byte(i, seed))
            fail_msg("byte %llu: %u, the pattern seeded %u has %u", (unsigned long long)i, buf[i],
                     seed, io_test_byte(i, seed));
}

static void test_fifo_refused_without_blocking(void **state)
{
    fixture *fx = *state;
    char fifo[512];
    snprintf(fifo, sizeof fifo, "%s/other", fx->dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    gdu_io_file *f = (gdu_io_file *)1;
    char why[256] = "";
    assert_int_equal(gdu_io_open(fx->engine, fifo, GDU_IO_READ, &f, why, sizeof why), -EINVAL);
    assert_null(f);
    assert_non_null(strstr(why, "a FIFO, not a regular file"));
    /* For writing, a FIFO without a reader cannot even be opened. */
    assert_true(gdu_io_open(fx->engine, fifo, GDU_IO_WRITE, &f, why, sizeof why) < 0);
    assert_null(f);
    /* A FIFO swapped in for the file: refused as well, not waited on. */
    assert_int_equal(rename(fifo, fx->path), 0);
    assert_int_equal(gdu_io_open(fx->engine, fx->path, GDU_IO_READ, &f, why, sizeof why), -EINVAL);
}

static void test_directory_and_device_refused(void **state)
{
    fixture *fx = *state;
    gdu_io_file *f = NULL;
    char why[256] = "";
    assert_int_equal(gdu_io_open(fx->engine, fx->dir, GDU_IO_READ, &f, why, sizeof why), -EISDIR);
    assert_non_null(strstr(why, "a directory"));
    assert_null(f);
    assert_int_equal(gdu_io_open(fx->engine, "/dev/null", GDU_IO_READ, &f, why, sizeof why),
                     -EINVAL);
    assert_non_null(strstr(why, "a character device"));
    int dir = open(fx->dir, O_RDONLY | O_CLOEXEC);
    assert_true(dir >= 0);
    assert_int_equal(gdu_io_open_fd(fx->engine, dir, GDU_IO_READ, &f, why, sizeof why), -EISDIR);
    close(dir);
}

/* The descriptor's file is read (buffered and O_DIRECT) after another file
 * was renamed over its path. */
static void test_descriptor_read_after_rename(void **state)
{
    fixture *fx = *state;
    int fd = open(fx->path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    char *other = io_test_file(fx->dir, "other", SIZE, 9);
    assert_non_null(other);
    assert_int_equal(rename(other, fx->path), 0);
    free(other);
    gdu_io_file *f = NULL;
    char why[256] = "";
    assert_int_equal(gdu_io_open_fd(fx->engine, fd, GDU_IO_READ, &f, why, sizeof why), 0);
    close(fd); /* the engine holds its own duplicate */
    expect_pattern(f, 3);
    /* Where the file system takes O_DIRECT, the direct descriptor is the
     * same file (a reopen by path would read the new one). */
    printf("# %s\n", gdu_io_file_reason(f));
    if (gdu_io_file_direct(f))
        assert_non_null(strstr(gdu_io_file_reason(f), "O_DIRECT reads"));
    gdu_io_close(f);
    /* The path itself now opens the other file. */
    assert_int_equal(gdu_io_open(fx->engine, fx->path, GDU_IO_READ, &f, why, sizeof why), 0);
    expect_pattern(f, 9);
    gdu_io_close(f);
}

static void test_descriptor_access_checked(void **state)
{
    fixture *fx = *state;
    gdu_io_file *f = (gdu_io_file *)1;
    char why[256] = "";
    int ro = open(fx->path, O_RDONLY | O_CLOEXEC);
    int wo = open(fx->path, O_WRONLY | O_APPEND | O_CLOEXEC);
    assert_true(ro >= 0 && wo >= 0);
    assert_int_equal(gdu_io_open_fd(fx->engine, ro, GDU_IO_WRITE, &f, why, sizeof why), -EBADF);
    assert_null(f);
    assert_non_null(strstr(why, "read-only"));
    assert_int_equal(gdu_io_open_fd(fx->engine, wo, GDU_IO_READ, &f, why, sizeof why), -EBADF);
    assert_int_equal(gdu_io_open_fd(fx->engine, wo, GDU_IO_WRITE, &f, why, sizeof why), -EINVAL);
    assert_non_null(strstr(why, "O_APPEND"));
    assert_int_equal(
        gdu_io_open_fd(fx->engine, ro, GDU_IO_READ | GDU_IO_TRUNCATE, &f, why, sizeof why),
        -EINVAL);
    close(wo);
    close(ro);
    assert_int_equal(gdu_io_open_fd(fx->engine, ro, GDU_IO_READ, &f, why, sizeof why), -EBADF);
    assert_int_equal(gdu_io_open_fd(fx->engine, -1, GDU_IO_READ, &f, NULL, 0), -EBADF);
    assert_int_equal(gdu_io_open_fd(NULL, 0, GDU_IO_READ, &f, why, sizeof why), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fifo_refused_without_blocking, setup, teardown),
        cmocka_unit_test_setup_teardown(test_directory_and_device_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_descriptor_read_after_rename, setup, teardown),
        cmocka_unit_test_setup_teardown(test_descriptor_access_checked, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
