/* gdunlock run [options] -- CMD ARGS...: runs CMD with libgdunlock.so (found
 * next to this binary, in ../lib) preloaded, waits for it, then prints what
 * the shim did in each process of CMD that used a GPU, and exits with CMD's
 * exit status. Each such process writes its report into a private temporary
 * folder (GDUNLOCK_REPORT=<dir>/report-%p.json); they are merged here. */
#include "cli/cli_error.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "util/units.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

struct run_options {
    const char *report; /* also write the merged report here */
    const char *log;    /* GDUNLOCK_LOG for CMD */
    bool json;
    bool test_drop_native;
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: gdunlock run [--report PATH] [--log LEVEL] [--json] [--test-drop-native] -- CMD [ARGS...]\n"
            "\n"
            "Runs CMD with the gdunlock shim (libgdunlock.so) preloaded: on every GPU where the\n"
            "driver gives CUDA no ThirdPartyP2P object (GeForce), the shim creates one and registers\n"
            "each device allocation with it, so that nvidia-fs/cuFile can DMA to and from GPU memory.\n"
            "CMD's own output is left as it is; afterwards the shim's report (per process and GPU:\n"
            "mode native / unlocked / failed + reason, allocations registered and unregistered,\n"
            "failures by RM status) goes to stderr as a table, or to stdout as JSON with --json.\n"
            "\n"
            "  --report PATH       also write the report (JSON) to PATH\n"
            "  --log LEVEL         shim log level in CMD: error (default), info or debug\n"
            "  --json              the report as JSON on stdout\n"
            "  --test-drop-native  test mode: replace libcuda's own ThirdPartyP2P objects by the\n"
            "                      shim's (reproduces the GeForce state on a datacenter GPU)\n"
            "\n"
            "SIGTERM, SIGINT, SIGHUP and SIGQUIT sent to gdunlock are passed on to CMD, which is\n"
            "waited for (a terminal's ^C reaches CMD itself); if gdunlock is killed, CMD gets SIGTERM.\n"
            "\n"
            "exit: CMD's exit status (128+N if a signal N ended it or was passed on), 64 bad\n"
            "arguments, 66 CMD cannot be run, 69 libgdunlock.so not found, 70 internal error,\n"
            "74 the report could not be written\n");
}

static int parse(int argc, char **argv, struct run_options *o)
{
    static const struct option longopts[] = {
        {"report", required_argument, NULL, 'r'}, {"log", required_argument, NULL, 'l'},
        {"json", no_argument, NULL, 'j'},         {"test-drop-native", no_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
    };
    *o = (struct run_options){0};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "+h", longopts, NULL)) != -1) {
        switch (c) {
        case 'r':
            o->report = optarg;
            break;
        case 'l':
            if (strcmp(optarg, "error") != 0 && strcmp(optarg, "info") != 0 && strcmp(optarg, "debug") != 0)
                return gdu_cli_fail("run", GDU_EXIT_USAGE, NULL, NULL,
                                    "--log '%s': give error, info or debug", optarg);
            o->log = optarg;
            break;
        case 'j':
            o->json = true;
            break;
        case 't':
            o->test_drop_native = true;
            break;
        case 'h':
            usage(stdout);
            return -1;
        default:
            usage(stderr);
            return gdu_cli_fail("run", GDU_EXIT_USAGE, NULL, NULL, "unknown or incomplete option '%s'",
                                argv[optind - 1]);
        }
    }
    if (optind >= argc)
        return gdu_cli_fail("run", GDU_EXIT_USAGE, NULL, NULL, "no command given; write it after "
                            "'--', e.g. gdunlock run -- python3 train.py");
    return 0;
}

/* <dir of this executable>/../lib/libgdunlock.so; false if it is not there. */
static bool find_shim(char *path, size_t len)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return false;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash == NULL)
        return false;
    *slash = '\0';
    if ((size_t)snprintf(path, len, "%s/../lib/libgdunlock.so", exe) >= len)
        return false;
    return access(path, R_OK) == 0;
}

/* The signals that end a run: passed on to CMD, which is waited for; then the
 * reports are collected, the folder removed, and the exit is 128+N. */
static const int ending_signals[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
#define N_ENDING (sizeof ending_signals / sizeof ending_signals[0])

static volatile sig_atomic_t child_pid;      /* CMD while it runs, else 0 */
static volatile sig_atomic_t ending_signal;  /* the signal passed on, 0 none */

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
        ending_signal = sig; /* before CMD started, or after it ended: just remembered */
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
static int run_child(char **argv, const char *shim, const char *report_pattern, const struct run_options *o,
                     int *exec_errno)
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
        char preload[PATH_MAX * 2];
        const char *old = getenv("LD_PRELOAD");
        snprintf(preload, sizeof preload, "%s%s%s", shim, old && *old ? ":" : "", old && *old ? old : "");
        setenv("LD_PRELOAD", preload, 1);
        setenv("GDUNLOCK_REPORT", report_pattern, 1);
        unsetenv("GDUNLOCK");
        if (o->log != NULL)
            setenv("GDUNLOCK_LOG", o->log, 1);
        if (o->test_drop_native)
            setenv("GDUNLOCK_TEST_DROP_NATIVE", "1", 1);
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

/* Loads every report-*.json of dir into an array (and removes the files). */
static json_t *collect_reports(const char *dir)
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
            json_error_t err;
            json_t *r = json_load_file(path, 0, &err);
            if (r != NULL)
                json_array_append_new(all, r);
            else
                fprintf(stderr, "gdunlock run: shim report %s unreadable: %s\n", e->d_name, err.text);
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
static int write_report(const json_t *doc, const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    int flags = fcntl(fd, F_GETFL);
    FILE *f = flags >= 0 && fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0 ? fdopen(fd, "w") : NULL;
    if (f == NULL) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    int rc = json_dumpf(doc, f, JSON_INDENT(2));
    fputc('\n', f);
    int e = ferror(f) ? (errno ? errno : EIO) : 0;
    if (fclose(f) != 0 && e == 0)
        e = errno;
    errno = e;
    return rc == 0 && e == 0 ? 0 : -1;
}

static const char *mode_colour(const char *mode, bool colour)
{
    if (!colour)
        return "";
    return strcmp(mode, "unlocked") == 0 ? "\033[32m" : strcmp(mode, "failed") == 0 ? "\033[31m" : "\033[36m";
}

static long long num(const json_t *o, const char *key)
{
    return (long long)json_integer_value(json_object_get(o, key));
}

/* What nvidia-fs's lookup (the shim's model of it) finds for each buffer the
 * program gave cuFile. */
static void print_cufile_buffers(FILE *out, const json_t *cf)
{
    if (num(cf, "registered") <= 0)
        return;
    fprintf(out, "  cuFile buffers: %lld registered, %lld found by nvidia-fs's lookup (model)%s\n", num(cf, "registered"),
            num(cf, "found"), num(cf, "not_listed") > 0 ? "; the oldest not listed" : "");
    size_t i;
    const json_t *b;
    json_array_foreach(json_object_get(cf, "buffers"), i, b)
    {
        char size[32];
        gdu_format_bytes((uint64_t)num(b, "size"), size, sizeof size);
        const char *verdict = json_string_value(json_object_get(b, "kernel_lookup"));
        const char *why = json_string_value(json_object_get(b, "why"));
        fprintf(out, "    0x%llx %-9s %s%s%s\n", (unsigned long long)num(b, "address"), size, verdict ? verdict : "?",
                verdict != NULL && strcmp(verdict, "found") != 0 && why != NULL ? ": " : "",
                verdict != NULL && strcmp(verdict, "found") != 0 && why != NULL ? why : "");
    }
}

static void print_table(FILE *out, const json_t *processes, bool colour)
{
    size_t i, j;
    const json_t *p, *g;
    json_array_foreach(processes, i, p)
    {
        fprintf(out, "gdunlock: shim report, pid %lld, driver %s%s\n", num(p, "pid"),
                json_string_value(json_object_get(p, "driver")),
                json_is_true(json_object_get(p, "test_drop_native")) ? " (test mode: libcuda's objects dropped)" : "");
        const char *refused = json_string_value(json_object_get(p, "refused"));
        if (refused != NULL)
            fprintf(out, "  not acting: %s\n", refused);
        fprintf(out, "  %-4s %-13s %-9s %10s %12s %6s %8s %8s  %s\n", "GPU", "PCI", "mode", "registered",
                "unregistered", "live", "skipped", "failures", "reason");
        json_array_foreach(json_object_get(p, "gpus"), j, g)
        {
            const char *mode = json_string_value(json_object_get(g, "mode"));
            const char *pci = json_string_value(json_object_get(g, "pci"));
            const char *reason = json_string_value(json_object_get(g, "reason"));
            const json_t *dev = json_object_get(g, "rm_device");
            char devs[16];
            snprintf(devs, sizeof devs, json_is_integer(dev) ? "%lld" : "?", (long long)json_integer_value(dev));
            fprintf(out, "  %-4s %-13s %s%-9s%s %10lld %12lld %6lld %8lld %8lld  %s\n", devs, pci ? pci : "-",
                    mode_colour(mode ? mode : "", colour), mode ? mode : "?", colour ? "\033[0m" : "",
                    num(g, "registered"), num(g, "unregistered"), num(g, "live"),
                    num(g, "skipped"), num(g, "failures"), reason ? reason : "");
            const char *key;
            const json_t *count;
            json_object_foreach((json_t *)json_object_get(g, "failures_by_status"), key, count)
                fprintf(out, "       %lld x %s\n", (long long)json_integer_value(count), key);
            const json_t *vas = json_object_get(g, "va_space");
            const char *src = json_string_value(json_object_get(g, "va_space_source"));
            if (json_is_integer(vas))
                fprintf(out, "       VA space 0x%llx (%s)\n", (unsigned long long)json_integer_value(vas),
                        src == NULL              ? "?"
                        : strcmp(src, "uvm") == 0 ? "the one registered with UVM"
                        : strcmp(src, "libcuda") == 0 ? "libcuda's own"
                                                      : "the device's first; no UVM registration seen");
        }
        print_cufile_buffers(out, json_object_get(p, "cufile_buffers"));
    }
    if (json_array_size(processes) == 0)
        fprintf(out, "gdunlock: the command made no GPU (RM) calls; no shim report\n");
}

int gdu_cmd_run(int argc, char **argv)
{
    struct run_options o;
    int rc = parse(argc, argv, &o);
    if (rc != 0)
        return rc < 0 ? GDU_EXIT_OK : rc;
    char shim[PATH_MAX + 32] = "";
    if (!find_shim(shim, sizeof shim))
        return gdu_cli_fail("run", GDU_EXIT_UNAVAILABLE, NULL,
                            "build it: cmake --build build --target gdu_shim",
                            "libgdunlock.so not found next to the gdunlock binary (%s)", shim);
    const char *tmp = getenv("TMPDIR");
    char dir[PATH_MAX], pattern[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s/gdunlock-run-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(dir) == NULL)
        return gdu_cli_fail("run", GDU_EXIT_SOFTWARE, NULL, "set TMPDIR to a writable folder",
                            "cannot create a folder for the shim's reports in %s: %s",
                            tmp && *tmp ? tmp : "/tmp", strerror(errno));
    snprintf(pattern, sizeof pattern, "%s/report-%%p.json", dir);
    int exec_errno = 0;
    struct sigaction old[N_ENDING];
    catch_ending(old);
    int status = run_child(argv + optind, shim, pattern, &o, &exec_errno);
    json_t *processes = collect_reports(dir);
    /* The folder is gone: from here a signal may end gdunlock as it would
     * any program (a stdout pipe nobody reads cannot keep it). */
    release_ending(old);
    if (status < 0) {
        json_decref(processes);
        return gdu_cli_fail("run", exec_errno == ENOENT || exec_errno == EACCES ? GDU_EXIT_NOINPUT
                                                                                 : GDU_EXIT_SOFTWARE,
                            NULL, NULL, "cannot run '%s': %s", argv[optind], strerror(exec_errno));
    }
    int cmd_rc = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
    if (ending_signal != 0) { /* as a shell reports a command a signal ended */
        fprintf(stderr, "gdunlock run: %s; '%s' ended with status %d\n", strsignal(ending_signal),
                argv[optind], cmd_rc);
        cmd_rc = 128 + ending_signal;
    }
    json_t *doc = json_pack("{s:s, s:i, s:O}", "command", argv[optind], "exit_status", cmd_rc, "processes", processes);
    if (o.report != NULL && write_report(doc, o.report) != 0) {
        fprintf(stderr, "gdunlock run: cannot write the report to %s: %s\n", o.report, strerror(errno));
        cmd_rc = GDU_EXIT_IOERR;
    }
    if (o.json) {
        json_dumpf(doc, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
    } else {
        const char *nc = getenv("NO_COLOR");
        print_table(stderr, processes, isatty(STDERR_FILENO) && (nc == NULL || nc[0] == '\0'));
    }
    json_decref(doc);
    json_decref(processes);
    return cmd_rc;
}
