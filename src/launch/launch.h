/* Running a program with the gdunlock shim (libgdunlock.so) preloaded, and
 * reading what the shim reported: the contract gdunlock run and gdunlock
 * verify share. The report's layout is docs/shim-report.md. */
#ifndef GDUNLOCK_LAUNCH_LAUNCH_H
#define GDUNLOCK_LAUNCH_LAUNCH_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Where libgdunlock.so is for the executable at exe: <exe's folder>/../lib
 * (the build folder, or an install into PREFIX/bin and PREFIX/lib), else
 * libdir, the library folder the binary was installed with: relative to the
 * prefix (<exe's folder>/../LIBDIR, so an installed tree can move) or
 * absolute; NULL or "" for none. Returns true with the path in shim; false
 * with the places looked in ("A or B") in shim. */
bool gdu_launch_find_shim_in(const char *exe, const char *libdir, char *shim, size_t len);

/* The same for the running executable, whose path goes into exe, and the
 * install libdir CMake compiled in (GDUNLOCK_INSTALL_LIBDIR). */
bool gdu_launch_find_shim(char *shim, size_t len, char *exe, size_t exe_len);

/* Whether libgdunlock.so is loaded in this process (not merely named in
 * LD_PRELOAD: a path LD_PRELOAD splits is never loaded). */
bool gdu_launch_shim_preloaded(void);

/* The path to put in LD_PRELOAD for shim into out: shim itself, or where its
 * path has a space or ':' (ld.so splits LD_PRELOAD there, and nothing
 * escapes them) a link to it made in dir, a private folder that lives as
 * long as the program. Returns 0, or -errno with why (-EINVAL: dir has
 * them too). */
int gdu_launch_preload_path(const char *shim, const char *dir, char *out, size_t len, char *why,
                            size_t why_len);

/* In a child between fork and exec: shim (a path LD_PRELOAD can carry)
 * ahead of what LD_PRELOAD held, and the path its report goes to
 * (GDUNLOCK_REPORT; %p becomes the pid). */
void gdu_launch_preload(const char *shim, const char *report);

/* A private folder for the reports: $TMPDIR (else /tmp)/gdunlock-<what>-XXXXXX
 * into dir. Returns 0, or -errno. */
int gdu_launch_mkdtemp(const char *what, char *dir, size_t len);

/* One report file as JSON; only a regular file is read (a FIFO put in its
 * place would block the load). NULL with the cause in why. */
json_t *gdu_launch_load_report(const char *path, char *why, size_t len);

/* ---- gdunlock run (launch_run.c) ---- */

typedef struct gdu_launch_options {
    const char *log;       /* GDUNLOCK_LOG for the program; NULL: the shim's default */
    bool test_drop_native; /* GDUNLOCK_TEST_DROP_NATIVE=1 */
    bool rdma;             /* GDUNLOCK_RDMA=1: the GPUDirect RDMA answers for NCCL and verbs too */
} gdu_launch_options;

typedef struct gdu_launch_result {
    int status;         /* the program's wait status; -1 when it could not be started */
    int exec_errno;     /* why it could not be started */
    int ending_signal;  /* a signal passed on to it (or received before it started), 0 none */
    bool shim_loaded;   /* the shim loaded in one of its processes (it said so) */
    json_t *processes;  /* the report of every process of it that used a GPU, an array */
    json_t *unreadable; /* reports that could not be read: [{"file", "error"}] */
} gdu_launch_result;

/* Runs argv (argv[0] looked up in PATH) with shim preloaded and waits for
 * it; the first of its processes the shim loads in says so
 * (GDUNLOCK_LAUNCH_MARK, a file the shim creates). SIGTERM, SIGINT, SIGHUP and SIGQUIT sent to this process meanwhile are
 * passed on to it (a terminal's own reach it directly); if this process is
 * killed, it gets SIGTERM. Each of its processes writes its report into a
 * private folder, which is read and removed before the signals are let go.
 * Returns 0 with out filled (free with gdu_launch_result_free), or -errno
 * with why when the folder cannot be created or the shim cannot be put in
 * LD_PRELOAD (-EINVAL: see gdu_launch_preload_path). */
int gdu_launch_run(char **argv, const char *shim, const gdu_launch_options *o,
                   gdu_launch_result *out, char *why, size_t why_len);
void gdu_launch_result_free(gdu_launch_result *r);

/* ---- gdunlock run's report (launch_report.c) ---- */

/* doc, indented, into the file at path (created or emptied; a FIFO there
 * does not block the open). Returns 0, or -1 with errno. */
int gdu_launch_write_report(const json_t *doc, const char *path);

/* Each process's report (gdu_launch_result's processes, text escaped) as
 * a table on out: its GPUs, what the shim did on each, the cuFile buffers
 * nvidia-fs's lookup found; colour paints the modes. */
void gdu_launch_print_processes(FILE *out, const json_t *processes, bool colour);

#endif
