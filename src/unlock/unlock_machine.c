/* The runner's view of the machine it acts on: its plan (a snapshot of the
 * machine or a capture), where it writes, and the build of the installed
 * driver's own version. */
#include "unlock/unlock_exec.h"
#include "unlock/unlock_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int gdu_unlock_check_machine(const char *sysroot, gdu_unlock_check *c, gdu_unlock_error *err)
{
    gdu_snapshot *s;
    char why[512];
    int rc = gdu_snapshot_of(sysroot, &s, why, sizeof why);
    if (rc == GDU_SNAPSHOT_BAD_ROOT)
        return gdu_unlock_fail(err, GDU_EXIT_NOINPUT, "no_input", NULL, "--sysroot %s", why);
    if (rc != 0)
        return gdu_unlock_fail(err, GDU_EXIT_SOFTWARE, "internal", NULL, "out of memory");
    gdu_unlock_check_run(s, c);
    gdu_snapshot_release(s);
    return 0;
}

void gdu_unlock_target_of(const char *sysroot, gdu_unlock_target *t)
{
    memset(t, 0, sizeof *t);
    if (sysroot && strcmp(sysroot, "/") != 0) {
        snprintf(t->root, sizeof t->root, "%s", sysroot);
        size_t n = strlen(t->root);
        while (n > 1 && t->root[n - 1] == '/')
            t->root[--n] = '\0';
    }
    /* A tree standing for the machine is the caller's to write; the
     * machine itself needs root. */
    t->privileged = t->root[0] != '\0' || geteuid() == 0;
}

int gdu_unlock_build_here(gdu_unlock_build_args *a, gdu_unlock_check *c, gdu_unlock_build_result *r,
                          gdu_unlock_error *err)
{
    char program[4096];
    if (gdu_unlock_build_program(program, sizeof program, err) != 0 ||
        gdu_unlock_check_machine(NULL, c, err) != 0)
        return -1;
    if (c->driver_loaded && c->open_module == GDU_TRI_NO)
        return gdu_unlock_fail(err, GDU_EXIT_UNAVAILABLE, "proprietary_module",
                               c->blockers.n ? c->blockers.note[0].fix : NULL,
                               "the loaded module is NVIDIA's proprietary one (%s): its core is "
                               "closed and cannot be edited",
                               c->version);
    if (!c->driver_loaded && a->source == NULL)
        return gdu_unlock_fail(err, GDU_EXIT_UNAVAILABLE, "no_driver",
                               "load the NVIDIA open module, or name the sources with --source",
                               "no NVIDIA module is loaded, so the version to build is unknown");
    a->program = program;
    a->version = c->driver_loaded ? c->version : NULL;
    int rc = gdu_unlock_build(a, r, err);
    a->program = NULL; /* this call's */
    return rc;
}
