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
#define TARGET "/data/model.safetensors"

/* Everything judged from a snapshot, as one JSON text. */
static char *judged(const gdu_snapshot *s)
{
    gdu_report r;
    gdu_doctor_diagnose(s, TARGET, &r);
    gdu_topo *t = malloc(sizeof *t);
    assert_non_null(t);
    gdu_topo_build(s, t);
    json_t *all = json_pack("{s:o, s:o, s:o}", "doctor", gdu_report_to_json(&r), "topo",
                            gdu_topo_to_json(t), "live", gdu_live_to_json(&s->live));
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

static void round_trip(const char *name)
{
    char from[PATH_MAX], dir[] = "/tmp/gdu-capture-trip-XXXXXX", file[PATH_MAX];
    snprintf(from, sizeof from, "%s/%s", FIXTURES, name);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_fixture_replays_from_its_capture),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
