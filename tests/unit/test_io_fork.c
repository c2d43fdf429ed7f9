/* A child of fork() inherits its parent's engines without their worker
 * threads: a read through one would wait for ever, and destroying one would
 * join threads the child does not have. Every call that needs the workers
 * fails at once with -ESRCH, naming the cause; destroying the engine or
 * closing its files only lets go of the child's copy; an engine the child
 * makes serves it; the parent's goes on. The child runs under alarm(): a
 * hang is a failure, not a stuck test. Host backend. */
#include "io/io_internal.h"
#include "io_test_util.h"

#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#define CHUNK (16u << 10)
#define SIZE ((uint64_t)CHUNK * 21 + 7)

static char dir[64];
static char *path;
/* The parent's engine, held where the child's leak check (valgrind's, at
 * its exit) still finds it: the child lets it go without freeing it
 * (volatile: a store never read back is kept). */
static gdu_io_engine *volatile parents;

static int setup(void **state)
{
    snprintf(dir, sizeof dir, "./gdu-io-fork-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return -1;
    path = io_test_file(dir, "data.bin", SIZE, 11);
    return path ? 0 : -1;
}

static int teardown(void **state)
{
    io_test_remove_dir(dir, path);
    return 0;
}

/* Whether a whole read of the file through f gives its bytes. */
static bool reads_the_file(gdu_io_file *f, uint8_t *buf)
{
    char why[256] = "";
    uint64_t done = 0;
    memset(buf, 0, SIZE);
    if (gdu_io_read(f, 0, SIZE, buf, &done, why, sizeof why) != 0 || done != SIZE)
        return false;
    for (uint64_t i = 0; i < SIZE; i++)
        if (buf[i] != io_test_byte(i, 11))
            return false;
    return true;
}

/* The child's checks, each a bit of its exit status (0: all held). */
static int child(gdu_io_engine *e, gdu_io_file *f, uint8_t *buf)
{
    alarm(20);
    int failed = 0;
    char why[256] = "";
    gdu_io_file *g = NULL;
    if (gdu_io_open(e, path, GDU_IO_READ, &g, why, sizeof why) != -ESRCH || g != NULL ||
        strstr(why, "forked") == NULL)
        failed |= 1;
    uint64_t done = 1;
    why[0] = '\0';
    if (gdu_io_read(f, 0, SIZE, buf, &done, why, sizeof why) != -ESRCH || done != 0 ||
        strstr(why, "forked") == NULL)
        failed |= 2;
    gdu_io_extent x = {.offset = 0, .length = SIZE, .mem = buf};
    gdu_io_request *r = NULL;
    if (gdu_io_submit(f, GDU_IO_OP_READ, &x, 1, NULL, NULL, &r) != -ESRCH || r != NULL)
        failed |= 4;
    if (gdu_io_engine_prestage(e, why, sizeof why) != -ESRCH)
        failed |= 8;
    gdu_io_close(f);
    gdu_io_engine_destroy(e);
    gdu_io_engine *mine = io_test_engine(2, CHUNK, 2, GDU_IO_DIRECT_OFF);
    gdu_io_file *h = NULL;
    if (mine == NULL || gdu_io_open(mine, path, GDU_IO_READ, &h, why, sizeof why) != 0 ||
        !reads_the_file(h, buf))
        failed |= 16;
    gdu_io_close(h);
    gdu_io_engine_destroy(mine);
    return failed;
}

static void an_inherited_engine_refuses_and_the_childs_own_serves(void **state)
{
    gdu_io_engine *e = parents = io_test_engine(3, CHUNK, 2, GDU_IO_DIRECT_OFF);
    assert_non_null(e);
    gdu_io_file *f = NULL;
    char why[256] = "";
    assert_int_equal(gdu_io_open(e, path, GDU_IO_READ, &f, why, sizeof why), 0);
    uint8_t *buf = malloc(SIZE);
    assert_true(reads_the_file(f, buf));
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(child(e, f, buf));
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status))
        fail_msg("the child died of signal %d (SIGALRM: a call waited for the parent's workers)",
                 WTERMSIG(status));
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_true(reads_the_file(f, buf)); /* the parent's engine is untouched */
    free(buf);
    gdu_io_close(f);
    gdu_io_engine_destroy(e);
}

/* Mappings in this process of files whose name holds name
 * (/proc/self/maps). */
static int mappings_named(const char *name)
{
    FILE *m = fopen("/proc/self/maps", "re");
    if (m == NULL)
        return -1;
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, m) != NULL)
        n += strstr(line, name) != NULL;
    fclose(m);
    return n;
}

/* A child of fork() unmaps the mappings its parent's engine kept for
 * closed files: no worker of the child's will, and a deleted file's
 * blocks would stay allocated for the child's whole life. The parent's
 * kept mapping stays (its next open of the file takes it). */
static void a_child_drops_the_kept_mappings(void **state)
{
    char *gone = io_test_file(dir, "kept-then-deleted.bin", 1 << 20, 11);
    assert_non_null(gone);
    gdu_io_engine *e = parents = io_test_engine(2, CHUNK, 2, GDU_IO_DIRECT_OFF);
    assert_non_null(e);
    e->keep_map_seconds = 600;
    gdu_io_file *f = NULL;
    assert_int_equal(gdu_io_open(e, gone, GDU_IO_READ, &f, NULL, 0), 0);
    enum { ROWS = 64, PIECE = 512 };
    uint8_t *buf = malloc(ROWS * PIECE);
    gdu_io_extent x[ROWS];
    for (size_t i = 0; i < ROWS; i++) /* a column: gathered from the file's mapping */
        x[i] = (gdu_io_extent){.offset = i * 8192, .length = PIECE, .mem = buf + i * PIECE};
    gdu_io_request *r = NULL;
    assert_int_equal(gdu_io_submit(f, GDU_IO_OP_READ, x, ROWS, NULL, NULL, &r), 0);
    assert_int_equal(gdu_io_wait(r, NULL, NULL, 0), 0);
    free(buf);
    gdu_io_close(f); /* the mapping is kept for the next open */
    assert_int_equal(unlink(gone), 0);
    assert_int_equal(mappings_named("kept-then-deleted.bin"), 1);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(mappings_named("kept-then-deleted.bin"));
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) != 0)
        fail_msg("the child still maps the deleted file %d time(s)", WEXITSTATUS(status));
    assert_int_equal(mappings_named("kept-then-deleted.bin"), 1);
    gdu_io_engine_destroy(e);
    assert_int_equal(mappings_named("kept-then-deleted.bin"), 0);
    free(gone);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(an_inherited_engine_refuses_and_the_childs_own_serves),
        cmocka_unit_test(a_child_drops_the_kept_mappings),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
