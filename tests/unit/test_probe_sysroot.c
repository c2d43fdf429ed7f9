/* A sysroot replays only the capture: links resolve inside it as in a
 * chroot, FIFOs and devices are never opened, libpci is not let loose on a
 * tree that would lead it outside or block it. */
#include "probe/pci_probe.h"
#include "probe/sysroot.h"

#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

typedef struct {
    char root[64];    /* the sysroot */
    char outside[64]; /* a folder of this machine outside it */
} trees;

static void put(const char *dir, const char *path, const char *text)
{
    char full[PATH_MAX + 64], cmd[PATH_MAX * 2 + 128];
    snprintf(full, sizeof full, "%s%s", dir, path);
    snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\"", full);
    assert_int_equal(system(cmd), 0);
    FILE *f = fopen(full, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void link_at(const char *dir, const char *path, const char *target)
{
    char full[PATH_MAX + 64], cmd[PATH_MAX * 2 + 128];
    snprintf(full, sizeof full, "%s%s", dir, path);
    snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\"", full);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(symlink(target, full), 0);
}

static int setup(void **state)
{
    trees *t = calloc(1, sizeof *t);
    snprintf(t->root, sizeof t->root, "/tmp/gdu-sysroot-XXXXXX");
    snprintf(t->outside, sizeof t->outside, "/tmp/gdu-host-XXXXXX");
    if (mkdtemp(t->root) == NULL || mkdtemp(t->outside) == NULL)
        return -1;
    /* Nothing here may take long: a blocked open fails the test instead of hanging it. */
    alarm(20);
    *state = t;
    return 0;
}

static int teardown(void **state)
{
    trees *t = *state;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", t->root, t->outside);
    alarm(0);
    free(t);
    return system(cmd) == 0 ? 0 : -1;
}

/* The H200 capture's /etc/cufile.json -> /etc/alternatives/cufile.json ->
 * /usr/local/cuda-13.0/gds/cufile.json: absolute links, followed inside. */
static void absolute_links_stay_inside(void **state)
{
    trees *t = *state;
    char host_file[PATH_MAX];
    snprintf(host_file, sizeof host_file, "%s/cufile.json", t->outside);
    put(t->outside, "/cufile.json", "this machine's own file\n");
    put(t->root, host_file, "the captured file\n"); /* the same path inside the capture */
    link_at(t->root, "/etc/alternatives/cufile.json", host_file);
    link_at(t->root, "/etc/cufile.json", "/etc/alternatives/cufile.json");
    link_at(t->root, "/etc/up.json", "../../../../../../../../etc/alternatives/cufile.json");
    gdu_sysroot sr;
    assert_int_equal(gdu_sysroot_init(&sr, t->root), 0);
    char line[64], real[PATH_MAX];
    assert_int_equal(gdu_sysroot_read_line(&sr, "/etc/cufile.json", line, sizeof line), 0);
    assert_string_equal(line, "the captured file");
    assert_int_equal(gdu_sysroot_read_line(&sr, "/etc/up.json", line, sizeof line), 0);
    assert_string_equal(line, "the captured file");
    assert_int_equal(gdu_sysroot_realpath(&sr, "/etc/cufile.json", real, sizeof real), 0);
    assert_string_equal(real, host_file);
    /* a link to a file only this machine has: absent in the capture */
    link_at(t->root, "/etc/host-only", "/etc/hostname");
    char *text;
    assert_int_equal(gdu_sysroot_read(&sr, "/etc/host-only", &text), -ENOENT);
    assert_false(gdu_sysroot_exists(&sr, "/etc/host-only"));
    assert_int_equal(gdu_sysroot_readlink(&sr, "/etc/host-only", real, sizeof real), 0);
    assert_string_equal(real, "/etc/hostname");
    /* the capture of sysfs has relative links; they resolve as before */
    put(t->root, "/sys/devices/pci0000:00/0000:00:01.0/vendor", "0x10de\n");
    link_at(t->root, "/sys/bus/pci/devices/0000:00:01.0",
            "../../../devices/pci0000:00/0000:00:01.0");
    assert_int_equal(
        gdu_sysroot_realpath(&sr, "/sys/bus/pci/devices/0000:00:01.0/vendor", real, sizeof real),
        0);
    assert_string_equal(real, "/sys/devices/pci0000:00/0000:00:01.0/vendor");
    /* a loop ends */
    link_at(t->root, "/loop", "/loop");
    assert_int_equal(gdu_sysroot_read(&sr, "/loop", &text), -ELOOP);
    gdu_sysroot_free(&sr);
}

static void fifos_and_devices_are_not_opened(void **state)
{
    trees *t = *state;
    char fifo[PATH_MAX];
    snprintf(fifo, sizeof fifo, "%s/proc/driver/nvidia/version", t->root);
    put(t->root, "/proc/driver/nvidia/params", "x\n");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    link_at(t->root, "/dev-zero", "/dev/zero"); /* inside: absent; the host's would never end */
    gdu_sysroot sr;
    assert_int_equal(gdu_sysroot_init(&sr, t->root), 0);
    char *text, line[32];
    assert_int_equal(gdu_sysroot_read(&sr, "/proc/driver/nvidia/version", &text), -EINVAL);
    assert_null(text);
    assert_int_equal(gdu_sysroot_read_line(&sr, "/proc/driver/nvidia/version", line, sizeof line),
                     -EINVAL);
    assert_int_equal(gdu_sysroot_read(&sr, "/proc/driver/nvidia", &text), -EISDIR);
    assert_int_equal(gdu_sysroot_read(&sr, "/dev-zero", &text), -ENOENT);
    gdu_sysroot_free(&sr);
    /* live, a FIFO is not opened either */
    gdu_sysroot live;
    assert_int_equal(gdu_sysroot_init(&live, NULL), 0);
    assert_int_equal(gdu_sysroot_read(&live, fifo, &text), -EINVAL);
    assert_int_equal(gdu_sysroot_read(&live, "/dev/zero", &text), -EINVAL);
    gdu_sysroot_free(&live);
}

static void dot_files_are_not_listed(void **state)
{
    trees *t = *state;
    put(t->root, "/sys/class/block/vda/slaves/.keep", "");
    gdu_sysroot sr;
    assert_int_equal(gdu_sysroot_init(&sr, t->root), 0);
    char **names;
    assert_int_equal(gdu_sysroot_list(&sr, "/sys/class/block/vda/slaves", &names), 0);
    free(names);
    gdu_sysroot_free(&sr);
}

/* libpci reads the device folders by itself: a FIFO among the files, or a
 * device link leading to this machine's /sys, keeps it out. */
static void libpci_only_on_a_confined_tree(void **state)
{
    trees *t = *state;
    const char *dev = "/sys/devices/pci0000:00/0000:00:01.0";
    char path[PATH_MAX];
    put(t->root, "/sys/devices/pci0000:00/0000:00:01.0/vendor", "0x10de\n");
    put(t->root, "/sys/devices/pci0000:00/0000:00:01.0/device", "0x2335\n");
    put(t->root, "/sys/devices/pci0000:00/0000:00:01.0/class", "0x030200\n");
    put(t->root, "/sys/devices/pci0000:00/0000:00:01.0/irq", "0\n");
    char resource[13 * 60] = "";
    for (int i = 0; i < 13; i++)
        strcat(resource, "0x0000000000000000 0x0000000000000000 0x0000000000000000\n");
    put(t->root, "/sys/devices/pci0000:00/0000:00:01.0/resource", resource);
    link_at(t->root, "/sys/bus/pci/devices/0000:00:01.0",
            "../../../devices/pci0000:00/0000:00:01.0");
    snprintf(path, sizeof path, "%s%s/config", t->root, dev);
    assert_int_equal(mkfifo(path, 0600), 0);
    gdu_sysroot sr;
    assert_int_equal(gdu_sysroot_init(&sr, t->root), 0);
    gdu_pci pci;
    char why[512] = "";
    assert_int_equal(gdu_pci_scan(&sr, &pci, why, sizeof why), -EINVAL);
    assert_non_null(strstr(why, "0000:00:01.0/config is not a plain file"));
    assert_int_equal(pci.n, 0);
    unlink(path);
    assert_int_equal(gdu_pci_scan(&sr, &pci, why, sizeof why), 0);
    assert_int_equal(pci.n, 1);
    gdu_pci_free(&pci);
    /* the device reached through an absolute link, to a folder this machine has */
    snprintf(path, sizeof path, "%s/sys/bus/pci/devices/0000:00:01.0", t->root);
    unlink(path);
    char host_dev[PATH_MAX];
    snprintf(host_dev, sizeof host_dev, "%s/0000:00:01.0", t->outside);
    put(host_dev, "/vendor", "0x10de\n");
    link_at(t->root, "/sys/bus/pci/devices/0000:00:01.0", host_dev);
    assert_int_equal(gdu_pci_scan(&sr, &pci, why, sizeof why), -EXDEV);
    assert_non_null(strstr(why, "leads outside the sysroot"));
    gdu_sysroot_free(&sr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(absolute_links_stay_inside, setup, teardown),
        cmocka_unit_test_setup_teardown(fifos_and_devices_are_not_opened, setup, teardown),
        cmocka_unit_test_setup_teardown(dot_files_are_not_listed, setup, teardown),
        cmocka_unit_test_setup_teardown(libpci_only_on_a_confined_tree, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
