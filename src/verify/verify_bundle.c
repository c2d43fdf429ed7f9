#include "verify/verify_bundle.h"

#include "doctor/doctor.h"
#include "facts/capture.h"
#include "launch/launch.h"
#include "probe/nvfs_stats.h"
#include "verify/verify_scrub.h"

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

/* Copies root + path (the examined machine's file) to dst; false when absent. */
static bool copy_out(const char *root, const char *path, const char *dst)
{
    char src[PATH_MAX * 2], buf[8192];
    snprintf(src, sizeof src, "%s%s", root, path);
    FILE *in = fopen(src, "re");
    if (in == NULL)
        return false;
    FILE *out = fopen(dst, "we");
    size_t n;
    while (out != NULL && (n = fread(buf, 1, sizeof buf, in)) > 0)
        fwrite(buf, 1, n, out);
    fclose(in);
    return out != NULL && fclose(out) == 0;
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

/* Runs argv with stdout into out_path and extra (NAME=value, may be NULL) in
 * the environment; returns the exit status, or -errno when it did not run. */
static int spawn(char *const argv[], const char *out_path, const char *extra)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (out_path != NULL)
        posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, out_path, O_WRONLY | O_CREAT | O_TRUNC,
                                         0644);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
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

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    return type == FTW_DP ? rmdir(path) : unlink(path);
}

/* Names to scrub: host names and user names of the examined machine. */
static void scrub_words(const char *root, gdu_scrub *sc)
{
    static const char *const hosts[] = {"/proc/sys/kernel/hostname", "/etc/hostname"};
    for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++) {
        char path[PATH_MAX + 64], line[128] = "";
        snprintf(path, sizeof path, "%s%s", root, hosts[i]);
        FILE *f = fopen(path, "re");
        if (f != NULL && fgets(line, sizeof line, f) != NULL)
            gdu_scrub_add_host(sc, line);
        if (f != NULL)
            fclose(f);
    }
    if (root[0] != '\0')
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
    "  cufile.log    libcufile's log of that verify run\n"
    "  nvidia-fs-stats-before.txt, nvidia-fs-stats-after.txt   around it\n"
    "  kernel-log.txt    the kernel's lines about the driver, nvidia-fs, NVMe, P2PDMA\n"
    "  driver-params.txt /proc/driver/nvidia/params\n";

/* Everything but the packing, into bundle. */
static int gather(const gdu_bundle_request *req, const char *bundle, gdu_scrub *sc,
                  gdu_bundle_result *res, char *why, size_t why_len)
{
    const char *root = req->sysroot ? req->sysroot : "";
    char file[PATH_MAX + 64];
    gdu_sysroot sr;
    if (gdu_sysroot_init(&sr, req->sysroot) != 0) {
        snprintf(why, why_len, "sysroot path too long");
        return -ENAMETOOLONG;
    }
    gdu_snapshot *s = malloc(sizeof *s);
    if (s == NULL)
        return -ENOMEM;
    /* O_DIRECT is tried where verify will write. */
    char dir[PATH_MAX] = "";
    const char *target = NULL;
    if (req->target != NULL) {
        snprintf(dir, sizeof dir, "%s", req->target);
        char *slash = strrchr(dir, '/');
        if (slash == NULL)
            snprintf(dir, sizeof dir, ".");
        else
            *(slash == dir ? slash + 1 : slash) = '\0';
        char real[PATH_MAX];
        if (realpath(dir, real) != NULL)
            snprintf(dir, sizeof dir, "%s", real);
        target = dir;
    }
    gdu_snapshot_take(&sr, target ? &target : NULL, target ? 1 : 0, s);
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
    gdu_snapshot_free(s);
    free(s);
    gdu_sysroot_free(&sr);
    if (rc != 0)
        return rc;

    snprintf(file, sizeof file, "%s/driver-params.txt", bundle);
    if (!copy_out(root, "/proc/driver/nvidia/params", file))
        note(res, "no /proc/driver/nvidia/params");
    const char *stats = getenv("GDUNLOCK_NVFS_STATS");
    stats = stats && *stats && !req->sysroot ? stats : GDU_NVFS_STATS_PATH;
    snprintf(file, sizeof file, "%s/nvidia-fs-stats-before.txt", bundle);
    if (!copy_out(req->sysroot && stats[0] == '/' ? root : "", stats, file))
        note(res, "no nvidia-fs stats (%s)", stats);
    if (req->sysroot != NULL) {
        note(res, "a capture: no verify run, no kernel log");
    } else if (req->target != NULL) {
        char log[PATH_MAX + 64], out[PATH_MAX + 64];
        snprintf(log, sizeof log, "CUFILE_LOGFILE_PATH=%s/cufile.log", bundle);
        snprintf(out, sizeof out, "%s/verify.json", bundle);
        char *argv[] = {(char *)req->exe, "verify", (char *)req->target, "--json", NULL};
        res->verify_exit = spawn(argv, out, log);
        if (res->verify_exit < 0)
            note(res, "verify did not run: %s", strerror(-res->verify_exit));
        snprintf(file, sizeof file, "%s/nvidia-fs-stats-after.txt", bundle);
        copy_out("", stats, file);
    }
    if (req->sysroot == NULL) {
        snprintf(file, sizeof file, "%s/kernel-log.txt", bundle);
        kernel_log(file, res);
    }
    snprintf(file, sizeof file, "%s/README.txt", bundle);
    FILE *f = fopen(file, "we");
    if (f == NULL || fputs(readme, f) < 0 || fclose(f) != 0) {
        snprintf(why, why_len, "cannot write %s", file);
        return -EIO;
    }
    scrub_words(root, sc);
    res->files_scrubbed = gdu_scrub_tree(sc, bundle);
    res->replaced = sc->replaced;
    if (res->files_scrubbed < 0) {
        snprintf(why, why_len, "scrubbing %s: %s", bundle, strerror((int)-res->files_scrubbed));
        return (int)res->files_scrubbed;
    }
    return 0;
}

int gdu_bundle_make(const gdu_bundle_request *req, gdu_bundle_result *res, char *why,
                    size_t why_len)
{
    memset(res, 0, sizeof *res);
    res->verify_exit = -1;
    char tmp[PATH_MAX], bundle[PATH_MAX + 32], out[PATH_MAX * 2];
    if (req->out[0] == '/' || getcwd(out, PATH_MAX) == NULL)
        snprintf(out, sizeof out, "%s", req->out);
    else
        snprintf(out + strlen(out), sizeof out - strlen(out), "/%s", req->out);
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
    if (rc == 0) {
        /* Owner 0, numerically: the tar headers would name the user too. */
        char *argv[] = {"tar", "--owner=0", "--group=0", "--numeric-owner", "-cf",
                        out,   "-C",        tmp,         "gdunlock-report", NULL};
        int st = spawn(argv, NULL, NULL);
        if (st != 0) {
            snprintf(why, why_len, "tar -cf %s: %s", out,
                     st < 0 ? strerror(-st) : "failed (disk full, or no such folder?)");
            rc = st < 0 ? st : -EIO;
        }
    }
    nftw(tmp, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return rc;
}
