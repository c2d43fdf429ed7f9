#include "report/report_bundle.h"

#include "doctor/doctor.h"
#include "facts/capture.h"
#include "launch/launch.h"
#include "probe/nvfs_stats.h"
#include "unlock/unlock_run.h"
#include "util/open_regular.h"
#include "report/report_scrub.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pwd.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

enum { KERNEL_LOG_LINES = 300 };

__attribute__((format(printf, 2, 3))) static void note(gdu_bundle_result *res, const char *fmt, ...)
{
    size_t used = strlen(res->notes);
    if (used + 3 >= sizeof res->notes)
        return;
    if (used)
        used += (size_t)snprintf(res->notes + used, sizeof res->notes - used, "; ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->notes + used, sizeof res->notes - used, fmt, ap);
    va_end(ap);
}

/* Notes why the file at path (what it is) was not gathered. */
static void note_not_read(gdu_bundle_result *res, const char *what, const char *path, int rc)
{
    if (rc == -ENOENT)
        note(res, "no %s (%s)", what, path);
    else if (rc == -EINVAL || rc == -EISDIR)
        note(res, "%s not read: %s is not a regular file", what, path);
    else
        note(res, "%s not read: %s: %s", what, path, strerror(-rc));
}

/* The kernel log's lines about what gdunlock deals with, the last ones. */
static void kernel_log(const char *dst, gdu_bundle_result *res)
{
    static const char *const about[] = {"nvidia", "nvrm", "nvfs",   "xid",    "p2pdma",  "nvme",
                                        "iommu",  "dmar", "amd-vi", "cufile", "gdunlock"};
    int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        note(res, "kernel log not read: %s (run as root, or sysctl kernel.dmesg_restrict=0)",
             strerror(errno));
        return;
    }
    char(*keep)[256] = calloc(KERNEL_LOG_LINES, sizeof *keep);
    size_t kept = 0;
    char rec[8192];
    ssize_t n;
    while (keep != NULL && ((n = read(fd, rec, sizeof rec - 1)) > 0 || (n < 0 && errno == EPIPE))) {
        if (n <= 0)
            continue; /* EPIPE: records were overwritten while reading */
        rec[n] = '\0';
        const char *msg = strchr(rec, ';');
        msg = msg ? msg + 1 : rec;
        for (size_t i = 0; i < sizeof about / sizeof about[0]; i++)
            if (strcasestr(msg, about[i]) != NULL) {
                snprintf(keep[kept++ % KERNEL_LOG_LINES], sizeof keep[0], "%.*s",
                         (int)strcspn(msg, "\n"), msg);
                break;
            }
    }
    close(fd);
    FILE *out = keep ? fopen(dst, "we") : NULL;
    size_t first = kept > KERNEL_LOG_LINES ? kept - KERNEL_LOG_LINES : 0;
    for (size_t i = first; out != NULL && i < kept; i++)
        fprintf(out, "%s\n", keep[i % KERNEL_LOG_LINES]);
    if (out != NULL)
        fclose(out);
    free(keep);
}

/* Runs argv with stdout into out_path (created) or out_fd (when out_path
 * is NULL and out_fd >= 0), stderr into err_path (or /dev/null), and extra
 * (NAME=value, may be NULL) in the environment; returns the exit status,
 * or -errno when it did not run. */
static int spawn(char *const argv[], const char *out_path, int out_fd, const char *err_path,
                 const char *extra)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (out_path != NULL)
        posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, out_path, O_WRONLY | O_CREAT | O_TRUNC,
                                         0644);
    else if (out_fd >= 0)
        posix_spawn_file_actions_adddup2(&fa, out_fd, STDOUT_FILENO);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, err_path ? err_path : "/dev/null",
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    size_t n = 0;
    while (environ[n] != NULL)
        n++;
    char **env = calloc(n + 2, sizeof *env);
    int rc = -ENOMEM;
    if (env != NULL) {
        size_t k = 0, name = extra ? strcspn(extra, "=") + 1 : 0;
        for (size_t i = 0; i < n; i++)
            if (extra == NULL || strncmp(environ[i], extra, name) != 0)
                env[k++] = environ[i];
        if (extra != NULL)
            env[k++] = (char *)extra;
        pid_t pid;
        rc = -posix_spawnp(&pid, argv[0], &fa, NULL, argv, env);
        int status = 0;
        while (rc == 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
        if (rc == 0)
            rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    free(env);
    posix_spawn_file_actions_destroy(&fa);
    return rc;
}

/* The folder of path, for a file to go beside it: "." for a bare name. */
static void folder_of(const char *path, char *dir, size_t len)
{
    snprintf(dir, len, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == NULL)
        snprintf(dir, len, ".");
    else
        *(slash == dir ? slash + 1 : slash) = '\0';
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    return type == FTW_DP ? rmdir(path) : unlink(path);
}

/* Names to scrub: host names and user names of the examined machine. */
static void scrub_words(gdu_sysroot *sr, gdu_scrub *sc)
{
    static const char *const hosts[] = {"/proc/sys/kernel/hostname", "/etc/hostname"};
    for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++) {
        char line[128];
        if (gdu_sysroot_read_line(sr, hosts[i], line, sizeof line) == 0)
            gdu_scrub_add_host(sc, line);
    }
    if (!gdu_sysroot_is_live(sr))
        return; /* a capture: the names of who runs report are not its */
    char host[256];
    if (gethostname(host, sizeof host) == 0)
        gdu_scrub_add_host(sc, host);
    static const char *const users[] = {"USER", "LOGNAME", "SUDO_USER"};
    for (size_t i = 0; i < sizeof users / sizeof users[0]; i++)
        gdu_scrub_add_user(sc, getenv(users[i]));
    const struct passwd *pw = getpwuid(geteuid());
    if (pw != NULL)
        gdu_scrub_add_user(sc, pw->pw_name);
}

static const char readme[] =
    "gdunlock report: what gdunlock saw on one machine, to attach to an issue.\n"
    "Host names, user names and paths, UUIDs and serial numbers are scrubbed.\n"
    "\n"
    "  capture/      doctor's capture: gdunlock doctor --sysroot capture [PATH]\n"
    "  doctor.json   doctor's report      verify.json  gdunlock verify --json\n"
    "                (nvidia-fs stats before and after its run, and the difference)\n"
    "  cufile.log    libcufile's log of that verify run\n"
    "  nvidia-fs-stats-before.txt  the stats as doctor's snapshot read them\n"
    "  kernel-log.txt    the kernel's lines about the driver, nvidia-fs, NVMe, P2PDMA\n"
    "  driver-params.txt /proc/driver/nvidia/params\n"
    "  p2p-unlock-status.json  gdunlock p2p unlock --status, and the P2P matrix\n"
    "  verify-rdma.json  gdunlock verify --rdma --json (GPUDirect RDMA with an RDMA adapter)\n";

/* The machine's snapshot, O_DIRECT tried where verify will write (target's
 * folder, into dir: NULL when there is no target). */
static const char *take(const gdu_bundle_request *req, gdu_sysroot *sr, char *dir, size_t len,
                        gdu_snapshot *s)
{
    const char *target = NULL;
    if (req->target != NULL) {
        folder_of(req->target, dir, len);
        char real[PATH_MAX];
        if (realpath(dir, real) != NULL)
            snprintf(dir, len, "%s", real);
        target = dir;
    }
    /* A file named for the stats is the live machine's: a capture has its own. */
    const char *stats = req->sysroot == NULL ? req->nvfs_stats : NULL;
    gdu_snapshot_take_stats_from(sr, target ? &target : NULL, target ? 1 : 0, stats, s);
    return target;
}

/* What the snapshot is judged to: the capture, doctor's report and the P2P
 * unlock's status. 0, or -errno with why when the first two cannot be written. */
static int write_judged(const gdu_snapshot *s, const char *target, const char *sysroot,
                        const char *bundle, gdu_bundle_result *res, char *why, size_t why_len)
{
    char file[PATH_MAX + 64];
    snprintf(file, sizeof file, "%s/capture", bundle);
    gdu_capture_stats st;
    int rc = gdu_capture_write(s, file, &st, why, why_len);
    gdu_report report;
    gdu_doctor_diagnose(s, target, &report);
    json_t *j = gdu_report_to_json(&report);
    snprintf(file, sizeof file, "%s/doctor.json", bundle);
    if (rc == 0 && (j == NULL || json_dump_file(j, file, JSON_INDENT(2)) != 0)) {
        snprintf(why, why_len, "cannot write %s", file);
        rc = -EIO;
    }
    json_decref(j);
    gdu_report_free(&report);
    /* What a GeForce P2P report needs first: which module runs, and the plan. */
    json_t *unlock = rc == 0 ? gdu_unlock_status_report_json_of(s, sysroot) : NULL;
    snprintf(file, sizeof file, "%s/p2p-unlock-status.json", bundle);
    if (rc == 0 && (unlock == NULL || json_dump_file(unlock, file, JSON_INDENT(2)) != 0))
        note(res, "no p2p unlock status (%s)", unlock == NULL ? "out of memory" : "cannot write");
    json_decref(unlock);
    return rc;
}

/* A file's words as the snapshot read them (t), into bundle/name; what
 * (read at path) is a note when the snapshot has none. */
static void write_words(const gdu_snapshot_text *t, const char *what, const char *path,
                        const char *bundle, const char *name, gdu_bundle_result *res)
{
    if (t->len < 0) {
        note_not_read(res, what, path, (int)t->len);
        return;
    }
    char file[PATH_MAX + 64];
    snprintf(file, sizeof file, "%s/%s", bundle, name);
    FILE *out = fopen(file, "wxe");
    bool written = out != NULL && fwrite(t->text, 1, (size_t)t->len, out) == (size_t)t->len;
    if ((out != NULL && fclose(out) != 0) || !written)
        note_not_read(res, what, path, -EIO);
}

/* gdunlock verify --json on the target, libcufile's log beside it. */
static void run_verify(const gdu_bundle_request *req, const char *bundle, gdu_bundle_result *res)
{
    char log[PATH_MAX + 64], out[PATH_MAX + 64];
    snprintf(log, sizeof log, "CUFILE_LOGFILE_PATH=%s/cufile.log", bundle);
    snprintf(out, sizeof out, "%s/verify.json", bundle);
    char *argv[] = {(char *)req->exe, "verify", (char *)req->target, "--json", NULL};
    res->verify_exit = spawn(argv, out, -1, NULL, log);
    if (res->verify_exit < 0)
        note(res, "verify did not run: %s", strerror(-res->verify_exit));
}

/* gdunlock verify --rdma --json: GPUDirect RDMA's outcome, or why it cannot
 * run here (no adapter). */
static void run_verify_rdma(const gdu_bundle_request *req, const char *bundle,
                            gdu_bundle_result *res)
{
    char out[PATH_MAX + 64];
    snprintf(out, sizeof out, "%s/verify-rdma.json", bundle);
    char *argv[] = {(char *)req->exe, "verify", "--rdma", "--json", NULL};
    if (spawn(argv, out, -1, NULL, NULL) < 0)
        note(res, "verify --rdma did not run");
}

/* The README, then every file scrubbed. */
static int finish(const char *bundle, gdu_scrub *sc, gdu_bundle_result *res, char *why,
                  size_t why_len)
{
    char file[PATH_MAX + 64];
    snprintf(file, sizeof file, "%s/README.txt", bundle);
    FILE *f = fopen(file, "we");
    if (f == NULL || fputs(readme, f) < 0 || fclose(f) != 0) {
        snprintf(why, why_len, "cannot write %s", file);
        return -EIO;
    }
    res->files_scrubbed = gdu_scrub_tree(sc, bundle);
    res->replaced = sc->replaced;
    if (res->files_scrubbed < 0) {
        snprintf(why, why_len, "scrubbing %s: %s", bundle, strerror((int)-res->files_scrubbed));
        return (int)res->files_scrubbed;
    }
    return 0;
}

/* Everything but the packing, into bundle: what the snapshot holds, then
 * what happens after it (the verify run, the kernel log). */
static int gather(const gdu_bundle_request *req, const char *bundle, gdu_scrub *sc,
                  gdu_bundle_result *res, char *why, size_t why_len)
{
    gdu_sysroot sr;
    if (gdu_sysroot_init(&sr, req->sysroot) != 0) {
        snprintf(why, why_len, "sysroot path too long");
        return -ENAMETOOLONG;
    }
    gdu_snapshot *s = malloc(sizeof *s);
    if (s == NULL) {
        gdu_sysroot_free(&sr);
        return -ENOMEM;
    }
    char dir[PATH_MAX] = "";
    const char *target = take(req, &sr, dir, sizeof dir, s);
    int rc = write_judged(s, target, req->sysroot, bundle, res, why, why_len);
    if (rc == 0) {
        write_words(&s->driver_params, "driver parameters", GDU_DRIVER_PARAMS_PATH, bundle,
                    "driver-params.txt", res);
        const char *stats =
            req->sysroot == NULL && req->nvfs_stats ? req->nvfs_stats : GDU_NVFS_STATS_PATH;
        write_words(&s->nvfs_text, "nvidia-fs stats", stats, bundle, "nvidia-fs-stats-before.txt",
                    res);
        scrub_words(&sr, sc); /* read like every other file: a FIFO there would hang it */
    }
    gdu_snapshot_free(s);
    free(s);
    gdu_sysroot_free(&sr);
    if (rc != 0)
        return rc;
    if (req->sysroot != NULL) {
        note(res, "a capture: no verify run, no kernel log");
    } else {
        if (req->target != NULL)
            run_verify(req, bundle, res);
        run_verify_rdma(req, bundle, res);
        char file[PATH_MAX + 64];
        snprintf(file, sizeof file, "%s/kernel-log.txt", bundle);
        kernel_log(file, res);
    }
    return finish(bundle, sc, res, why, why_len);
}

/* The first line tar wrote to its errors (at path), or what its status
 * says, into buf. */
static void tar_said(const char *path, int status, char *buf, size_t len)
{
    FILE *f = fopen(path, "re");
    buf[0] = '\0';
    if (f != NULL && fgets(buf, (int)len, f) != NULL)
        buf[strcspn(buf, "\n")] = '\0';
    if (f != NULL)
        fclose(f);
    if (buf[0] == '\0' && status < 0)
        snprintf(buf, len, "%s", strerror(-status));
    else if (buf[0] == '\0')
        snprintf(buf, len, "exit status %d", status);
}

/* Moves the finished bundle at part to out's name: with force over what is
 * there (a link itself, not what it points to), else only where nothing is
 * (renameat2's RENAME_NOREPLACE, or link(2) where the file system has no
 * such rename). */
static int put_in_place(const char *part, const char *out, bool force, char *why, size_t why_len)
{
    int rc = force ? rename(part, out) : renameat2(AT_FDCWD, part, AT_FDCWD, out, RENAME_NOREPLACE);
    if (rc != 0 && !force && (errno == EINVAL || errno == ENOSYS)) {
        rc = link(part, out);
        if (rc == 0)
            unlink(part);
    }
    if (rc == 0)
        return 0;
    int err = errno;
    struct stat st;
    if (err == EEXIST && lstat(out, &st) == 0)
        snprintf(why, why_len, "%s exists (%s): give another --out, or --force to replace it", out,
                 gdu_file_kind(st.st_mode));
    else
        snprintf(why, why_len, "cannot write %s: %s", out, strerror(err));
    return -err;
}

/* Packs tmp/gdunlock-report into out. tar writes a new file beside out,
 * made here (so never through a link planted at out's name, and nothing
 * half-written is left there), which then takes out's name. */
static int pack(const char *tmp, const char *out, bool force, char *why, size_t why_len)
{
    char folder[PATH_MAX], part[PATH_MAX + 32], errs[PATH_MAX + 32], said[256];
    folder_of(out, folder, sizeof folder);
    snprintf(part, sizeof part, "%s/.gdunlock-report-XXXXXX", folder);
    int fd = mkostemp(part, O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        snprintf(why, why_len, "cannot create the bundle in %s: %s", folder, strerror(err));
        return -err;
    }
    mode_t mask = umask(0); /* mkostemp's 0600: the mode tar's own file would get */
    umask(mask);
    fchmod(fd, 0666 & ~mask);
    snprintf(errs, sizeof errs, "%s/tar-errors.txt", tmp);
    /* Owner 0, numerically: the tar headers would name the user too. */
    char *argv[] = {"tar", "--owner=0", "--group=0", "--numeric-owner", "-cf",
                    "-",   "-C",        (char *)tmp, "gdunlock-report", NULL};
    int st = spawn(argv, NULL, fd, errs, NULL);
    int rc = 0;
    if (st != 0) {
        tar_said(errs, st, said, sizeof said);
        snprintf(why, why_len, "tar -cf %s: %s", out, said);
        rc = st < 0 ? st : -EIO;
    } else if (fsync(fd) != 0) { /* a full disk may only show here */
        rc = -errno;
        snprintf(why, why_len, "writing %s: %s", out, strerror(-rc));
    }
    if (close(fd) != 0 && rc == 0) {
        rc = -errno;
        snprintf(why, why_len, "writing %s: %s", out, strerror(-rc));
    }
    if (rc == 0)
        rc = put_in_place(part, out, force, why, why_len);
    if (rc != 0)
        unlink(part);
    return rc;
}

int gdu_bundle_make(const gdu_bundle_request *req, gdu_bundle_result *res, char *why,
                    size_t why_len)
{
    memset(res, 0, sizeof *res);
    res->verify_exit = -1;
    char tmp[PATH_MAX], bundle[PATH_MAX + 32];
    int rc = gdu_launch_mkdtemp("report", tmp, sizeof tmp);
    if (rc != 0) {
        snprintf(why, why_len, "cannot create a temporary folder: %s", strerror(-rc));
        return rc;
    }
    snprintf(bundle, sizeof bundle, "%s/gdunlock-report", tmp);
    gdu_scrub *sc = malloc(sizeof *sc);
    if (sc == NULL || mkdir(bundle, 0755) != 0) {
        snprintf(why, why_len, "cannot create %s", bundle);
        rc = -EIO;
    } else {
        gdu_scrub_init(sc);
        rc = gather(req, bundle, sc, res, why, why_len);
    }
    free(sc);
    if (rc == 0)
        rc = pack(tmp, req->out, req->force, why, why_len);
    nftw(tmp, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return rc;
}
