/* libgdunlock.so: the exported ioctl that LD_PRELOAD puts in front of libc's,
 * the process-wide configuration from the environment, fork and exit
 * handling, and the query functions GPU tests look up with dlsym.
 *
 * Environment: GDUNLOCK=0 disables everything; GDUNLOCK_LOG=error|info|debug;
 * GDUNLOCK_REPORT=path.json (a "%p" in it becomes the pid) is written at exit
 * by processes that used a GPU; GDUNLOCK_TEST_DROP_NATIVE=1 (or =strict) and
 * GDUNLOCK_FAULT=<n> are for tests (see shim_core.h). */
#include "shim/shim_core.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#define GDU_EXPORT __attribute__((visibility("default")))

/* Character major of the RM nodes (/dev/nvidiactl, /dev/nvidiaN). */
#define GDU_NV_MAJOR 195

typedef int (*ioctl_fn)(int, unsigned long, ...);

static ioctl_fn g_real_ioctl;
static gdu_shim *g_shim;
static int g_log_level = GDU_LOG_ERROR;
static char g_report_path[1024];
static dev_t g_uvm_rdev;
static int g_have_uvm_rdev;
static int g_vm_readv_works;
/* Set while this thread is inside the shim: nested ioctls pass straight through. */
static __thread int t_in_shim __attribute__((tls_model("initial-exec")));

static int syscall_ioctl(int fd, unsigned long request, ...)
{
    va_list ap;
    va_start(ap, request);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return (int)syscall(SYS_ioctl, fd, request, arg);
}

static ioctl_fn real_ioctl(void)
{
    ioctl_fn f = __atomic_load_n(&g_real_ioctl, __ATOMIC_ACQUIRE);
    if (f == NULL) {
        *(void **)&f = dlsym(RTLD_NEXT, "ioctl");
        if (f == NULL)
            f = syscall_ioctl;
        __atomic_store_n(&g_real_ioctl, f, __ATOMIC_RELEASE);
    }
    return f;
}

/* ---- ops for the core ---- */

static int op_ioctl(void *ctx, int fd, unsigned long request, void *arg)
{
    return real_ioctl()(fd, request, arg);
}

static gdu_fd_kind op_fd_kind(void *ctx, int fd)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISCHR(st.st_mode))
        return GDU_FD_OTHER;
    if (major(st.st_rdev) == GDU_NV_MAJOR)
        return GDU_FD_RM;
    if (!__atomic_load_n(&g_have_uvm_rdev, __ATOMIC_ACQUIRE)) {
        /* nvidia-uvm may be loaded only when CUDA first opens it. */
        struct stat u;
        if (stat("/dev/nvidia-uvm", &u) != 0)
            return GDU_FD_OTHER;
        g_uvm_rdev = u.st_rdev;
        __atomic_store_n(&g_have_uvm_rdev, 1, __ATOMIC_RELEASE);
    }
    return st.st_rdev == g_uvm_rdev ? GDU_FD_UVM : GDU_FD_OTHER;
}

/* Reads a block an ioctl has not validated yet without risking a fault:
 * process_vm_readv on ourselves fails with EFAULT where memcpy would crash. */
static int op_read_block(void *ctx, const void *addr, void *dst, size_t n)
{
    if (addr == NULL)
        return -1;
    if (!g_vm_readv_works) {
        memcpy(dst, addr, n); /* only where the syscall is forbidden (seccomp) */
        return 0;
    }
    struct iovec local = {dst, n}, remote = {(void *)addr, n};
    return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)n ? 0 : -1;
}

static void op_log(void *ctx, int level, const char *line)
{
    char buf[600];
    int n = snprintf(buf, sizeof buf, "%s\n", line);
    if (n > 0) {
        ssize_t w = write(STDERR_FILENO, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
        (void)w;
    }
}

static void log_line(int level, const char *line)
{
    if (level <= g_log_level)
        op_log(NULL, level, line);
}

/* ---- configuration ---- */

static void read_driver_version(char *out, size_t len)
{
    static const char *const files[] = {"/sys/module/nvidia_uvm/version", "/proc/driver/nvidia/version"};
    out[0] = '\0';
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        int fd = open(files[i], O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t n = read(fd, out, len - 1);
        close(fd);
        if (n > 0) {
            out[n] = '\0';
            return;
        }
    }
}

static int parse_log_level(const char *v)
{
    if (v == NULL || strcmp(v, "error") == 0)
        return GDU_LOG_ERROR;
    if (strcmp(v, "info") == 0)
        return GDU_LOG_INFO;
    if (strcmp(v, "debug") == 0)
        return GDU_LOG_DEBUG;
    log_line(GDU_LOG_ERROR, "gdunlock: GDUNLOCK_LOG must be error, info or debug; using error");
    return GDU_LOG_ERROR;
}

static void at_fork_prepare(void)
{
    gdu_shim_fork_prepare(g_shim);
}

static void at_fork_parent(void)
{
    gdu_shim_fork_parent(g_shim);
}

static void at_fork_child(void)
{
    gdu_shim_fork_child(g_shim);
    g_report_path[0] = '\0'; /* the parent reports; a child that execs starts afresh */
}

static void init_once(void)
{
    real_ioctl();
    const char *enabled = getenv("GDUNLOCK");
    if (enabled != NULL && strcmp(enabled, "0") == 0)
        return;
    g_log_level = parse_log_level(getenv("GDUNLOCK_LOG"));
    const char *report = getenv("GDUNLOCK_REPORT");
    if (report != NULL)
        snprintf(g_report_path, sizeof g_report_path, "%s", report);
    const char *drop = getenv("GDUNLOCK_TEST_DROP_NATIVE");
    const char *fault = getenv("GDUNLOCK_FAULT");
    char version[512];
    read_driver_version(version, sizeof version);
    gdu_shim_config cfg = {
        .log_level = g_log_level,
        .test_drop_native = drop != NULL && (strcmp(drop, "1") == 0 || strcmp(drop, "strict") == 0),
        .test_strict = drop != NULL && strcmp(drop, "strict") == 0,
        .fault_at = fault != NULL ? strtoull(fault, NULL, 10) : 0,
        .driver_version = version[0] ? version : NULL,
    };
    int probe = 0, copy = -1;
    struct iovec local = {&copy, sizeof copy}, remote = {&probe, sizeof probe};
    g_vm_readv_works = process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)sizeof probe;
    gdu_shim_ops ops = {op_ioctl, op_fd_kind, op_read_block, op_log, NULL};
    gdu_shim *s = gdu_shim_new(&cfg, &ops);
    if (s == NULL) {
        log_line(GDU_LOG_ERROR, "gdunlock: out of memory at start; the shim is off in this process");
        return;
    }
    pthread_atfork(at_fork_prepare, at_fork_parent, at_fork_child);
    __atomic_store_n(&g_shim, s, __ATOMIC_RELEASE);
}

static pthread_once_t g_init = PTHREAD_ONCE_INIT;

/* Set up at load, or at the first ioctl if a library's constructor (or the
 * program's) reaches ioctl before ours has run. */
static gdu_shim *shim(void)
{
    gdu_shim *s = __atomic_load_n(&g_shim, __ATOMIC_ACQUIRE);
    if (s == NULL) {
        t_in_shim = 1;
        pthread_once(&g_init, init_once);
        t_in_shim = 0;
        s = __atomic_load_n(&g_shim, __ATOMIC_ACQUIRE);
    }
    return s;
}

__attribute__((constructor)) static void gdunlock_init(void)
{
    shim();
}

/* Writes the report to path, "%p" replaced by the pid, through a temporary file. */
static void write_report(const char *pattern)
{
    char path[1100], tmp[1200];
    size_t o = 0;
    for (const char *p = pattern; *p && o < sizeof path - 24; p++) {
        if (p[0] == '%' && p[1] == 'p') {
            o += (size_t)snprintf(path + o, sizeof path - o, "%d", (int)getpid());
            p++;
        } else {
            path[o++] = *p;
        }
    }
    path[o] = '\0';
    snprintf(tmp, sizeof tmp, "%s.tmp%d", path, (int)getpid());
    json_t *r = gdu_shim_report(g_shim);
    if (r == NULL || json_dump_file(r, tmp, JSON_INDENT(2)) != 0 || rename(tmp, path) != 0) {
        char line[1200];
        snprintf(line, sizeof line, "gdunlock: cannot write the report %s: %s", path, strerror(errno));
        log_line(GDU_LOG_ERROR, line);
        unlink(tmp);
    }
    json_decref(r);
}

__attribute__((destructor)) static void gdunlock_fini(void)
{
    gdu_shim *s = __atomic_load_n(&g_shim, __ATOMIC_ACQUIRE);
    /* The shim stays in place: libraries finalised after us may still call ioctl. */
    if (s != NULL && g_report_path[0] && gdu_shim_saw_gpu(s)) {
        t_in_shim = 1;
        write_report(g_report_path);
        t_in_shim = 0;
    }
}

GDU_EXPORT int ioctl(int fd, unsigned long request, ...)
{
    va_list ap;
    va_start(ap, request);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    if (t_in_shim)
        return real_ioctl()(fd, request, arg);
    gdu_shim *s = shim();
    if (s == NULL)
        return real_ioctl()(fd, request, arg);
    t_in_shim = 1;
    int r = gdu_shim_ioctl(s, fd, request, arg);
    t_in_shim = 0;
    return r;
}

/* ---- test queries (tests/gpu/shim_*.c find them with dlsym) ---- */

/* See gdu_shim_probe_registered. -2: the shim is not active. */
GDU_EXPORT int gdunlock_test_probe_registered(unsigned long long gpu_va, unsigned *status)
{
    gdu_shim *s = __atomic_load_n(&g_shim, __ATOMIC_ACQUIRE);
    if (s == NULL)
        return -2;
    uint32_t st = 0;
    t_in_shim = 1;
    int r = gdu_shim_probe_registered(s, gpu_va, &st);
    t_in_shim = 0;
    if (status != NULL)
        *status = st;
    return r;
}

/* Fills out[0..9]: registered, unregistered, live, already_registered,
 * objects_created, failures, rm_calls, mappings, tracked RM objects. Returns
 * 0, or -2 when the shim is not active. */
GDU_EXPORT int gdunlock_test_totals(unsigned long long out[9])
{
    gdu_shim *s = __atomic_load_n(&g_shim, __ATOMIC_ACQUIRE);
    if (s == NULL)
        return -2;
    gdu_shim_totals t;
    gdu_shim_get_totals(s, &t);
    unsigned long long v[9] = {t.registered, t.unregistered, t.live, t.already_registered, t.objects_created,
                               t.failures,    t.rm_calls,     t.mappings, t.objects};
    memcpy(out, v, sizeof v);
    return 0;
}
