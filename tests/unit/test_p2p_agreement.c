/* doctor and gdunlock p2p give the same P2P verdicts: on every fixture
 * sysroot of tests/fixtures/doctor both commands run (the binaries, as a
 * user runs them) and each pair doctor judges must carry the same verdict
 * object in p2p's document (src/dst = the pair's CUDA ordinals), and each
 * GPU the same name and BAR1. Then again on a copy of each multi-GPU
 * fixture whose captured RM answers are removed, so that both infer the
 * link from CUDA alone. A second collector, or a serializer that drifts,
 * in either command fails it. */
#include <dirent.h>
#include <jansson.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#define FIXTURES GDUNLOCK_FIXTURES "/doctor"

/* gdunlock COMMAND --json --sysroot ROOT: its document and exit status. */
static json_t *run(const char *command, const char *root, int *status)
{
    char cmd[PATH_MAX * 2];
    snprintf(cmd, sizeof cmd, "'%s' %s --json --sysroot '%s' 2>/dev/null", GDUNLOCK_BIN, command,
             root);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    json_error_t err;
    json_t *doc = json_loadf(p, 0, &err);
    int st = pclose(p);
    assert_true(WIFEXITED(st));
    *status = WEXITSTATUS(st);
    if (doc == NULL)
        fail_msg("%s on %s: no JSON (%s)", command, root, err.text);
    return doc;
}

static json_t *p2p_pair(const json_t *p2p, json_int_t src, json_int_t dst)
{
    size_t i;
    json_t *pair;
    json_array_foreach(json_object_get(p2p, "pairs"), i, pair)
    {
        if (json_integer_value(json_object_get(pair, "src")) == src &&
            json_integer_value(json_object_get(pair, "dst")) == dst)
            return pair;
    }
    return NULL;
}

static json_t *p2p_gpu(const json_t *p2p, json_int_t ordinal)
{
    size_t i;
    json_t *gpu;
    json_array_foreach(json_object_get(p2p, "gpus"), i, gpu)
    {
        if (json_integer_value(json_object_get(gpu, "ordinal")) == ordinal)
            return gpu;
    }
    return NULL;
}

static void same(const char *what, const char *root, const json_t *doctor, const json_t *p2p)
{
    if (json_equal(doctor, p2p))
        return;
    char *a = json_dumps(doctor, JSON_SORT_KEYS), *b = json_dumps(p2p, JSON_SORT_KEYS);
    printf("%s on %s:\n  doctor %s\n  p2p    %s\n", what, root, a, b);
    free(a);
    free(b);
    fail_msg("doctor and gdunlock p2p disagree on %s (%s)", what, root);
}

/* Every pair of one machine both commands judge; returns how many. */
static int compare(const char *root)
{
    int doctor_rc, p2p_rc, compared = 0;
    json_t *doctor = run("doctor", root, &doctor_rc);
    json_t *p2p = run("p2p", root, &p2p_rc);
    const json_t *gpus = json_object_get(doctor, "gpus");
    size_t i;
    json_t *g;
    json_array_foreach(gpus, i, g)
    {
        json_int_t ordinal = json_integer_value(json_object_get(g, "cuda_ordinal"));
        const json_t *other = ordinal >= 0 ? p2p_gpu(p2p, ordinal) : NULL;
        if (other == NULL)
            continue;
        same("a GPU's name", root, json_object_get(g, "name"), json_object_get(other, "name"));
        json_int_t bar1 = json_integer_value(json_object_get(other, "bar1_bytes"));
        assert_int_equal(json_integer_value(json_object_get(g, "bar1_bytes")), bar1);
    }
    json_t *pair;
    json_array_foreach(json_object_get(doctor, "p2p"), i, pair)
    {
        json_int_t a = json_integer_value(json_object_get(pair, "gpu_a"));
        json_int_t b = json_integer_value(json_object_get(pair, "gpu_b"));
        const json_t *ga = json_array_get(gpus, (size_t)a), *gb = json_array_get(gpus, (size_t)b);
        json_int_t oa = json_integer_value(json_object_get(ga, "cuda_ordinal"));
        json_int_t ob = json_integer_value(json_object_get(gb, "cuda_ordinal"));
        if (oa < 0 || ob < 0) /* CUDA does not list it: p2p has nothing to say */
            continue;
        const json_t *other = p2p_pair(p2p, oa, ob);
        if (other == NULL)
            fail_msg("%s: gdunlock p2p (exit %d) has no pair %lld -> %lld", root, p2p_rc,
                     (long long)oa, (long long)ob);
        same("a pair's verdict", root, json_object_get(pair, "verdict"),
             json_object_get(other, "verdict"));
        compared++;
    }
    json_decref(doctor);
    json_decref(p2p);
    return compared;
}

/* A copy of the fixture at root whose live answers lack the RM's caps; the
 * caller removes dir. Returns false for a fixture without two GPUs' answers. */
static bool without_rm(const char *root, char *dir)
{
    char path[PATH_MAX + 32], cmd[PATH_MAX * 3];
    snprintf(path, sizeof path, "%s/gdunlock-live.json", root);
    json_t *live = json_load_file(path, 0, NULL);
    json_t *pairs = json_object_get(json_object_get(live, "cuda"), "pairs");
    if (json_array_size(pairs) == 0) {
        json_decref(live);
        return false;
    }
    size_t i;
    json_t *pair;
    json_array_foreach(pairs, i, pair) json_object_del(pair, "rm");
    assert_non_null(mkdtemp(dir));
    snprintf(cmd, sizeof cmd, "cp -a '%s/.' '%s/' && rm '%s/gdunlock-live.json'", root, dir, dir);
    assert_int_equal(system(cmd), 0);
    snprintf(path, sizeof path, "%s/gdunlock-live.json", dir);
    assert_int_equal(json_dump_file(live, path, JSON_INDENT(2)), 0);
    json_decref(live);
    return true;
}

static void every_fixture(void **state)
{
    DIR *d = opendir(FIXTURES);
    assert_non_null(d);
    int fixtures = 0, pairs = 0, without = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char root[PATH_MAX], cmd[PATH_MAX + 16];
        struct stat st;
        snprintf(root, sizeof root, "%s/%s", FIXTURES, e->d_name);
        if (e->d_name[0] == '.' || stat(root, &st) != 0 || !S_ISDIR(st.st_mode))
            continue;
        pairs += compare(root);
        fixtures++;
        char dir[] = "/tmp/gdu-agree-XXXXXX";
        if (!without_rm(root, dir))
            continue;
        without += compare(dir);
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        assert_int_equal(system(cmd), 0);
    }
    closedir(d);
    printf("%d pairs compared on %d fixtures, %d more without the RM's answers\n", pairs, fixtures,
           without);
    assert_true(fixtures >= 20);
    assert_true(pairs >= 5);
    assert_true(without >= 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_fixture),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
