/* The engine's cuFile backend against tests/unit/fake_libcufile.c (and the
 * fake libcuda): AUTO's choice and reason with and without nvidia-fs, the
 * named refusal of a file (5027), reads and writes through cuFileRead and
 * cuFileWrite (partial transfers looped), the fallback to the pipeline, and a
 * failing transfer reported with cuFile's error. */
#include "cuda/cuda_api.h"
#include "io_test_util.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#define SIZE ((uint64_t)(5u << 20) + 777)

static const gdu_cuda *cu;
static char dir[64];
static char *path;
static gdu_CUdeviceptr dev;
static uint8_t *host;

static int setup(void **state)
{
    char why[256];
    cu = gdu_cuda_load(why, sizeof why);
    snprintf(dir, sizeof dir, "./gdu-io-cufile-XXXXXX");
    if (cu == NULL || mkdtemp(dir) == NULL)
        return -1;
    path = io_test_file(dir, "data.bin", SIZE, 31);
    host = malloc(SIZE);
    return path && host && cu->cuMemAlloc(&dev, SIZE) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    io_test_remove_dir(dir, path);
    free(host);
    cu->cuMemFree(dev);
    return 0;
}

static int reset_env(void **state)
{
    unsetenv("FAKE_CUFILE_NVFS_MAJOR");
    unsetenv("FAKE_CUFILE_REGISTER");
    unsetenv("FAKE_CUFILE_FAIL_AT");
    return 0;
}

static gdu_io_engine *make(gdu_io_backend b, int expect)
{
    gdu_io_options o;
    gdu_io_options_default(&o, NULL, 0);
    o.backend = b;
    o.workers = 3;
    o.chunk_size = 1u << 20;
    gdu_io_engine *e = NULL;
    char why[256] = "";
    assert_int_equal(gdu_io_engine_create(&o, &e, why, sizeof why), expect);
    return e;
}

static void check_device(uint64_t off, uint64_t n, uint32_t seed)
{
    cu->cuMemcpyDtoH(host, dev, n);
    for (uint64_t i = 0; i < n; i++)
        if (host[i] != io_test_byte(off + i, seed))
            fail_msg("byte %llu of %llu+%llu wrong", (unsigned long long)i, (unsigned long long)off,
                     (unsigned long long)n);
}

static void compat_mode_is_not_chosen_by_auto(void **state)
{
    gdu_io_engine *e = make(GDU_IO_BACKEND_AUTO, 0);
    assert_int_equal(gdu_io_engine_backend(e), GDU_IO_BACKEND_PIPELINE);
    assert_int_equal(gdu_io_engine_direct_storage(e), 0);
    assert_non_null(strstr(gdu_io_engine_reason(e), "nvidia-fs not loaded"));
    gdu_io_engine_destroy(e);
}

/* Without nvidia-fs's procfs folder AUTO does not open cuFile at all (even
 * though this fake libcufile would claim nvidia-fs), and says why. */
static void auto_skips_cufile_without_nvidia_fs(void **state)
{
    setenv("FAKE_CUFILE_NVFS_MAJOR", "2", 1);
    char *saved = strdup(getenv("GDUNLOCK_NVFS_PROC"));
    setenv("GDUNLOCK_NVFS_PROC", "/nonexistent/nvidia-fs", 1);
    gdu_io_engine *e = make(GDU_IO_BACKEND_AUTO, 0);
    setenv("GDUNLOCK_NVFS_PROC", saved, 1);
    free(saved);
    assert_int_equal(gdu_io_engine_backend(e), GDU_IO_BACKEND_PIPELINE);
    assert_int_equal(gdu_io_engine_direct_storage(e), 0);
    assert_non_null(strstr(gdu_io_engine_reason(e), "cufile not tried: nvidia-fs not loaded"));
    gdu_io_engine_destroy(e);
}

static void forced_cufile_names_the_refusal(void **state)
{
    setenv("FAKE_CUFILE_REGISTER", "5027", 1);
    gdu_io_engine *e = make(GDU_IO_BACKEND_CUFILE, 0);
    assert_int_equal(gdu_io_engine_backend(e), GDU_IO_BACKEND_CUFILE);
    assert_non_null(strstr(gdu_io_engine_reason(e), "compat mode"));
    gdu_io_file *f = NULL;
    char why[512] = "";
    assert_int_equal(gdu_io_open(e, path, GDU_IO_READ, &f, why, sizeof why), -ENOTSUP);
    assert_null(f);
    assert_non_null(strstr(why, "CU_FILE_HANDLE_NOT_REGISTERED (5027)"));
    gdu_io_engine_destroy(e);
}

static void direct_storage_reads_and_writes_through_cufile(void **state)
{
    setenv("FAKE_CUFILE_NVFS_MAJOR", "2", 1);
    gdu_io_engine *e = make(GDU_IO_BACKEND_AUTO, 0);
    assert_int_equal(gdu_io_engine_backend(e), GDU_IO_BACKEND_CUFILE);
    assert_int_equal(gdu_io_engine_direct_storage(e), 1);
    gdu_io_file *f = NULL;
    char why[512] = "";
    assert_int_equal(gdu_io_open(e, path, GDU_IO_READ, &f, why, sizeof why), 0);
    assert_int_equal(gdu_io_file_backend(f), GDU_IO_BACKEND_CUFILE);
    const uint64_t cases[][2] = {{0, SIZE}, {1, 3}, {4095, 3u << 20}, {SIZE - 5, 100}, {SIZE, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t off = cases[i][0], len = cases[i][1], done = 0;
        assert_int_equal(gdu_io_read(f, off, len, (void *)(uintptr_t)dev, &done, why, sizeof why),
                         0);
        uint64_t expect = off >= SIZE ? 0 : (off + len > SIZE ? SIZE - off : len);
        assert_int_equal(done, expect);
        check_device(off, expect, 31);
    }
    gdu_io_close(f);
    /* GPU -> file through cuFileWrite, read back through the pipeline. */
    char out[128];
    snprintf(out, sizeof out, "%s/out.bin", dir);
    assert_int_equal(
        gdu_io_open(e, out, GDU_IO_WRITE | GDU_IO_CREATE | GDU_IO_TRUNCATE, &f, why, sizeof why),
        0);
    for (uint64_t i = 0; i < SIZE; i++)
        host[i] = io_test_byte(i, 8);
    cu->cuMemcpyHtoD(dev, host, SIZE);
    uint64_t done = 0;
    assert_int_equal(gdu_io_write(f, 0, SIZE, (void *)(uintptr_t)dev, &done, why, sizeof why), 0);
    assert_int_equal(done, SIZE);
    gdu_io_close(f);
    gdu_io_engine_destroy(e);
    int fd = open(out, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(pread(fd, host, SIZE, 0), (ssize_t)SIZE);
    close(fd);
    for (uint64_t i = 0; i < SIZE; i++)
        if (host[i] != io_test_byte(i, 8))
            fail_msg("written byte %llu wrong", (unsigned long long)i);
}

static void refused_file_falls_back_to_the_pipeline(void **state)
{
    setenv("FAKE_CUFILE_NVFS_MAJOR", "2", 1);
    setenv("FAKE_CUFILE_REGISTER", "5027", 1);
    gdu_io_engine *e = make(GDU_IO_BACKEND_AUTO, 0);
    gdu_io_file *f = NULL;
    char why[512] = "";
    assert_int_equal(gdu_io_open(e, path, GDU_IO_READ, &f, why, sizeof why), 0);
    assert_int_equal(gdu_io_file_backend(f), GDU_IO_BACKEND_PIPELINE);
    assert_non_null(
        strstr(gdu_io_file_reason(f), "cufile refused file: CU_FILE_HANDLE_NOT_REGISTERED (5027)"));
    uint64_t done = 0;
    assert_int_equal(gdu_io_read(f, 3, SIZE - 3, (void *)(uintptr_t)dev, &done, why, sizeof why),
                     0);
    assert_int_equal(done, SIZE - 3);
    check_device(3, SIZE - 3, 31);
    gdu_io_close(f);
    gdu_io_engine_destroy(e);
}

static void failing_cufile_read_is_reported(void **state)
{
    setenv("FAKE_CUFILE_NVFS_MAJOR", "2", 1);
    setenv("FAKE_CUFILE_FAIL_AT", "3500000", 1); /* inside the 4th 1 MiB chunk */
    gdu_io_engine *e = make(GDU_IO_BACKEND_CUFILE, 0);
    gdu_io_file *f = NULL;
    char why[512] = "";
    assert_int_equal(gdu_io_open(e, path, GDU_IO_READ, &f, why, sizeof why), 0);
    uint64_t done = 0;
    assert_int_equal(gdu_io_read(f, 0, SIZE, (void *)(uintptr_t)dev, &done, why, sizeof why), -EIO);
    assert_non_null(strstr(why, "cuFileRead at offset"));
    assert_int_equal(done, 3u << 20); /* the three whole chunks before it */
    check_device(0, done, 31);
    gdu_io_close(f);
    gdu_io_engine_destroy(e);
}

/* Reads all n bytes of f into dev; the pattern of seed must be there. */
static void read_all(gdu_io_file *f, uint64_t n, uint32_t seed)
{
    char why[512] = "";
    uint64_t done = 0;
    assert_int_equal(gdu_io_read(f, 0, n, (void *)(uintptr_t)dev, &done, why, sizeof why), 0);
    assert_int_equal(done, n);
    check_device(0, n, seed);
}

/* libcufile (and the fake) opens a registered file again by the name its
 * descriptor has in /proc. A file renamed after it was opened is found under
 * its new name and read through cuFile. One replaced by rename has no name:
 * forced cuFile refuses it saying why (not with CU_FILE_GETNEWFD_FAILED),
 * AUTO reads it through the pipeline: the file opened, not its replacement. */
static void cufile_needs_the_file_under_its_name(void **state)
{
    setenv("FAKE_CUFILE_NVFS_MAJOR", "2", 1);
    const uint64_t n = (1u << 20) + 5;
    char *first = io_test_file(dir, "first.bin", n, 41);
    char *second = io_test_file(dir, "second.bin", n, 42);
    assert_non_null(first);
    assert_non_null(second);
    gdu_io_engine *forced = make(GDU_IO_BACKEND_CUFILE, 0);
    gdu_io_engine *automatic = make(GDU_IO_BACKEND_AUTO, 0);
    gdu_io_file *f = NULL;
    char why[512] = "";
    int fd = open(first, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    char moved[128];
    snprintf(moved, sizeof moved, "%s/moved.bin", dir);
    assert_int_equal(rename(first, moved), 0);
    assert_int_equal(gdu_io_open_fd(forced, fd, GDU_IO_READ, &f, why, sizeof why), 0);
    assert_int_equal(gdu_io_file_backend(f), GDU_IO_BACKEND_CUFILE);
    read_all(f, n, 41);
    gdu_io_close(f);
    assert_int_equal(rename(second, moved), 0); /* the file fd holds has no name now */
    assert_int_equal(gdu_io_open_fd(forced, fd, GDU_IO_READ, &f, why, sizeof why), -ENOTSUP);
    assert_null(f);
    /* The words that explain, whatever the length of the folder the test runs in. */
    assert_non_null(strstr(why, "deleted or replaced since it was opened"));
    assert_non_null(strstr(why, "moved.bin (deleted)); the pipeline backend reads it"));
    assert_int_equal(gdu_io_open_fd(automatic, fd, GDU_IO_READ, &f, why, sizeof why), 0);
    assert_int_equal(gdu_io_file_backend(f), GDU_IO_BACKEND_PIPELINE);
    assert_non_null(strstr(gdu_io_file_reason(f), "cufile refused file: deleted or replaced"));
    read_all(f, n, 41);
    gdu_io_close(f);
    close(fd);
    gdu_io_engine_destroy(forced);
    gdu_io_engine_destroy(automatic);
    unlink(moved);
    free(first);
    free(second);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(compat_mode_is_not_chosen_by_auto, reset_env),
        cmocka_unit_test_setup(auto_skips_cufile_without_nvidia_fs, reset_env),
        cmocka_unit_test_setup(forced_cufile_names_the_refusal, reset_env),
        cmocka_unit_test_setup(direct_storage_reads_and_writes_through_cufile, reset_env),
        cmocka_unit_test_setup(refused_file_falls_back_to_the_pipeline, reset_env),
        cmocka_unit_test_setup(failing_cufile_read_is_reported, reset_env),
        cmocka_unit_test_setup(cufile_needs_the_file_under_its_name, reset_env),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
