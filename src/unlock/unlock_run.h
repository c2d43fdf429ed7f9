/* What `gdunlock p2p unlock` does to a machine: the runner over the plan
 * (unlock_plan.h). It builds through the build program (libexec/gdunlock/
 * p2p-build, docs/p2p-unlock.md), installs through DKMS and modprobe.d,
 * reverts, and reads back the state. Every file it reads or writes lies
 * under a root ("" the machine itself), so tests run it on a fake tree with
 * fake dkms, modprobe and mokutil programs on PATH. Nothing is left
 * half-way: files are written under temporary names and renamed, each step
 * is recorded in a state file before it runs, and a failed step undoes the
 * steps before it; --revert undoes whatever the state file or the tree
 * shows, after an interrupted install too. */
#ifndef GDUNLOCK_UNLOCK_UNLOCK_RUN_H
#define GDUNLOCK_UNLOCK_UNLOCK_RUN_H

#include "unlockplan/unlock_plan.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* The DKMS module gdunlock installs: its own name, so that the stock
 * package (and its DKMS module, if any) stays installed beside it. */
#define GDU_UNLOCK_DKMS_NAME "gdunlock-nvidia-p2p"
#define GDU_UNLOCK_MODPROBE_CONF "/etc/modprobe.d/gdunlock-nvidia-p2p.conf"
#define GDU_UNLOCK_STATE_FILE "/var/lib/gdunlock/p2p-unlock.json"

/* Where the runner acts. */
typedef struct gdu_unlock_target {
    char root[4096]; /* "" the machine itself, else a tree standing for it */
    bool privileged; /* allowed to write there: root on the machine itself */
} gdu_unlock_target;

/* An error the CLI reports as it is: exit status, message, fix. */
typedef struct gdu_unlock_error {
    int exit_code; /* a sysexits value (util/exit_codes.h), 1 for a refused or failed step */
    char code[48]; /* stable name: "not_root", "build_not_ok", ... */
    char message[768];
    char fix[768];
} gdu_unlock_error;

/* The target of sysroot (NULL or "/": the machine itself, needing root;
 * else a tree standing for it, the caller's to write). */
void gdu_unlock_target_of(const char *sysroot, gdu_unlock_target *t);

/* The plan of the machine (sysroot NULL) or of a capture into c (large:
 * allocate it). Returns 0, or -1 with err when sysroot is no machine or
 * memory ran out. */
int gdu_unlock_check_machine(const char *sysroot, gdu_unlock_check *c, gdu_unlock_error *err);

/* --build: runs the build program. */
typedef struct gdu_unlock_build_args {
    const char *program;        /* the p2p-build path */
    const char *out;            /* DIR */
    const char *source;         /* NULL: the distribution's or NVIDIA's of version */
    const char *kernel_headers; /* NULL: the running kernel's */
    const char *version;        /* the installed driver's, NULL when none is loaded */
    bool no_kernel;
} gdu_unlock_build_args;

typedef struct gdu_unlock_build_result {
    int program_exit;  /* the build program's status */
    char status[16];   /* build.json's "status", "" when none was written */
    char version[32];  /* build.json's */
    char patch[4096];  /* DIR/gdunlock-p2p-VER.patch, "" none */
    bool kernel_built; /* build.json's kernel.built */
} gdu_unlock_build_result;

/* The program beside the binary: $ORIGIN/../libexec/gdunlock/p2p-build,
 * or GDUNLOCK_P2P_BUILD. Returns 0 or -ENOENT with where it looked in err. */
int gdu_unlock_build_program(char *out, size_t len, gdu_unlock_error *err);

/* Runs it (its progress goes to this process's stderr). Returns 0 when it
 * built, else -1 with err (the program's last error line as the message). */
int gdu_unlock_build(const gdu_unlock_build_args *a, gdu_unlock_build_result *r,
                     gdu_unlock_error *err);

/* --build of the installed driver's version (the module loaded now, or
 * a->source's): finds the build program, checks the machine into c (it
 * refuses NVIDIA's proprietary module, and no module without a->source),
 * and runs it; a's program and version are this call's to set. Returns 0,
 * or -1 with err. */
int gdu_unlock_build_here(gdu_unlock_build_args *a, gdu_unlock_check *c, gdu_unlock_build_result *r,
                          gdu_unlock_error *err);

/* --install: what was done, for the report. */
enum { GDU_UNLOCK_MAX_STEPS = 16 };
typedef struct gdu_unlock_install_report {
    gdu_unlock_plan plan;
    char version[32];
    char kernel[64];
    char steps[GDU_UNLOCK_MAX_STEPS][320];
    size_t n_steps;
    char next[768]; /* what the user does to load it */
} gdu_unlock_install_report;

/* Installs what check's plan needs: with the patched-module plan the build
 * in out (build.json "status": "ok", kernel built, the installed version)
 * through DKMS, and the module options; with the registry-keys plan the
 * options alone. Refuses (-1 with err) a plan that is not one of these,
 * missing prerequisites, Secure Boot without an enrolled key, a target not
 * privileged, or an install already there; a step that fails undoes the
 * ones before it. */
int gdu_unlock_install(const gdu_unlock_target *t, const gdu_unlock_check *check, const char *out,
                       gdu_unlock_install_report *r, gdu_unlock_error *err);

/* --revert: removes gdunlock's DKMS module, source tree, options and state,
 * and gives the stock DKMS module back where the install removed it. Works
 * from whatever is there (nothing installed is not an error). steps lists
 * what was undone. Returns 0, or -1 with err when a step failed (the ones
 * after it still run). */
int gdu_unlock_revert(const gdu_unlock_target *t, gdu_unlock_install_report *r,
                      gdu_unlock_error *err);

/* --status. */
enum { GDU_UNLOCK_MAX_LOG_LINES = 32 };
typedef struct gdu_unlock_status {
    bool loaded;         /* /sys/module/nvidia exists */
    char version[32];    /* /sys/module/nvidia/version */
    char srcversion[64]; /* /sys/module/nvidia/srcversion */
    char installed[32];  /* the state file's status: "installed", "installing", "" none */
    char plan[32];       /* the state file's plan id */
    char installed_version[32];
    char installed_srcversion[64]; /* of the module gdunlock built */
    bool dkms_registered;          /* DKMS's tree holds gdunlock's module */
    gdu_tri patched;               /* the loaded module is gdunlock's */
    char patched_why[256];
    char options[512]; /* gdunlock's modprobe.d line, "" none */
    char log[GDU_UNLOCK_MAX_LOG_LINES][256];
    size_t n_log;
    char log_why[256]; /* why the kernel log could not be read, "" read */
} gdu_unlock_status;

void gdu_unlock_status_read(const gdu_unlock_target *t, gdu_unlock_status *st);

/* `gdunlock p2p`'s capability report (no measurements) of the target's
 * snapshot, verdicts decided. Returns 0, or -1 with why (no CUDA answers). */
struct gdu_p2p_report;
int gdu_unlock_matrix(const gdu_unlock_target *t, struct gdu_p2p_report *r, char *why, size_t len);

/* JSON forms (docs/p2p-unlock.md). */
json_t *gdu_unlock_check_json(const gdu_unlock_check *c);
json_t *gdu_unlock_status_json(const gdu_unlock_status *st);
json_t *gdu_unlock_install_json(const gdu_unlock_install_report *r);
json_t *gdu_unlock_build_json(const gdu_unlock_build_args *a, const gdu_unlock_build_result *r);

/* For the report bundle: the machine's --status with `gdunlock p2p`'s
 * capability matrix (no measurements), as one JSON object
 * {"status": {...}, "matrix": {...} or null, "matrix_error": "..."}; root
 * as gdu_unlock_target's. NULL without memory. */
json_t *gdu_unlock_status_report_json(const char *root);
/* The same from a snapshot already taken of that root (the report bundle's:
 * CUDA is not asked twice); s NULL takes one. */
json_t *gdu_unlock_status_report_json_of(const gdu_snapshot *s, const char *root);

/* The text forms for people (unlock_text.c): --check's plan, --build's
 * result, --install's or --revert's steps (what: "installed",
 * "reverted"), and --status with the P2P matrix of the target. */
void gdu_unlock_print_check(FILE *out, const gdu_unlock_check *c);
void gdu_unlock_print_build(FILE *out, const gdu_unlock_build_args *a,
                            const gdu_unlock_build_result *r);
void gdu_unlock_print_steps(FILE *out, const gdu_unlock_install_report *r, const char *what);
void gdu_unlock_print_status_report(FILE *out, const gdu_unlock_target *t);

#endif
