/* gdunlock run's launch: the program with libgdunlock.so preloaded, the
 * signals sent meanwhile passed on to it, and the reports its processes
 * wrote into a private folder (GDUNLOCK_REPORT=<dir>/report-%p.json). */
#include "launch/launch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The signals that end a run: passed on to CMD, which is waited for; then the
 * reports are collected, the folder removed, and the exit is 128+N. */
static const int ending_signals[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
#define N_ENDING (sizeof ending_signals / sizeof ending_signals[0])

static volatile sig_atomic_t child_pid;     /* CMD while it runs, else 0 */
static volatile sig_atomic_t ending_signal; /* the signal passed on, 0 none */
static volatile sig_atomic_t cmd_ended;     /* CMD has ended: a signal now is gdunlock's */
static volatile sig_atomic_t late_signal;   /* one that came after CMD ended, 0 none */

static void pass_on(int sig, siginfo_t *info, void *context)
{
    (void)context;
    /* A terminal's ^C, ^\ and hangup reach CMD itself (it is in our process
     * group), as with system(): only a signal a process sent is passed on. */
    if (info->si_code == SI_KERNEL && sig != SIGTERM)
        return;
    if (child_pid > 0 && info->si_pid != child_pid) {
        ending_signal = sig;
        kill((pid_t)child_pid, sig);
    } else if (child_pid == 0) {
        ending_signal = sig; /* before CMD started, or after it ended: remembered */
        if (cmd_ended)
            late_signal = sig;
    }
}

/* Installs pass_on for each ending signal not ignored when we started (a
 * background job's SIGINT stays ignored, as CMD's does). Without SA_RESTART:
 * once CMD has ended, a signal interrupts whatever would block in collecting
 * the reports instead of being swallowed. */
static void catch_ending(struct sigaction *old)
{
    struct sigaction sa = {.sa_sigaction = pass_on, .sa_flags = SA_SIGINFO};
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < N_ENDING; i++) {
        sigaction(ending_signals[i], NULL, &old[i]);
        if (old[i].sa_handler != SIG_IGN)
            sigaction(ending_signals[i], &sa, NULL);
    }
}

static void release_ending(const struct sigaction *old)
{
    for (size_t i = 0; i < N_ENDING; i++)
        sigaction(ending_signals[i], &old[i], NULL);
}

static void block_ending(int how, sigset_t *old)
{
    sigset_t set;
    sigemptyset(&set);
    for (size_t i = 0; i < N_ENDING; i++)
        sigaddset(&set, ending_signals[i]);
    sigprocmask(how, &set, old);
}

/* Runs argv with the shim preloaded; returns its wait status, or -1 with
 * *exec_errno set when it could not be started. */
static int run_child(char **argv, const char *shim, const char *report_pattern, const char *mark,
                     const gdu_launch_options *o, int *exec_errno)
{
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) != 0) {
        *exec_errno = errno;
        return -1;
    }
    fflush(NULL);
    /* Blocked around fork: a signal is passed on once CMD's pid is known. */
    sigset_t mask;
    block_ending(SIG_BLOCK, &mask);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        *exec_errno = errno;
        sigprocmask(SIG_SETMASK, &mask, NULL);
        close(pipefd[0]);
        close(pipefd[1]);
        return -1;
    }
    if (pid == 0) {
        for (size_t i = 0; i < N_ENDING; i++) {
            struct sigaction cur;
            sigaction(ending_signals[i], NULL, &cur);
            if (cur.sa_handler != SIG_IGN)
                signal(ending_signals[i], SIG_DFL);
        }
        sigprocmask(SIG_SETMASK, &mask, NULL);
        /* If gdunlock itself is killed (SIGKILL), CMD is not left behind. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(127);
        close(pipefd[0]);
        gdu_launch_preload(shim, report_pattern);
        setenv("GDUNLOCK_LAUNCH_MARK", mark, 1);
        unsetenv("GDUNLOCK");
        if (o->log != NULL)
            setenv("GDUNLOCK_LOG", o->log, 1);
        if (o->test_drop_native)
            setenv("GDUNLOCK_TEST_DROP_NATIVE", "1", 1);
        if (o->rdma)
            setenv("GDUNLOCK_RDMA", "1", 1);
        execvp(argv[0], argv);
        int e = errno;
        ssize_t w = write(pipefd[1], &e, sizeof e);
        (void)w;
        _exit(127);
    }
    child_pid = pid;
    if (ending_signal != 0) /* came before CMD started */
        kill(pid, ending_signal);
    sigprocmask(SIG_SETMASK, &mask, NULL);
    close(pipefd[1]);
    int e = 0;
    ssize_t got;
    while ((got = read(pipefd[0], &e, sizeof e)) < 0 && errno == EINTR)
        ;
    close(pipefd[0]);
    /* Waited for without reaping first, so that pass_on never signals a
     * reaped (and perhaps reused) pid. */
    siginfo_t info;
    while (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT) < 0 && errno == EINTR)
        ;
    block_ending(SIG_BLOCK, &mask);
    child_pid = 0;
    cmd_ended = 1;
    sigprocmask(SIG_SETMASK, &mask, NULL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (got == (ssize_t)sizeof e) {
        *exec_errno = e;
        return -1;
    }
    return status;
}

/* Loads every report-*.json of dir into an array and removes everything
 * there (the shim's mark and the link to it too); reports that cannot be
 * read go into unreadable. */
static json_t *collect_reports(const char *dir, json_t *unreadable)
{
    json_t *all = json_array();
    DIR *d = opendir(dir);
    if (d == NULL)
        return all;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[PATH_MAX + 256];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        /* CMD's processes write here: only a regular file is read (a FIFO
         * would block the load). */
        struct stat st;
        if (strncmp(e->d_name, "report-", 7) == 0 && strstr(e->d_name, ".json") != NULL &&
            strstr(e->d_name, ".tmp") == NULL && lstat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            char why[256];
            json_t *r = gdu_launch_load_report(path, why, sizeof why);
            if (r != NULL)
                json_array_append_new(all, r);
            else
                json_array_append_new(unreadable,
                                      json_pack("{s:s, s:s}", "file", e->d_name, "error", why));
        }
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
    return all;
}

/* --report PATH: a file, or a pipe with a reader (--report >(jq .)); opened
 * without blocking, so a FIFO nobody reads fails (ENXIO) instead of hanging.
 * Returns 0 or -1 with errno. */

int gdu_launch_run(char **argv, const char *shim, const gdu_launch_options *o,
                   gdu_launch_result *out, char *why, size_t why_len)
{
    memset(out, 0, sizeof *out);
    char dir[PATH_MAX], pattern[PATH_MAX + 32], mark[PATH_MAX + 32], preload[PATH_MAX + 32];
    int rc = gdu_launch_mkdtemp("run", dir, sizeof dir);
    if (rc != 0) {
        const char *tmp = getenv("TMPDIR");
        snprintf(why, why_len, "cannot create a folder for the shim's reports in %s: %s",
                 tmp && *tmp ? tmp : "/tmp", strerror(-rc));
        return rc;
    }
    rc = gdu_launch_preload_path(shim, dir, preload, sizeof preload, why, why_len);
    if (rc != 0) {
        rmdir(dir);
        return rc;
    }
    snprintf(pattern, sizeof pattern, "%s/report-%%p.json", dir);
    snprintf(mark, sizeof mark, "%s/loaded", dir);
    struct sigaction old[N_ENDING];
    catch_ending(old);
    out->status = run_child(argv, preload, pattern, mark, o, &out->exec_errno);
    struct stat st;
    out->shim_loaded = lstat(mark, &st) == 0 && S_ISREG(st.st_mode);
    out->unreadable = json_array();
    out->processes = collect_reports(dir, out->unreadable);
    /* The folder is gone: from here a signal may end gdunlock as it would
     * any program (a stdout pipe nobody reads cannot keep it). One that came
     * after CMD ended, while the reports were collected, ends it now: left
     * remembered, gdunlock would go on to block on that pipe for good. */
    release_ending(old);
    if (late_signal != 0)
        raise(late_signal);
    out->ending_signal = ending_signal;
    return 0;
}

void gdu_launch_result_free(gdu_launch_result *r)
{
    json_decref(r->processes);
    json_decref(r->unreadable);
    r->processes = r->unreadable = NULL;
}
