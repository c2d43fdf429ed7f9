/* gdu_open_regular (src/util/open_regular.c): a regular file opens, blocking
 * again; a FIFO without a peer, for reading and for writing, a directory and
 * a character device are refused at once, each named; a missing file says
 * why. */
#include "util/open_regular.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

static char dir[64];

static int setup(void **state)
{
    snprintf(dir, sizeof dir, "/tmp/gdu-open-regular-XXXXXX");
    return mkdtemp(dir) != NULL ? 0 : -1;
}

static int teardown(void **state)
{
    char path[128];
    snprintf(path, sizeof path, "%s/fifo", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/file", dir);
    unlink(path);
    rmdir(dir);
    return 0;
}

static void regular_file_opens_blocking(void **state)
{
    char path[128], why[256] = "";
    snprintf(path, sizeof path, "%s/file", dir);
    int fd = gdu_open_regular(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600, why, sizeof why);
    assert_true(fd >= 0);
    assert_int_equal(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
    close(fd);
    fd = gdu_open_regular(path, O_RDONLY | O_NONBLOCK, 0, why, sizeof why); /* asked for: kept */
    assert_true(fd >= 0);
    assert_int_equal(fcntl(fd, F_GETFL) & O_NONBLOCK, O_NONBLOCK);
    close(fd);
}

static void others_are_refused_and_named(void **state)
{
    char path[128], why[256] = "", want[192];
    snprintf(path, sizeof path, "%s/fifo", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    snprintf(want, sizeof want, "%s is a FIFO, not a regular file", path);
    static const int modes[] = {O_RDONLY, O_WRONLY, O_RDWR | O_CREAT | O_TRUNC,
                                O_RDONLY | O_DIRECT};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        why[0] = '\0';
        assert_int_equal(gdu_open_regular(path, modes[i], 0600, why, sizeof why), -EINVAL);
        assert_string_equal(why, want);
    }
    assert_int_equal(gdu_open_regular(dir, O_RDONLY, 0, why, sizeof why), -EISDIR);
    assert_non_null(strstr(why, "is a directory, not a regular file"));
    assert_int_equal(gdu_open_regular("/dev/null", O_RDONLY, 0, why, sizeof why), -EINVAL);
    assert_string_equal(why, "/dev/null is a character device, not a regular file");
    snprintf(path, sizeof path, "%s/none", dir);
    assert_int_equal(gdu_open_regular(path, O_RDONLY, 0, why, sizeof why), -ENOENT);
    assert_non_null(strstr(why, "cannot open"));
    assert_non_null(strstr(why, "No such file or directory"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(regular_file_opens_blocking),
        cmocka_unit_test(others_are_refused_and_named),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
