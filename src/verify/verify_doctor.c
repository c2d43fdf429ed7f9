/* Doctor's explanation of a result that is not DIRECT: gdunlock doctor's
 * GDS reasons for the file system verify wrote to (nvidia-fs not loaded, file
 * system or block device not supported, the cuFile 5027 udev case, ...), the
 * direct path cuFile would take with each P2PDMA precondition, judged from
 * a live snapshot taken on PATH's directory and added to the verify
 * document. */
#include "doctor/doctor.h"
#include "util/json_text.h"
#include "verify/verify.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The directory PATH is in, resolved as doctor resolves its own argument. */
static void parent_dir(const char *path, char *out, size_t len)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    char resolved[PATH_MAX];
    snprintf(out, len, "%s", realpath(dir, resolved) ? resolved : dir);
}

void gdu_verify_add_doctor(json_t *doc, const char *path)
{
    const char *verdict = json_string_value(json_object_get(doc, "verdict"));
    if (!verdict || strcmp(verdict, "DIRECT") == 0)
        return;
    char dir[PATH_MAX];
    parent_dir(path, dir, sizeof dir);
    const char *target = dir;
    gdu_sysroot sr;
    gdu_snapshot *sys = malloc(sizeof *sys);
    if (!sys || gdu_sysroot_init(&sr, NULL) != 0) {
        free(sys);
        return;
    }
    gdu_snapshot_take(&sr, &target, 1, sys);
    gdu_report report;
    gdu_doctor_diagnose(sys, target, &report);

    json_t *reasons = json_object_get(doc, "reasons");
    json_t *all = json_array();
    for (size_t i = 0; i < report.n_reasons; i++) {
        const gdu_reason *r = &report.reasons[i];
        const char *level = r->note ? "note" : gdu_gds_verdict_id(r->level);
        json_array_append_new(
            all, json_pack("{s:s, s:o}", "level", level, "text", gdu_json_text(r->text)));
        if (r->note || r->level < GDU_GDS_COMPAT)
            continue;
        char id[48], text[2 * GDU_VERIFY_TEXT];
        snprintf(id, sizeof id, "doctor:%s", level);
        snprintf(text, sizeof text, "doctor: %s", r->text);
        json_array_append_new(reasons,
                              json_pack("{s:s, s:o}", "id", id, "text", gdu_json_text(text)));
    }
    /* The direct path cuFile would take, with each P2PDMA precondition. */
    json_t *p2pdma = json_array();
    for (size_t i = 0; i < report.n_findings; i++) {
        const gdu_finding *f = &report.findings[i];
        if (strcmp(f->area, "p2pdma") == 0)
            json_array_append_new(p2pdma,
                                  json_pack("{s:s, s:s, s:o, s:o}", "id", f->id, "status",
                                            gdu_status_id(f->status), "title",
                                            gdu_json_text(f->title), "fix", gdu_json_text(f->fix)));
    }
    json_object_set_new(
        doc, "doctor",
        json_pack("{s:s, s:o, s:o, s:s, s:o, s:o}", "gds_verdict", gdu_gds_verdict_id(report.gds),
                  "target", gdu_json_text(report.gds_target[0] ? report.gds_target : dir),
                  "reasons", all, "direct_path", gdu_direct_path_id(report.direct_path),
                  "direct_path_why", gdu_json_text(report.direct_path_why), "p2pdma", p2pdma));
    gdu_report_free(&report);
    gdu_snapshot_free(sys);
    free(sys);
    gdu_sysroot_free(&sr);
}
