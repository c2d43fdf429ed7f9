/* --status: which nvidia module runs (gdunlock's or the stock one), what
 * gdunlock installed, and the driver's P2P lines from the kernel log. */
#include "unlock/unlock_run.h"

#include "p2p/p2p_collect.h"
#include "unlock/unlock_exec.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

/* A kernel log line of the NVIDIA driver about P2P, BAR1 or its resizing. */
static bool p2p_line(const char *line, size_t n)
{
    static const char *const words[] = {"P2P",       "p2p",  "BAR1",  "ReBAR",
                                        "Resizable", "peer", "resize"};
    char buf[512];
    snprintf(buf, sizeof buf, "%.*s", (int)(n < sizeof buf - 1 ? n : sizeof buf - 1), line);
    if (strstr(buf, "NVRM") == NULL && strcasestr(buf, "nvidia") == NULL)
        return false;
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strstr(buf, words[i]) != NULL)
            return true;
    return false;
}

static void keep_log_lines(const char *text, gdu_unlock_status *st)
{
    for (const char *p = text; *p;) {
        size_t n = strcspn(p, "\n");
        if (p2p_line(p, n)) {
            if (st->n_log == GDU_UNLOCK_MAX_LOG_LINES) { /* the newest lines matter most */
                memmove(st->log[0], st->log[1], sizeof st->log[0] * (GDU_UNLOCK_MAX_LOG_LINES - 1));
                st->n_log--;
            }
            snprintf(st->log[st->n_log++], sizeof st->log[0], "%.*s",
                     (int)(n < sizeof st->log[0] - 1 ? n : sizeof st->log[0] - 1), p);
        }
        p += n + (p[n] == '\n');
    }
}

/* The machine's kernel log through dmesg; a tree's from its var/log/dmesg. */
static void read_log(const gdu_unlock_target *t, gdu_sysroot *sr, gdu_unlock_status *st)
{
    if (t->root[0]) {
        char *text;
        if (gdu_sysroot_read(sr, "/var/log/dmesg", &text) >= 0) {
            keep_log_lines(text, st);
            free(text);
        } else
            snprintf(st->log_why, sizeof st->log_why, "the tree holds no /var/log/dmesg");
        return;
    }
    static char said[1 << 20];
    char *argv[] = {"dmesg", NULL};
    int rc = gdu_unlock_exec(argv, false, said, sizeof said);
    if (rc != 0) {
        char last[200];
        gdu_unlock_last_line(said, last, sizeof last);
        gdu_unlock_format(st->log_why, sizeof st->log_why,
                          "dmesg exit %d (%s): run --status as root to read the kernel log", rc,
                          last);
        return;
    }
    keep_log_lines(said, st);
}

static void read_state(gdu_sysroot *sr, gdu_unlock_status *st)
{
    char *text;
    if (gdu_sysroot_read(sr, GDU_UNLOCK_STATE_FILE, &text) < 0)
        return;
    json_t *doc = json_loads(text, 0, NULL);
    free(text);
    const char *s;
    if ((s = json_string_value(json_object_get(doc, "status"))) != NULL)
        snprintf(st->installed, sizeof st->installed, "%s", s);
    if ((s = json_string_value(json_object_get(doc, "plan"))) != NULL)
        snprintf(st->plan, sizeof st->plan, "%s", s);
    if ((s = json_string_value(json_object_get(doc, "version"))) != NULL)
        snprintf(st->installed_version, sizeof st->installed_version, "%s", s);
    if ((s = json_string_value(json_object_get(doc, "srcversion"))) != NULL)
        snprintf(st->installed_srcversion, sizeof st->installed_srcversion, "%s", s);
    json_decref(doc);
}

/* Whether the loaded module is gdunlock's, and why it is thought so. */
static void judge(gdu_sysroot *sr, gdu_unlock_status *st)
{
    st->patched = GDU_TRI_UNKNOWN;
    if (!st->loaded) {
        snprintf(st->patched_why, sizeof st->patched_why, "the nvidia module is not loaded");
        return;
    }
    if (strcmp(st->plan, "registry_keys") == 0) {
        char *params;
        bool set = gdu_sysroot_read(sr, "/proc/driver/nvidia/params", &params) >= 0 &&
                   strstr(params, "RMPcieP2PType=1") != NULL;
        if (params != NULL)
            free(params);
        st->patched = set ? GDU_TRI_YES : GDU_TRI_NO;
        snprintf(st->patched_why, sizeof st->patched_why,
                 set ? "the stock module runs with gdunlock's registry keys"
                     : "the stock module runs without gdunlock's registry keys yet: reload it "
                       "or reboot");
        return;
    }
    if (st->installed[0] == '\0') {
        st->patched = GDU_TRI_NO;
        snprintf(st->patched_why, sizeof st->patched_why,
                 "gdunlock's module is not installed: the stock module runs");
    } else if (st->installed_srcversion[0] == '\0' || st->srcversion[0] == '\0') {
        snprintf(st->patched_why, sizeof st->patched_why,
                 "gdunlock's module is installed (%s) but the srcversions to compare are missing",
                 st->installed);
    } else if (strcmp(st->installed_srcversion, st->srcversion) == 0) {
        st->patched = GDU_TRI_YES;
        snprintf(st->patched_why, sizeof st->patched_why,
                 "the loaded module's srcversion %s is that of gdunlock's build", st->srcversion);
    } else {
        st->patched = GDU_TRI_NO;
        gdu_unlock_format(
            st->patched_why, sizeof st->patched_why,
            "the loaded module's srcversion %s is not that of gdunlock's build (%s): the "
            "stock module still runs; reboot or reload the nvidia modules",
            st->srcversion, st->installed_srcversion);
    }
}

void gdu_unlock_status_read(const gdu_unlock_target *t, gdu_unlock_status *st)
{
    memset(st, 0, sizeof *st);
    gdu_sysroot sr;
    if (gdu_sysroot_init(&sr, t->root[0] ? t->root : NULL) != 0)
        return;
    st->loaded = gdu_sysroot_exists(&sr, "/sys/module/nvidia");
    gdu_sysroot_read_line(&sr, "/sys/module/nvidia/version", st->version, sizeof st->version);
    gdu_sysroot_read_line(&sr, "/sys/module/nvidia/srcversion", st->srcversion,
                          sizeof st->srcversion);
    read_state(&sr, st);
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "/var/lib/dkms/" GDU_UNLOCK_DKMS_NAME "/%s", st->installed_version);
    st->dkms_registered = st->installed_version[0] && gdu_sysroot_exists(&sr, dir);
    char *conf;
    if (gdu_sysroot_read(&sr, GDU_UNLOCK_MODPROBE_CONF, &conf) >= 0) {
        const char *line = strstr(conf, "options nvidia");
        if (line != NULL)
            snprintf(st->options, sizeof st->options, "%.*s", (int)strcspn(line, "\n"), line);
        free(conf);
    }
    judge(&sr, st);
    read_log(t, &sr, st);
    gdu_sysroot_free(&sr);
}

/* gdunlock p2p's capability report of a snapshot, verdicts decided. */
static int matrix_of(const gdu_snapshot *s, gdu_p2p_report *r, char *why, size_t len)
{
    int ordinals[GDU_P2P_MAX_GPUS], n = (int)s->live.n_gpus;
    n = n < GDU_P2P_MAX_GPUS ? n : GDU_P2P_MAX_GPUS;
    for (int i = 0; i < n; i++)
        ordinals[i] = s->live.gpus[i].ordinal;
    memset(r, 0, sizeof *r);
    time_t now = time(NULL);
    struct tm tm;
    strftime(r->date, sizeof r->date, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
    if (!s->live.cuda_ok) {
        gdu_unlock_format(why, len, "CUDA is not usable: %s",
                          s->live.cuda_why[0] ? s->live.cuda_why : "no live answers");
        return -1;
    }
    if (gdu_p2p_collect_facts(r, s, ordinals, n, why, len) != 0)
        return -1;
    gdu_p2p_decide(r);
    return 0;
}

int gdu_unlock_matrix(const gdu_unlock_target *t, gdu_p2p_report *r, char *why, size_t len)
{
    gdu_sysroot sr;
    gdu_snapshot *s = malloc(sizeof *s);
    if (s == NULL || gdu_sysroot_init(&sr, t->root[0] ? t->root : NULL) != 0) {
        free(s);
        snprintf(why, len, "out of memory");
        return -1;
    }
    gdu_snapshot_take(&sr, NULL, 0, s);
    int rc = matrix_of(s, r, why, len);
    gdu_snapshot_free(s);
    free(s);
    gdu_sysroot_free(&sr);
    return rc;
}

json_t *gdu_unlock_status_report_json_of(const gdu_snapshot *s, const char *root)
{
    gdu_unlock_target t = {0};
    snprintf(t.root, sizeof t.root, "%s", root && strcmp(root, "/") != 0 ? root : "");
    gdu_unlock_status *st = malloc(sizeof *st);
    gdu_p2p_report *r = malloc(sizeof *r);
    gdu_snapshot *own = s == NULL ? malloc(sizeof *own) : NULL;
    gdu_sysroot sr;
    json_t *doc = NULL;
    char why[256] = "";
    if (st == NULL || r == NULL || (s == NULL && own == NULL) ||
        gdu_sysroot_init(&sr, t.root[0] ? t.root : NULL) != 0)
        goto out;
    if (s == NULL) {
        gdu_snapshot_take(&sr, NULL, 0, own);
        s = own;
    }
    gdu_unlock_status_read(&t, st);
    json_t *matrix = matrix_of(s, r, why, sizeof why) == 0 ? gdu_p2p_report_json(r) : NULL;
    doc = json_pack("{s:o, s:o?, s:s?}", "status", gdu_unlock_status_json(st), "matrix", matrix,
                    "matrix_error", matrix ? NULL : why);
    if (own != NULL)
        gdu_snapshot_free(own);
    gdu_sysroot_free(&sr);
out:
    free(own);
    free(st);
    free(r);
    return doc;
}

json_t *gdu_unlock_status_report_json(const char *root)
{
    return gdu_unlock_status_report_json_of(NULL, root);
}
