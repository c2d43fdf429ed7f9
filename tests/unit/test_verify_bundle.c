/* gdunlock report's scrubbing (verify/verify_scrub.h) and its bundle end to
 * end: secrets planted in a copy of a fixture machine (its host name, a GPU
 * UUID, an NVMe serial, a filesystem UUID, a user's home path) must not
 * survive anywhere in the tar, and the scrubbed capture must replay with
 * doctor --sysroot to the verdict the machine gets unscrubbed. */
#include "verify/verify_scrub.h"

#include <setjmp.h>
#include <stdarg.h>
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
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(sh(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(scrubs_in_place),
        cmocka_unit_test(no_secret_survives),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
