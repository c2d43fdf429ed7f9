/* gdunlock report's scrubbing (report/report_scrub.h) and its bundle end to
 * end: secrets planted in a copy of a fixture machine (its host name, a GPU
 * UUID, an NVMe serial, a filesystem UUID, a user's home path) must not
 * survive anywhere in the tar, and the scrubbed capture must replay with
 * doctor --sysroot to the verdict the machine gets unscrubbed. */
#include "report/report_scrub.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#define FIXTURE GDUNLOCK_FIXTURES "/doctor/rtx3060-nvfs-rebar"

static void scrubs_in_place(void **state)
{
    gdu_scrub s;
    gdu_scrub_init(&s);
    gdu_scrub_add_host(&s, "gpubox-17\n");
    gdu_scrub_add_user(&s, "alice");
    gdu_scrub_add_user(&s, "root"); /* never: /root would go */
    gdu_scrub_add_host(&s, "ab");   /* too short to take */
    char *out = gdu_scrub_text(&s, "GPU UUID: GPU-5A1C0D9E-3f7b-4c2a-9e61-0b8f2d4a7c13\n"
                                   "uuid=5a1c0d9e-3f7b-4c2a-9e61-0b8f2d4a7c13 root=UUID=3c5e ro\n"
                                   "E:ID_SERIAL_SHORT=S6Z1NJ0W123456X\n"
                                   "S:disk/by-id/nvme-Samsung_S6Z1NJ0W123456X\n"
                                   "host gpubox-17 alice aliced /home/alice/m /root/x ab\n");
    assert_non_null(out);
    assert_string_equal(out, "GPU UUID: GPU-00000000-0000-0000-0000-000000000000\n"
                             "uuid=00000000-0000-0000-0000-000000000000 root=UUID=scrubbed ro\n"
                             "E:ID_SERIAL_SHORT=scrubbed\n"
                             "S:disk/by-id/scrubbed\n"
                             "host host user aliced /home/user/m /root/x ab\n");
    free(out);
}

static char output[1 << 16];

static int sh(const char *cmd)
{
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    output[fread(output, 1, sizeof output - 1, p)] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void append(const char *path, const char *text)
{
    FILE *f = fopen(path, "a");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void no_secret_survives(void **state)
{
    static const char *const secrets[] = {"gpubox-alice-17", "5a1c0d9e",    "S6Z1NJ0W123456X",
                                          "7f3e2a1b",        "/home/alice", "alice"};
    char dir[] = "/tmp/gdu-bundle-XXXXXX", cmd[4096], m[1024];
    assert_non_null(mkdtemp(dir));
    snprintf(cmd, sizeof cmd, "cp -a '%s' '%s/machine' && mkdir -p '%s/machine/proc/sys/kernel'",
             FIXTURE, dir, dir);
    assert_int_equal(sh(cmd), 0);
    snprintf(m, sizeof m, "%s/machine", dir);
    char path[1200];
    snprintf(path, sizeof path, "%s/proc/sys/kernel/hostname", m);
    append(path, "gpubox-alice-17\n");
    snprintf(path, sizeof path, "%s/proc/cmdline", m);
    unlink(path);
    append(path, "BOOT_IMAGE=/vmlinuz root=UUID=7f3e2a1b-9c4d-4e5f-8a6b-1c2d3e4f5a6b "
                 "systemd.hostname=gpubox-alice-17\n");
    snprintf(path, sizeof path, "%s/run/udev/data/b259:1", m);
    append(path, "E:ID_SERIAL=Samsung_SSD_990_PRO_2TB_S6Z1NJ0W123456X\n"
                 "E:ID_SERIAL_SHORT=S6Z1NJ0W123456X\n"
                 "S:disk/by-id/nvme-Samsung_SSD_990_PRO_2TB_S6Z1NJ0W123456X\n"
                 "E:ID_FS_UUID=7f3e2a1b-9c4d-4e5f-8a6b-1c2d3e4f5a6b\n");
    snprintf(path, sizeof path, "%s/proc/self/mountinfo", m);
    append(path, "50 40 259:1 /alice /home/alice/models rw,noatime shared:40 - ext4 "
                 "/dev/nvme0n1p1 rw\n");

    snprintf(cmd, sizeof cmd, "'%s' doctor --sysroot '%s' /home/alice/models >/dev/null 2>&1",
             GDUNLOCK_BIN, m);
    int unscrubbed = sh(cmd);
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' report --sysroot '%s' --out b.tar 2>&1", dir,
             GDUNLOCK_BIN, m);
    assert_int_equal(sh(cmd), 0);
    /* Every byte of the tar, file names and headers included. */
    snprintf(cmd, sizeof cmd, "cat '%s/b.tar'", dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    static char tar[4 << 20];
    size_t n = fread(tar, 1, sizeof tar, p);
    pclose(p);
    assert_true(n > 1024 && n < sizeof tar);
    for (size_t i = 0; i < sizeof secrets / sizeof secrets[0]; i++)
        if (memmem(tar, n, secrets[i], strlen(secrets[i])) != NULL)
            fail_msg("the bundle holds the planted secret '%s'", secrets[i]);
    /* The scrubbed capture still replays, to the same verdict. */
    snprintf(cmd, sizeof cmd,
             "cd '%s' && tar xf b.tar && '%s' doctor --sysroot gdunlock-report/capture "
             "/home/user/models",
             dir, GDUNLOCK_BIN);
    assert_int_equal(sh(cmd), unscrubbed);
    assert_non_null(strstr(output, "GPUDirect Storage (/home/user/models)"));
    /* The P2P unlock's status rides along, for a report of a GeForce pair. */
    snprintf(cmd, sizeof cmd, "cat '%s/gdunlock-report/p2p-unlock-status.json'", dir);
    assert_int_equal(sh(cmd), 0);
    assert_non_null(strstr(output, "\"status\""));
    assert_non_null(strstr(output, "\"matrix\""));
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(sh(cmd), 0);
}

/* A scratch folder holding a copy of the fixture machine, dir/machine. */
static void machine_copy(char *dir)
{
    char cmd[4096];
    assert_non_null(mkdtemp(dir));
    snprintf(cmd, sizeof cmd, "cp -a '%s' '%s/machine'", FIXTURE, dir);
    assert_int_equal(sh(cmd), 0);
}

static void remove_tree(const char *dir)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(sh(cmd), 0);
}

/* report's run in dir, limited (a hang or a disk filled is a failure, not
 * a stuck test: 20 s, and files of 64 MiB at most), with its exit status
 * and output. */
static int report_in(const char *dir, const char *env, const char *args)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && ulimit -f 65536 && %s timeout 20 '%s' report %s 2>&1; echo \"rc=$?\"", dir,
             env, GDUNLOCK_BIN, args);
    sh(cmd);
    const char *rc = strstr(output, "rc=");
    assert_non_null(rc);
    return atoi(rc + 3);
}

/* Whether the file dir/name holds text. */
static bool holds(const char *dir, const char *name, const char *text)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "grep -c '%s' '%s/%s'", text, dir, name);
    return sh(cmd) == 0;
}

/* A capture's files that lead out of it (links absolute or by "..") are
 * read inside it, as doctor's replay reads them: the bundle, made to be
 * posted, holds nothing of this machine's files; a FIFO or a device in
 * their place (the host name the scrubbing reads too) is left out, with a
 * note, rather than hang the report or fill the disk. */
static void a_capture_reads_only_itself(void **state)
{
    char dir[] = "/tmp/gdu-bundle-XXXXXX", cmd[8192];
    machine_copy(dir);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && echo OUTSIDE-SECRET-1 > secret.txt && "
             "ln -sf '%s/secret.txt' machine/proc/driver/nvidia/params && "
             "ln -sf ../../../../secret.txt machine/proc/driver/nvidia-fs/stats",
             dir, dir);
    assert_int_equal(sh(cmd), 0);
    assert_int_equal(report_in(dir, "", "--sysroot machine --out b.tar"), 0);
    snprintf(cmd, sizeof cmd, "cd '%s' && tar xOf b.tar | grep -c OUTSIDE-SECRET", dir);
    if (sh(cmd) == 0)
        fail_msg("the bundle holds a file from outside the capture");
    /* A FIFO and /dev/zero */
    snprintf(
        cmd, sizeof cmd,
        "cd '%s' && rm -f machine/proc/driver/nvidia/params machine/proc/driver/nvidia-fs/stats "
        "&& mkfifo machine/proc/driver/nvidia/params && "
        "ln -s /dev/zero machine/proc/driver/nvidia-fs/stats && mkdir -p machine/etc && "
        "rm -f machine/etc/hostname && mkfifo machine/etc/hostname",
        dir);
    assert_int_equal(sh(cmd), 0);
    int rc = report_in(dir, "", "--sysroot machine --out c.tar");
    if (rc != 0)
        fail_msg("report over a FIFO and /dev/zero: exit %d (124: it hung): %s", rc, output);
    assert_non_null(strstr(output, "/proc/driver/nvidia/params is not a regular file"));
    remove_tree(dir);
}

/* Live, GDUNLOCK_NVFS_STATS naming a FIFO or /dev/zero neither hangs the
 * report nor fills the disk. */
static void live_stats_must_be_a_regular_file(void **state)
{
    char dir[] = "/tmp/gdu-bundle-XXXXXX", cmd[4096];
    assert_non_null(mkdtemp(dir));
    snprintf(cmd, sizeof cmd, "cd '%s' && mkfifo stats-fifo", dir);
    assert_int_equal(sh(cmd), 0);
    static const char *const stats[] = {"GDUNLOCK_NVFS_STATS=stats-fifo",
                                        "GDUNLOCK_NVFS_STATS=/dev/zero"};
    for (size_t i = 0; i < 2; i++) {
        char out[64];
        snprintf(out, sizeof out, "--out live%zu.tar", i);
        int rc = report_in(dir, stats[i], out);
        if (rc != 0)
            fail_msg("%s: exit %d (124: it hung; 153: the disk limit): %s", stats[i], rc, output);
        assert_non_null(strstr(output, "is not a regular file"));
    }
    remove_tree(dir);
}

/* A live report carries verify --rdma's outcome: here, no verbs library. */
static void live_carries_verify_rdma(void **state)
{
    char dir[] = "/tmp/gdu-bundle-XXXXXX", cmd[4096];
    assert_non_null(mkdtemp(dir));
    int rc = report_in(dir, "GDUNLOCK_IBVERBS=/nonexistent/libibverbs.so.1", "--out r.tar");
    if (rc != 0)
        fail_msg("report: exit %d: %s", rc, output);
    snprintf(cmd, sizeof cmd, "cd '%s' && tar xf r.tar", dir);
    assert_int_equal(sh(cmd), 0);
    assert_true(holds(dir, "gdunlock-report/verify-rdma.json", "no-verbs-library"));
    assert_true(holds(dir, "gdunlock-report/README.txt", "verify-rdma.json"));
    remove_tree(dir);
}

/* The bundle never goes through a link at its name (--out LINK, or one
 * planted at the default name) nor over a file there without --force. */
static void the_bundle_is_made_anew(void **state)
{
    char dir[] = "/tmp/gdu-bundle-XXXXXX", cmd[8192];
    machine_copy(dir);
    snprintf(cmd, sizeof cmd, "cd '%s' && echo VICTIM > victim && ln -s victim link.tar", dir);
    assert_int_equal(sh(cmd), 0);
    assert_int_equal(report_in(dir, "", "--sysroot machine --out link.tar"), 64);
    assert_non_null(strstr(output, "link.tar exists (a symbolic link)"));
    assert_non_null(strstr(output, "--force"));
    assert_true(holds(dir, "victim", "^VICTIM$"));
    /* the default name, a link planted for each of the next seconds */
    snprintf(cmd, sizeof cmd,
             "cd '%s' && t=$(date +%%s) && for i in 0 1 2 3 4 5 6 7 8 9; do "
             "ln -s victim \"gdunlock-report-$(date -u -d @$((t + i)) +%%Y%%m%%d-%%H%%M%%S).tar\"; "
             "done",
             dir);
    assert_int_equal(sh(cmd), 0);
    assert_int_equal(report_in(dir, "", "--sysroot machine"), 64);
    assert_true(holds(dir, "victim", "^VICTIM$"));
    /* --force replaces the link itself, not what it points to */
    assert_int_equal(report_in(dir, "", "--sysroot machine --out link.tar --force"), 0);
    assert_true(holds(dir, "victim", "^VICTIM$"));
    snprintf(cmd, sizeof cmd,
             "cd '%s' && test -f link.tar && ! test -L link.tar && tar tf link.tar", dir);
    assert_int_equal(sh(cmd), 0);
    /* a regular file is kept too, unless --force */
    assert_int_equal(report_in(dir, "", "--sysroot machine --out victim"), 64);
    assert_non_null(strstr(output, "victim exists (a regular file)"));
    assert_true(holds(dir, "victim", "^VICTIM$"));
    /* nothing half-made is left beside it */
    snprintf(cmd, sizeof cmd, "cd '%s' && ls -A | grep -c '^\\.gdunlock-report-'", dir);
    assert_int_equal(sh(cmd), 1);
    remove_tree(dir);
}

/* A folder the bundle cannot go in is named with the cause, not guessed
 * at ("disk full, or no such folder?"). */
static void an_unwritable_folder_says_why(void **state)
{
    char dir[] = "/tmp/gdu-bundle-XXXXXX";
    machine_copy(dir);
    assert_int_equal(report_in(dir, "", "--sysroot machine --out no-such-folder/b.tar"), 74);
    assert_non_null(strstr(output, "cannot create the bundle in no-such-folder: No such file or "
                                   "directory"));
    assert_int_equal(report_in(dir, "", "--sysroot machine --out machine/proc/cmdline/b.tar"), 74);
    assert_non_null(strstr(output, "Not a directory"));
    remove_tree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(scrubs_in_place),
        cmocka_unit_test(no_secret_survives),
        cmocka_unit_test(a_capture_reads_only_itself),
        cmocka_unit_test(live_stats_must_be_a_regular_file),
        cmocka_unit_test(live_carries_verify_rdma),
        cmocka_unit_test(the_bundle_is_made_anew),
        cmocka_unit_test(an_unwritable_folder_says_why),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
