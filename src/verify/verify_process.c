/* Running verify with the shim active. The I/O must happen in a process
 * that had libgdunlock.so preloaded from its start, and the shim writes its
 * report only when that process exits; so the caller runs verify again as a
 * child with LD_PRELOAD, GDUNLOCK_REPORT and GDU_VERIFY_RESULT_ENV set; the
 * child writes its JSON document (gdu_verify_document) to that file, and the
 * parent adds the shim's reasons and report to it. */
#include "launch/launch.h"
#include "util/units.h"
#include "verify/verify.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

json_t *gdu_verify_document(const gdu_verify_options *opts, const gdu_verify_shim *shim,
                            bool shim_reasons)
{
    static gdu_verify_evidence ev; /* large: keep it off the stack */
    gdu_verify_result r;
    char why[512] = "";
    int rc = gdu_verify_run(opts, &ev, why, sizeof why);
    if (rc != 0)
        return gdu_verify_error_json(why, rc);
    ev.shim = *shim;
    gdu_verify_decide(&ev, &r);
    if (shim_reasons)
        gdu_verify_shim_reasons(shim, &r);
    return gdu_verify_to_json(&ev, &r);
}

/* Adds the shim's reasons and report to a document the child produced. */
static void add_shim(json_t *doc, const gdu_verify_shim *shim, const char *report_path)
{
    if (json_object_get(doc, "error"))
        return;
    gdu_verify_result r;
    memset(&r, 0, sizeof r);
    const char *verdict = json_string_value(json_object_get(doc, "verdict"));
    r.verdict = !verdict                         ? GDU_VERIFY_FAILED
                : strcmp(verdict, "DIRECT") == 0 ? GDU_VERIFY_DIRECT
                : strcmp(verdict, "COMPAT") == 0 ? GDU_VERIFY_COMPAT
                                                 : GDU_VERIFY_FAILED;
    gdu_verify_shim_reasons(shim, &r);
    json_t *more = gdu_verify_reasons_json(&r);
    json_array_extend(json_object_get(doc, "reasons"), more);
    json_decref(more);
    json_t *s = gdu_verify_shim_json(shim);
    char why[256];
    json_t *report = report_path ? gdu_launch_load_report(report_path, why, sizeof why) : NULL;
    if (report)
        json_object_set_new(s, "report", report);
    json_object_set_new(doc, "shim", s);
}

/* Whether verify may remove PATH if the child dies: only what it was
 * entitled to overwrite (absent, or a regular file that is empty or forced). */
static bool may_remove(const gdu_verify_options *o)
{
    struct stat st;
    if (o->keep)
        return false;
    if (stat(o->path, &st) != 0)
        return errno == ENOENT;
    return S_ISREG(st.st_mode) && (st.st_size == 0 || o->force);
}

json_t *gdu_verify_run_child(int argc, char **argv, const char *exe, const char *shim_path,
                             const gdu_verify_options *opts, gdu_verify_shim *shim)
{
    bool removable = may_remove(opts);
    char dir[PATH_MAX], result[PATH_MAX + 32], report[PATH_MAX + 32], preload[PATH_MAX + 32];
    int made = gdu_launch_mkdtemp("verify", dir, sizeof dir);
    if (made != 0)
        return gdu_verify_error_json("cannot create a temporary directory for the shim report",
                                     made);
    /* The shim's path as LD_PRELOAD can carry it (a link in dir where the
     * path has a space or ':'); where it cannot, verify runs without it, as
     * when it is not found, and says why. */
    char cannot[GDU_VERIFY_TEXT];
    made = gdu_launch_preload_path(shim_path, dir, preload, sizeof preload, cannot, sizeof cannot);
    if (made != 0) {
        rmdir(dir);
        shim->active = false;
        if (made == -EINVAL)
            snprintf(shim->why_inactive, sizeof shim->why_inactive,
                     "its path has a space or ':', where LD_PRELOAD splits paths, and so has "
                     "TMPDIR, where a link to it would go: set TMPDIR to a folder without them");
        else
            snprintf(shim->why_inactive, sizeof shim->why_inactive,
                     "%.180s: set TMPDIR to a writable folder", cannot);
        return gdu_verify_document(opts, shim, true);
    }
    snprintf(result, sizeof result, "%s/result.json", dir);
    snprintf(report, sizeof report, "%s/shim-report.json", dir);
    /* libcufile's log for the child, unless the user named one: here, so that
     * it goes with this directory even if the child is killed. */
    char cufile_log[PATH_MAX + 32] = "";
    const char *user_log = getenv("CUFILE_LOGFILE_PATH");
    if (!user_log || !*user_log)
        snprintf(cufile_log, sizeof cufile_log, "%s/cufile.log", dir);

    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        gdu_launch_preload(preload, report);
        setenv(GDU_VERIFY_RESULT_ENV, result, 1);
        if (cufile_log[0])
            setenv("CUFILE_LOGFILE_PATH", cufile_log, 1);
        char **args = calloc((size_t)argc + 2, sizeof *args);
        if (!args)
            _exit(127);
        args[0] = "gdunlock";
        for (int i = 0; i < argc; i++)
            args[i + 1] = argv[i];
        execv(exe, args);
        _exit(127);
    }
    json_t *doc = NULL;
    int status = 0;
    if (pid < 0) {
        doc = gdu_verify_error_json("cannot start the verify child process", -errno);
    } else {
        /* Ctrl-C reaches the child (same process group); this process stays
         * to report it and remove what the child could not. */
        void (*old_int)(int) = signal(SIGINT, SIG_IGN);
        void (*old_term)(int) = signal(SIGTERM, SIG_IGN);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
        signal(SIGINT, old_int);
        signal(SIGTERM, old_term);
        if (WIFSIGNALED(status) && removable)
            unlink(opts->path);
        char unread[128];
        doc = gdu_launch_load_report(result, unread, sizeof unread); /* never blocks */
        if (!doc) {
            char why[256];
            if (WIFSIGNALED(status))
                snprintf(
                    why, sizeof why,
                    "the verify process (with the shim preloaded) was killed by signal %d (%s)",
                    WTERMSIG(status), strsignal(WTERMSIG(status)));
            else
                snprintf(why, sizeof why,
                         "the verify process (with the shim preloaded) exited %d without a result",
                         WIFEXITED(status) ? WEXITSTATUS(status) : -1);
            doc = gdu_verify_error_json(why, -EIO);
            json_object_set_new(doc, "crashed", json_true());
        }
    }
    /* The child knows whether the shim loaded in it (ld.so drops a preload
     * it cannot load with a warning only). */
    const json_t *child_shim = json_object_get(doc, "shim");
    if (child_shim != NULL && json_is_false(json_object_get(child_shim, "active"))) {
        shim->active = false;
        snprintf(shim->why_inactive, sizeof shim->why_inactive,
                 "%.180s did not load in the verify process", shim_path);
    }
    const char *pci = json_string_value(json_object_get(json_object_get(doc, "gpu"), "pci"));
    gdu_verify_shim_read_report(
        report, pci ? pci : "",
        (int)json_integer_value(json_object_get(json_object_get(doc, "gpu"), "index")), shim);
    add_shim(doc, shim, shim->have_report ? report : NULL);
    unlink(result);
    unlink(report);
    if (cufile_log[0])
        unlink(cufile_log);
    if (strcmp(preload, shim_path) != 0)
        unlink(preload);
    rmdir(dir);
    return doc;
}

static void shim_unknown(gdu_verify_shim *shim)
{
    memset(shim, 0, sizeof *shim);
    shim->registered = shim->unregistered = -1;
    shim->cufile_registered = shim->cufile_found = -1;
}

bool gdu_verify_as_child(const gdu_verify_options *opts, bool *written)
{
    const char *result_path = getenv(GDU_VERIFY_RESULT_ENV);
    if (result_path == NULL)
        return false;
    gdu_verify_shim shim;
    shim_unknown(&shim);
    shim.active = gdu_launch_shim_preloaded();
    json_t *doc = gdu_verify_document(opts, &shim, false);
    *written = doc && json_dump_file(doc, result_path, JSON_COMPACT) == 0;
    json_decref(doc);
    return true;
}

json_t *gdu_verify_with_shim(int argc, char **argv, const gdu_verify_options *opts, bool no_shim)
{
    gdu_verify_shim shim;
    shim_unknown(&shim);
    char shim_path[PATH_MAX * 2 + 64], exe[PATH_MAX];
    int enabled;
    gdu_env_bool("GDUNLOCK", 1, &enabled); /* as the shim reads it: any other value is on */
    if (no_shim) {
        snprintf(shim.why_inactive, sizeof shim.why_inactive, "disabled with --no-shim");
    } else if (!enabled) {
        snprintf(shim.why_inactive, sizeof shim.why_inactive, "disabled by GDUNLOCK=%.16s",
                 getenv("GDUNLOCK"));
    } else if (gdu_launch_shim_preloaded()) {
        shim.active = true;
        snprintf(shim.report_error, sizeof shim.report_error,
                 "the shim was preloaded by the caller; its report is written when this process "
                 "exits%s%s",
                 getenv("GDUNLOCK_REPORT") ? ", to " : "",
                 getenv("GDUNLOCK_REPORT") ? getenv("GDUNLOCK_REPORT") : "");
    } else if (gdu_launch_find_shim(shim_path, sizeof shim_path, exe, sizeof exe)) {
        shim.active = true;
        return gdu_verify_run_child(argc, argv, exe, shim_path, opts, &shim);
    } else {
        snprintf(shim.why_inactive, sizeof shim.why_inactive,
                 "libgdunlock.so not found (looked for %.180s); build the shim target", shim_path);
    }
    return gdu_verify_document(opts, &shim, true);
}
