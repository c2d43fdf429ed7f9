/* A capture is the snapshot written out: on every fixture sysroot of
 * tests/fixtures/doctor, the snapshot is taken, written with
 * gdu_capture_write, and taken again from what was written. Doctor's report
 * (with a target path), topo's matrix and the live answers must come out the
 * same, and the second taking may read only files the capture lists. A fact
 * the snapshot reads but its capture does not hold (a file read outside the
 * sysroot's record, a listing whose entries are not kept) fails here. */
#include "doctor/doctor.h"
#include "doctor/topo_matrix.h"
#include "facts/capture.h"

#include <dirent.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#define FIXTURES GDUNLOCK_FIXTURES "/doctor"
#define UNLOCK_FIXTURES GDUNLOCK_FIXTURES "/unlock"
#define TARGET "/data/model.safetensors"

/* Everything judged from a snapshot, as one JSON text. */
static char *judged(const gdu_snapshot *s)
{
    gdu_report r;
    gdu_doctor_diagnose(s, TARGET, &r);
    gdu_topo *t = malloc(sizeof *t);
    assert_non_null(t);
    gdu_topo_build(s, t);
    const gdu_module_env *e = &s->module_env;
    json_t *displays = json_array();
    for (size_t i = 0; i < e->n_displays; i++)
        json_array_append_new(displays,
                              json_pack("[s,s]", e->displays[i].bdf, e->displays[i].connector));
    json_t *env = json_pack("{s:i, s:i, s:i, s:s, s:i, s:s, s:s, s:s, s:o}", "efi", e->efi,
                            "secure_boot", e->secure_boot, "signing_key", e->signing_key, "headers",
                            e->headers, "has_headers", e->has_headers, "dkms", e->dkms, "cc", e->cc,
                            "make", e->make, "displays", displays);
    json_t *all =
        json_pack("{s:o, s:o, s:o, s:o}", "doctor", gdu_report_to_json(&r), "topo",
                  gdu_topo_to_json(t), "live", gdu_live_to_json(&s->live), "module_env", env);
    assert_non_null(all);
    char *text = json_dumps(all, JSON_SORT_KEYS | JSON_INDENT(0));
    json_decref(all);
    gdu_report_free(&r);
    free(t);
    return text;
}

static gdu_snapshot *take(const char *root)
{
    gdu_sysroot sr;
    assert_int_equal(gdu_sysroot_init(&sr, root), 0);
    gdu_snapshot *s = malloc(sizeof *s);
    assert_non_null(s);
    gdu_snapshot_take(&sr, NULL, 0, s);
    gdu_sysroot_free(&sr);
    return s;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Captures the fixture top/name, replays it, and leaves the capture in
 * kept (when not NULL) for the caller to look at and remove. */
static void round_trip_in(const char *top, const char *name, char *kept)
{
    char from[PATH_MAX], dir[] = "/tmp/gdu-capture-trip-XXXXXX", file[PATH_MAX];
    snprintf(from, sizeof from, "%s/%s", top, name);
    gdu_snapshot *a = take(from);
    char *before = judged(a);
    assert_non_null(mkdtemp(dir));
    gdu_capture_stats st;
    char why[512] = "";
    assert_int_equal(gdu_capture_write(a, dir, &st, why, sizeof why), 0);
    gdu_snapshot *b = take(dir);
    char *after = judged(b);
    if (strcmp(before, after) != 0) {
        /* Kept for a look: diff DIR.snapshot.json DIR.replay.json */
        const char *texts[] = {before, after}, *ends[] = {"snapshot", "replay"};
        for (int k = 0; k < 2; k++) {
            snprintf(file, sizeof file, "%s.%s.json", dir, ends[k]);
            FILE *out = fopen(file, "w");
            if (out != NULL) {
                fputs(texts[k], out);
                fclose(out);
            }
        }
        fail_msg("%s: its capture %s replays differently (diff %s.snapshot.json %s.replay.json)",
                 name, dir, dir, dir);
    }
    snprintf(file, sizeof file, "%s/%s", dir, GDU_CAPTURE_FILES);
    FILE *f = fopen(file, "r");
    assert_non_null(f);
    static char list[1 << 20];
    static char *lines[1 << 14];
    list[fread(list, 1, sizeof list - 1, f)] = '\0';
    fclose(f);
    size_t n = 0;
    for (char *save = NULL, *l = strtok_r(list, "\n", &save); l && n < sizeof lines / sizeof *lines;
         l = strtok_r(NULL, "\n", &save))
        lines[n++] = l;
    qsort(lines, n, sizeof *lines, by_name);
    for (size_t i = 0; i < b->n_files; i++)
        if (bsearch(&b->files[i], lines, n, sizeof *lines, by_name) == NULL)
            fail_msg("%s: the replay read %s, which the capture does not list", name, b->files[i]);
    free(before);
    free(after);
    gdu_snapshot_free(a);
    gdu_snapshot_free(b);
    free(a);
    free(b);
    if (kept != NULL) {
        strcpy(kept, dir);
        return;
    }
    snprintf(file, sizeof file, "rm -rf '%s'", dir);
    assert_int_equal(system(file), 0);
}

static void round_trip(const char *name) { round_trip_in(FIXTURES, name, NULL); }

/* What building a module needs is replayed too; a signing key or a
 * compiler, whose presence alone is asked, is captured empty. */
static void unlock_fixtures_replay_without_content(void **state)
{
    static const char *const names[] = {"rtx4090x2-secure-boot-key", "rtx4090x2-display",
                                        "rtx4090x2-no-toolchain"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        round_trip_in(UNLOCK_FIXTURES, names[i], NULL);
    char dir[PATH_MAX], file[PATH_MAX + 64];
    round_trip_in(UNLOCK_FIXTURES, "rtx4090x2-secure-boot-key", dir);
    static const char *const empty[] = {"/var/lib/dkms/mok.key", "/var/lib/dkms/mok.pub",
                                        "/usr/sbin/dkms", "/usr/bin/cc"};
    for (size_t i = 0; i < sizeof empty / sizeof empty[0]; i++) {
        struct stat sb;
        snprintf(file, sizeof file, "%s%s", dir, empty[i]);
        if (stat(file, &sb) != 0 || sb.st_size != 0)
            fail_msg("%s: not an empty stand-in in the capture", empty[i]);
    }
    snprintf(file, sizeof file, "rm -rf '%s'", dir);
    assert_int_equal(system(file), 0);
}

static void every_fixture_replays_from_its_capture(void **state)
{
    DIR *d = opendir(FIXTURES);
    assert_non_null(d);
    int fixtures = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char path[PATH_MAX];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", FIXTURES, e->d_name);
        if (e->d_name[0] == '.' || stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
            continue;
        round_trip(e->d_name);
        fixtures++;
    }
    closedir(d);
    assert_true(fixtures >= 20);
}

/* The file at dir/path holds exactly text. */
static void holds_exactly(const char *dir, const char *path, const char *text)
{
    char file[PATH_MAX + 64], got[1 << 16];
    snprintf(file, sizeof file, "%s%s", dir, path);
    FILE *f = fopen(file, "r");
    if (f == NULL)
        fail_msg("the capture has no %s", path);
    got[fread(got, 1, sizeof got - 1, f)] = '\0';
    fclose(f);
    if (strcmp(got, text) != 0)
        fail_msg("the capture's %s is not what the snapshot read:\n%s\nbut:\n%s", path, text, got);
}

/* nvidia-fs's stats and the driver's parameters are read once per
 * snapshot: the snapshot keeps their words, and its capture holds those,
 * not what the files say later (the stats' counters move all the time). */
static void the_capture_holds_what_the_snapshot_read(void **state)
{
    char machine[] = "/tmp/gdu-capture-once-XXXXXX", dir[PATH_MAX], cmd[PATH_MAX * 3];
    assert_non_null(mkdtemp(machine));
    snprintf(cmd, sizeof cmd, "cp -a '%s/l40s-nvfs/.' '%s'", FIXTURES, machine);
    assert_int_equal(system(cmd), 0);
    gdu_snapshot *s = take(machine);
    assert_true(s->driver.nvfs_stats_readable && s->nvfs_stats_parsed);
    assert_non_null(s->nvfs_text.text);
    assert_non_null(s->driver_params.text);
    assert_int_equal(s->driver.enable_resizable_bar, 0);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && echo 'Reads : 999999' >> proc/driver/nvidia-fs/stats && "
             "echo 'EnableResizableBar: 1' > proc/driver/nvidia/params",
             machine);
    assert_int_equal(system(cmd), 0);
    snprintf(dir, sizeof dir, "%s.capture", machine);
    gdu_capture_stats st;
    char why[512] = "";
    assert_int_equal(gdu_capture_write(s, dir, &st, why, sizeof why), 0);
    holds_exactly(dir, GDU_NVFS_STATS_PATH, s->nvfs_text.text);
    holds_exactly(dir, GDU_DRIVER_PARAMS_PATH, s->driver_params.text);
    gdu_snapshot_free(s);
    free(s);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", machine, dir);
    assert_int_equal(system(cmd), 0);
}

/* gdu_snapshot_of, the one way commands open a machine, judges a root as a
 * snapshot taken of it does, and names a root that cannot be used. */
static void a_snapshot_of_a_root_is_that_roots(void **state)
{
    (void)state;
    gdu_snapshot *of = NULL, *taken = take(FIXTURES "/h200x2-vm-virtio");
    char why[512] = "";
    assert_int_equal(gdu_snapshot_of(FIXTURES "/h200x2-vm-virtio", &of, why, sizeof why), 0);
    char *a = judged(of), *b = judged(taken);
    assert_string_equal(a, b);
    free(a);
    free(b);
    gdu_snapshot_release(of);
    gdu_snapshot_release(taken);
    assert_int_equal(gdu_snapshot_of(FIXTURES "/no such root", &of, why, sizeof why),
                     GDU_SNAPSHOT_BAD_ROOT);
    assert_null(of);
    assert_true(why[0] != '\0');
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_fixture_replays_from_its_capture),
        cmocka_unit_test(unlock_fixtures_replay_without_content),
        cmocka_unit_test(the_capture_holds_what_the_snapshot_read),
        cmocka_unit_test(a_snapshot_of_a_root_is_that_roots),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
