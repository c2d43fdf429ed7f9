/* Live answers: the capture file round trip, bus id spelling, O_DIRECT
 * probing and doctor --capture's copy of what was read. */
#include "facts/capture.h"
#include "facts/live.h"
#include "probe/pci_probe.h"
#include "probe/sysroot.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

/* A live snapshot of what sr recorded, with live's answers (the files stay sr's). */
static gdu_snapshot *as_snapshot(gdu_sysroot *sr, const gdu_live *live)
{
    gdu_snapshot *s = calloc(1, sizeof *s);
    assert_non_null(s);
    s->live_machine = true;
    s->live = *live;
    s->files = sr->recorded;
    s->n_files = sr->n_recorded;
    return s;
}

static void json_round_trip(void **state)
{
    gdu_live a, b;
    memset(&a, 0, sizeof a);
    a.origin = GDU_LIVE_COLLECTED;
    a.euid = 1000;
    a.cuda_ok = true;
    a.cuda_version = 13000;
    a.n_gpus = 2;
    for (int i = 0; i < 2; i++) {
        a.gpus[i].ordinal = i;
        snprintf(a.gpus[i].name, sizeof a.gpus[i].name, "NVIDIA H200");
        snprintf(a.gpus[i].bdf, sizeof a.gpus[i].bdf, "0000:%02x:00.0", 0x18 + i);
        a.gpus[i].total_mem = 150754820096ull;
        a.gpus[i].cc_major = 9;
    }
    /* The one collector's fields: the RM's gpuId and BAR1 count, CUDA's other
     * peer attributes, the RM's copy engines. */
    a.gpus[0].rm_known = a.gpus[0].rm_bar1_known = true;
    a.gpus[0].rm_gpu_id = 0x1800;
    a.gpus[0].rm_bar1_total = 256ull << 30;
    a.gpus[0].rm_bar1_available = (256ull << 30) - (40ull << 20);
    snprintf(a.gpus[1].rm_bar1_why, sizeof a.gpus[1].rm_bar1_why, "not among the RM's GPUs");
    a.n_pairs = 1;
    a.pairs[0] =
        (gdu_live_pair){.a = 0, .b = 1, .can_access = 1, .native_atomics = 1, .rm_known = true};
    a.pairs[0].rm.caps = GDU_P2P_CAPS_NVLINK | GDU_P2P_CAPS_READS;
    a.pairs[0].rm.status[GDU_P2P_CAPS_INDEX_PCI] = GDU_P2P_CAPS_STATUS_NOT_SUPPORTED;
    a.pairs[0].rm.optimal_read_ces = 0x30;
    a.pairs[0].performance_rank = 2;
    a.pairs[0].access_supported = 1;
    a.pairs[0].cuda_array_access = 0;
    a.cufile_found = true;
    snprintf(a.cufile_version, sizeof a.cufile_version, "1.15.1");
    a.n_paths = 1;
    snprintf(a.paths[0].path, sizeof a.paths[0].path, "/root");
    a.paths[0].o_direct = 1;
    a.paths[0].fs_magic = 0xef53;
    json_t *j = gdu_live_to_json(&a);
    assert_non_null(j);
    char why[256];
    assert_int_equal(gdu_live_from_json(j, &b, why, sizeof why), 0);
    json_decref(j);
    assert_int_equal(b.origin, GDU_LIVE_CAPTURED);
    assert_int_equal(b.euid, 1000);
    assert_int_equal(b.n_gpus, 2);
    assert_string_equal(b.gpus[1].bdf, "0000:19:00.0");
    assert_int_equal(b.gpus[1].total_mem, 150754820096ull);
    assert_int_equal(b.gpus[0].cc_major, 9);
    assert_true(b.gpus[0].rm_known && b.gpus[0].rm_bar1_known);
    assert_int_equal(b.gpus[0].rm_gpu_id, 0x1800);
    assert_int_equal(b.gpus[0].rm_bar1_total, 256ull << 30);
    assert_int_equal(b.gpus[0].rm_bar1_available, (256ull << 30) - (40ull << 20));
    assert_false(b.gpus[1].rm_known || b.gpus[1].rm_bar1_known);
    assert_string_equal(b.gpus[1].rm_bar1_why, "not among the RM's GPUs");
    const gdu_live_pair *p = gdu_live_pair_find(&b, 0, 1);
    assert_non_null(p);
    assert_true(p->rm_known);
    assert_int_equal(p->rm.caps, GDU_P2P_CAPS_NVLINK | GDU_P2P_CAPS_READS);
    assert_int_equal(p->rm.status[GDU_P2P_CAPS_INDEX_PCI], GDU_P2P_CAPS_STATUS_NOT_SUPPORTED);
    assert_int_equal(p->rm.optimal_read_ces, 0x30);
    assert_int_equal(p->performance_rank, 2);
    assert_int_equal(p->access_supported, 1);
    assert_int_equal(p->cuda_array_access, 0);
    assert_null(gdu_live_pair_find(&b, 1, 0));
    assert_string_equal(b.cufile_version, "1.15.1");
    const gdu_live_path *lp = gdu_live_path_find(&b, "/root");
    assert_non_null(lp);
    assert_int_equal(lp->o_direct, 1);
    assert_int_equal(lp->fs_magic, 0xef53);
}

static void rejects_foreign_json(void **state)
{
    gdu_live l;
    char why[256];
    json_t *j = json_pack("{s:s}", "format", "something-else");
    assert_int_equal(gdu_live_from_json(j, &l, why, sizeof why), -EINVAL);
    json_decref(j);
    /* every field with its type, or the file is refused, naming the field */
    gdu_live a;
    memset(&a, 0, sizeof a);
    a.n_gpus = 1;
    a.n_pairs = 1;
    a.pairs[0].rm_known = true;
    static const struct {
        const char *pointer, *value, *why;
    } wrong[] = {
        {"euid", "\"0\"", "euid is a string, expected an integer"},
        {"cuda", "[]", "cuda is an array, expected an object"},
        {"cuda.gpus", "\"nope\"", "cuda.gpus is a string, expected an array"},
        {"cuda.gpus.0.total_mem", "1.5", "cuda.gpus[0].total_mem is a number with a fraction"},
        {"cuda.gpus.0.cc", "[9, \"0\"]", "cuda.gpus[0].cc[1] is a string, expected an integer"},
        {"cuda.pairs.0.rm.status", "{}", "cuda.pairs[0].rm.status is an object, expected an array"},
        {"cufile.found", "null", "cufile.found is null, expected a boolean"},
        {"cufile.found", NULL, "cufile.found is missing"},
        {"paths", "[3]", "paths[0] is an integer, expected an object"},
    };
    for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
        j = gdu_live_to_json(&a);
        json_t *parent = j;
        char key[64];
        snprintf(key, sizeof key, "%s", wrong[i].pointer);
        char *save = NULL, *part = strtok_r(key, ".", &save), *next;
        while ((next = strtok_r(NULL, ".", &save)) != NULL) {
            parent = json_is_array(parent) ? json_array_get(parent, (size_t)atoi(part))
                                           : json_object_get(parent, part);
            part = next;
        }
        if (wrong[i].value == NULL)
            json_object_del(parent, part);
        else
            json_object_set_new(parent, part, json_loads(wrong[i].value, JSON_DECODE_ANY, NULL));
        assert_int_equal(gdu_live_from_json(j, &l, why, sizeof why), -EINVAL);
        if (strstr(why, wrong[i].why) == NULL)
            fail_msg("%s: '%s', expected '%s'", wrong[i].pointer, why, wrong[i].why);
        json_decref(j);
    }
}

static void probes_a_path(void **state)
{
    char dir[] = "/tmp/gdu-live-XXXXXX";
    assert_non_null(mkdtemp(dir));
    gdu_live_path p;
    gdu_live_probe_path(dir, &p);
    assert_string_equal(p.path, dir);
    assert_true(p.fs_magic != 0);
    assert_true(p.o_direct >= -1 && p.o_direct <= 1);
    char missing[64];
    snprintf(missing, sizeof missing, "%s/none", dir);
    gdu_live_probe_path(missing, &p);
    assert_int_equal(p.o_direct, -1);
    assert_non_null(strstr(p.o_direct_error, "No such file"));
    rmdir(dir);
}

static void capture_copies_what_was_read(void **state)
{
    gdu_sysroot sr;
    gdu_sysroot_init(&sr, NULL);
    char *text, **names;
    assert_true(gdu_sysroot_read(&sr, "/proc/cmdline", &text) >= 0);
    free(text);
    assert_true(gdu_sysroot_read(&sr, "/proc/self/mountinfo", &text) > 0);
    free(text);
    long n = gdu_sysroot_list(&sr, "/sys/bus/pci/devices", &names);
    char dev_path[128] = "";
    if (n > 0) {
        snprintf(dev_path, sizeof dev_path, "/sys/bus/pci/devices/%s/vendor", names[0]);
        char line[32];
        assert_int_equal(gdu_sysroot_read_line(&sr, dev_path, line, sizeof line), 0);
        gdu_sysroot_free_names(names, n);
    }
    gdu_sysroot_exists(&sr, "/proc/driver/nvidia-fs/no-such-file");
    /* a FIFO doctor was given: not opened, neither to try O_DIRECT nor to copy it */
    char fifo_dir[] = "/tmp/gdu-fifo-XXXXXX", fifo[64];
    assert_non_null(mkdtemp(fifo_dir));
    snprintf(fifo, sizeof fifo, "%s/fifo", fifo_dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    alarm(20);
    gdu_live_path fifo_answer;
    gdu_live_probe_path(fifo, &fifo_answer);
    assert_int_equal(fifo_answer.o_direct, -1);
    assert_non_null(strstr(fifo_answer.o_direct_error, "not a regular file"));
    gdu_sysroot_record(&sr, fifo);
    gdu_pci live_pci;
    char pci_why[256];
    assert_int_equal(gdu_pci_scan(&sr, &live_pci, pci_why, sizeof pci_why), 0);

    char dir[] = "/tmp/gdu-capture-XXXXXX";
    assert_non_null(mkdtemp(dir));
    gdu_live live;
    memset(&live, 0, sizeof live);
    live.origin = GDU_LIVE_COLLECTED;
    gdu_capture_stats st;
    char why[256], path[PATH_MAX];
    gdu_snapshot *taken = as_snapshot(&sr, &live);
    assert_int_equal(gdu_capture_write(taken, dir, &st, why, sizeof why), 0);
    free(taken);
    assert_true(st.files >= 2);
    assert_true(st.missing >= 1);

    /* The capture replays: same text through a sysroot on it. */
    gdu_sysroot replay;
    gdu_sysroot_init(&replay, dir);
    assert_true(gdu_sysroot_read(&replay, "/proc/self/mountinfo", &text) > 0);
    free(text);
    if (dev_path[0]) {
        struct stat sb;
        snprintf(path, sizeof path, "%s%.*s", dir, (int)(strrchr(dev_path, '/') - dev_path),
                 dev_path);
        assert_int_equal(lstat(path, &sb), 0);
        assert_true(S_ISLNK(sb.st_mode)); /* the device link itself, as sysfs has it */
        char line[32];
        assert_int_equal(gdu_sysroot_read_line(&replay, dev_path, line, sizeof line), 0);
        assert_int_equal(strncmp(line, "0x", 2), 0);
    }
    /* libpci finds the same devices in the capture */
    gdu_pci replay_pci;
    assert_int_equal(gdu_pci_scan(&replay, &replay_pci, pci_why, sizeof pci_why), 0);
    assert_int_equal(replay_pci.n, live_pci.n);
    for (size_t i = 0; i < live_pci.n; i++) {
        assert_string_equal(replay_pci.devs[i].bdf, live_pci.devs[i].bdf);
        assert_string_equal(replay_pci.devs[i].path, live_pci.devs[i].path);
        assert_int_equal(replay_pci.devs[i].class_code, live_pci.devs[i].class_code);
        assert_int_equal(replay_pci.devs[i].bar_size[0], live_pci.devs[i].bar_size[0]);
        assert_int_equal(replay_pci.devs[i].config_len, live_pci.devs[i].config_len);
    }
    gdu_pci_free(&replay_pci);
    gdu_pci_free(&live_pci);
    alarm(0);
    snprintf(path, sizeof path, "%s%s", dir, fifo);
    assert_int_not_equal(access(path, F_OK), 0); /* the FIFO was not copied */
    unlink(fifo);
    rmdir(fifo_dir);
    gdu_live back;
    assert_int_equal(gdu_live_load(&replay, &back, why, sizeof why), 0);
    assert_int_equal(back.origin, GDU_LIVE_CAPTURED);
    gdu_sysroot_free(&replay);
    gdu_sysroot_free(&sr);
    snprintf(path, sizeof path, "rm -rf '%s'", dir);
    assert_int_equal(system(path), 0);
}

/* A capture that cannot be written in full fails (disk full here: a file size
 * limit); one into a folder that holds anything is refused beforehand. */
static void capture_write_errors_fail(void **state)
{
    char dir[] = "/tmp/gdu-capture-full-XXXXXX", why[512], path[PATH_MAX + 16];
    assert_non_null(mkdtemp(dir));
    assert_int_equal(gdu_capture_prepare(dir, why, sizeof why), 0); /* empty: fine */
    snprintf(path, sizeof path, "%s/old", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(gdu_capture_prepare(dir, why, sizeof why), -EEXIST);
    assert_non_null(strstr(why, "is not empty"));
    unlink(path);
    assert_int_equal(gdu_capture_prepare("/proc/gdu-no-such/capture", why, sizeof why), -ENOENT);
    assert_non_null(strstr(why, "cannot create /proc/gdu-no-such/capture"));

    gdu_sysroot sr;
    gdu_sysroot_init(&sr, NULL);
    char *text;
    assert_true(gdu_sysroot_read(&sr, "/proc/self/mountinfo", &text) > 64);
    free(text);
    gdu_live live;
    memset(&live, 0, sizeof live);
    struct rlimit old, small = {.rlim_cur = 64};
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    small.rlim_max = old.rlim_max;
    signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
    gdu_capture_stats st;
    gdu_snapshot *taken = as_snapshot(&sr, &live);
    int rc = gdu_capture_write(taken, dir, &st, why, sizeof why);
    free(taken);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, SIG_DFL);
    assert_int_equal(rc, -EIO);
    assert_true(st.unwritten >= 1);
    assert_non_null(strstr(why, "could not be written"));
    gdu_sysroot_free(&sr);
    snprintf(path, sizeof path, "rm -rf '%s'", dir);
    assert_int_equal(system(path), 0);
}

static void live_load_without_file_is_absent(void **state)
{
    gdu_live l;
    char why[256], dir[] = "/tmp/gdu-live-load-XXXXXX", path[PATH_MAX];
    gdu_sysroot sr;
    assert_int_equal(gdu_sysroot_init(&sr, "/nonexistent-dir"), 0);
    assert_int_equal(gdu_live_load(&sr, &l, why, sizeof why), 0);
    assert_int_equal(l.origin, GDU_LIVE_ABSENT);
    gdu_sysroot_free(&sr);
    /* a FIFO (which would block a plain open) and garbage: refused, with the reason */
    assert_non_null(mkdtemp(dir));
    assert_int_equal(gdu_sysroot_init(&sr, dir), 0);
    snprintf(path, sizeof path, "%s/" GDU_LIVE_FILE, dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    alarm(20);
    assert_int_equal(gdu_live_load(&sr, &l, why, sizeof why), -EINVAL);
    alarm(0);
    assert_non_null(strstr(why, "not a regular file"));
    assert_int_equal(l.origin, GDU_LIVE_ABSENT);
    unlink(path);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"format\": \"gdunlock-live/1\", \"euid\": ", f);
    fclose(f);
    assert_int_equal(gdu_live_load(&sr, &l, why, sizeof why), -EINVAL);
    assert_non_null(strstr(why, GDU_LIVE_FILE ": line 1"));
    assert_int_equal(l.origin, GDU_LIVE_ABSENT);
    unlink(path);
    rmdir(dir);
    gdu_sysroot_free(&sr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(json_round_trip),
        cmocka_unit_test(rejects_foreign_json),
        cmocka_unit_test(probes_a_path),
        cmocka_unit_test(capture_copies_what_was_read),
        cmocka_unit_test(capture_write_errors_fail),
        cmocka_unit_test(live_load_without_file_is_absent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
