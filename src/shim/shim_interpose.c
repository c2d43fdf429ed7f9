/* libgdunlock.so: the exported ioctl that LD_PRELOAD puts in front of libc's,
 * the file-descriptor calls that keep its cache of driver fds right, the
 * process-wide configuration from the environment, fork and exit handling,
 * and the query functions GPU tests look up with dlsym. The CUDA and cuFile
 * entry points are in shim_cuda_hooks.c.
 *
 * Environment (docs/settings.md; the booleans take ON/OFF, TRUE/FALSE,
 * YES/NO, 1/0 in any case): GDUNLOCK=0 disables everything; GDUNLOCK_LOG=error|info|debug
 * (anything else: error, silently: a warning would repeat in every process
 * of a pipeline; `gdunlock run --log` checks the value once);
 * GDUNLOCK_REPORT=path.json (a "%p" in it becomes the pid) is written at exit
 * by processes that used a GPU; GDUNLOCK_LAUNCH_MARK=path is created at load
 * (gdunlock run's check that the shim loaded); GDUNLOCK_RDMA_ATTR=0 turns off the answer to
 * the GPUDirect RDMA attributes (shim_attr.c); GDUNLOCK_RDMA=1 gives them to
 * the RDMA networking libraries too (the default of `gdunlock run --rdma`);
 * GDUNLOCK_TEST_DROP_NATIVE=1 (or
 * =strict), GDUNLOCK_TEST_RDMA_ATTR=0 and GDUNLOCK_FAULT=<n> are for tests
 * (see shim_core.h). */
#include "rm/rm_bar1_info.h"
#include "shim/shim_preload.h"
#include "util/nv_device_file.h"
#include "util/pci_resource.h"
#include "util/units.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#define GDU_EXPORT __attribute__((visibility("default")))

/* Character major of the RM nodes (/dev/nvidiactl, /dev/nvidiaN). */
#define GDU_NV_MAJOR 195
/* File descriptors below this have their NVIDIA kind cached. */
#define GDU_FD_CACHE 4096

typedef int (*ioctl_fn)(int, unsigned long, ...);

static ioctl_fn g_real_ioctl;
static gdu_shim *g_shim;
static int g_log_level = GDU_LOG_ERROR;
static char g_report_path[1024];
static dev_t g_uvm_rdev;
static int g_have_uvm_rdev;
/* Per fd: 0 not known, else 1 + gdu_fd_kind of an NVIDIA node. Only NVIDIA
 * kinds are kept: a number closed behind our back (fclose and other libc
 * paths do not call close) may come back as anything, and a stale "other"
 * would hide a driver fd opened there later. */
static unsigned char g_fd_kind[GDU_FD_CACHE];
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
        *(void **)&f = gdu_preload_real_dlsym(RTLD_NEXT, "ioctl");
        if (f == NULL)
            f = syscall_ioctl;
        __atomic_store_n(&g_real_ioctl, f, __ATOMIC_RELEASE);
    }
    return f;
}

/* Resolves libc's definition of name (the shim exports its own). */
static void *next(const char *name) { return gdu_preload_real_dlsym(RTLD_NEXT, name); }

/* ---- ops for the core ---- */

static int op_ioctl(void *ctx, int fd, unsigned long request, void *arg)
{
    return real_ioctl()(fd, request, arg);
}

static gdu_fd_kind fd_kind_uncached(int fd)
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

static gdu_fd_kind op_fd_kind(void *ctx, int fd)
{
    if (fd < 0 || fd >= GDU_FD_CACHE)
        return fd_kind_uncached(fd);
    unsigned char k = __atomic_load_n(&g_fd_kind[fd], __ATOMIC_RELAXED);
    if (k != 0)
        return (gdu_fd_kind)(k - 1);
    gdu_fd_kind kind = fd_kind_uncached(fd);
    if (kind != GDU_FD_OTHER)
        __atomic_store_n(&g_fd_kind[fd], (unsigned char)(kind + 1), __ATOMIC_RELAXED);
    return kind;
}

static void forget_fds(int first, int last)
{
    if (first < 0)
        first = 0;
    if (last >= GDU_FD_CACHE)
        last = GDU_FD_CACHE - 1;
    for (int fd = first; fd <= last; fd++)
        __atomic_store_n(&g_fd_kind[fd], 0, __ATOMIC_RELAXED);
}

/* Whether the page holding p can be read, asked of the kernel with a call
 * every sandbox allows (threads need futex): FUTEX_WAIT reads the word at p,
 * fails with EFAULT where it cannot, and with a zero timeout returns at once
 * either way. process_vm_readv, which once did this, is refused or kills the
 * process under seccomp filters (browsers, container runtimes). */
static bool word_readable(const void *p)
{
    const uint32_t *word = (const uint32_t *)((uintptr_t)p & ~(uintptr_t)3);
    struct timespec zero = {0, 0};
    return syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, 0x5a5a5a5au, &zero, NULL, 0) == 0 ||
           errno != EFAULT;
}

/* Reads a block an ioctl has not validated yet without risking a fault: every
 * page it touches is checked, then copied. A block another thread unmaps in
 * between is a race the program's own ioctl would lose as well. */
static int op_read_block(void *ctx, const void *addr, void *dst, size_t n)
{
    static uintptr_t page;
    if (page == 0)
        page = (uintptr_t)getpagesize();
    uintptr_t a = (uintptr_t)addr, end = a + n;
    if (addr == NULL || end < a)
        return -1;
    int saved = errno;
    bool readable = true;
    for (uintptr_t p = a; readable && p < end; p = (p & ~(page - 1)) + page)
        readable = word_readable((const void *)p);
    errno = saved;
    if (!readable)
        return -1;
    memcpy(dst, addr, n);
    return 0;
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

static uint64_t op_bar1_bytes(void *ctx, const char *pci) { return gdu_pci_bar1_read(pci); }

static int libc_ioctl(int fd, unsigned long request, void *arg)
{
    return real_ioctl()(fd, request, arg);
}

/* Through a client of our own whose escapes go straight to libc: the hook
 * would wait for the shim's lock, which the caller holds. Its file closes
 * through our close, which forgets the fd's kind. */
static int op_rm_bar1(void *ctx, const char *pci, uint64_t *total, uint64_t *available, char *why,
                      size_t why_len)
{
    static const gdu_rm_calls calls = {libc_ioctl, close};
    gdu_rm_bar1 b;
    int rc = gdu_rm_bar1_of(pci, &calls, &b, why, why_len);
    *total = rc == 0 ? b.total : 0;
    *available = rc == 0 ? b.available : 0;
    return rc;
}

static int op_open_gpu_file(void *ctx, const char *pci)
{
    return gdu_nv_device_file_open(NULL, pci);
}

/* Through our close, which forgets the fd's kind. */
static void op_close_file(void *ctx, int fd) { close(fd); }

/* ---- configuration ---- */

static void read_driver_version(char *out, size_t len)
{
    static const char *const files[] = {"/sys/module/nvidia_uvm/version",
                                        "/proc/driver/nvidia/version"};
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
    if (v != NULL && strcmp(v, "info") == 0)
        return GDU_LOG_INFO;
    if (v != NULL && strcmp(v, "debug") == 0)
        return GDU_LOG_DEBUG;
    return GDU_LOG_ERROR;
}

/* A boolean setting (ON/OFF, TRUE/FALSE, YES/NO, 1/0, any case); any other
 * value is the default, silently: the shim is in every process of a
 * pipeline, and a warning from each would bury the output. */
static bool env_flag(const char *name, bool unset_value)
{
    int on;
    gdu_env_bool(name, unset_value, &on);
    return on != 0;
}

/* The handlers find no shim until it is published (a fork in between). */
static void at_fork_prepare(void)
{
    gdu_shim *s = __atomic_load_n(&g_shim, __ATOMIC_ACQUIRE);
    if (s != NULL)
        gdu_shim_fork_prepare(s);
}

static void at_fork_parent(void)
{
    gdu_shim *s = __atomic_load_n(&g_shim, __ATOMIC_ACQUIRE);
    if (s != NULL)
        gdu_shim_fork_parent(s);
}

static void at_fork_child(void)
{
    gdu_shim *s = __atomic_load_n(&g_shim, __ATOMIC_ACQUIRE);
    if (s != NULL)
        gdu_shim_fork_child(s);
    g_report_path[0] = '\0'; /* the parent reports; a child that execs starts afresh */
}

static void init_once(void)
{
    real_ioctl();
    if (!env_flag("GDUNLOCK", true))
        return;
    g_log_level = parse_log_level(getenv("GDUNLOCK_LOG"));
    const char *report = getenv("GDUNLOCK_REPORT");
    if (report != NULL)
        snprintf(g_report_path, sizeof g_report_path, "%s", report);
    const char *fault = getenv("GDUNLOCK_FAULT");
    const char *drop = getenv("GDUNLOCK_TEST_DROP_NATIVE");
    bool strict = drop != NULL && strcasecmp(drop, "strict") == 0;
    char version[512];
    read_driver_version(version, sizeof version);
    gdu_shim_config cfg = {
        .log_level = g_log_level,
        .test_drop_native = strict || env_flag("GDUNLOCK_TEST_DROP_NATIVE", false),
        .test_strict = strict,
        .fault_at = fault != NULL ? strtoull(fault, NULL, 10) : 0,
        .driver_version = version[0] ? version : NULL,
        .pid = (uint32_t)getpid(),
        .rdma_attr_answer = env_flag("GDUNLOCK_RDMA_ATTR", true),
        .rdma_network = env_flag("GDUNLOCK_RDMA", false),
        .test_rdma_attr_zero = !env_flag("GDUNLOCK_TEST_RDMA_ATTR", true),
    };
    gdu_shim_ops ops = {.ioctl = op_ioctl,
                        .fd_kind = op_fd_kind,
                        .read_block = op_read_block,
                        .log = op_log,
                        .bar1_bytes = op_bar1_bytes,
                        .rm_bar1 = op_rm_bar1,
                        .open_gpu_file = op_open_gpu_file,
                        .close_file = op_close_file};
    gdu_shim *s = gdu_shim_new(&cfg, &ops);
    if (s == NULL) {
        log_line(GDU_LOG_ERROR,
                 "gdunlock: out of memory at start; the shim is off in this process");
        return;
    }
    __atomic_store_n(&g_shim, s, __ATOMIC_RELEASE);
    pthread_atfork(at_fork_prepare, at_fork_parent, at_fork_child);
}

static pthread_once_t g_init = PTHREAD_ONCE_INIT;

/* Set up at load, or at the first call if a library's constructor (or the
 * program's) reaches the shim before ours has run. */
gdu_shim *gdu_preload_shim(void)
{
    gdu_shim *s = __atomic_load_n(&g_shim, __ATOMIC_ACQUIRE);
    if (s == NULL) {
        int was = t_in_shim;
        t_in_shim = 1;
        pthread_once(&g_init, init_once);
        t_in_shim = was;
        s = __atomic_load_n(&g_shim, __ATOMIC_ACQUIRE);
    }
    return s;
}

/* gdunlock run learns that the shim loaded in its program (LD_PRELOAD does
 * not reach every program) from a file the first process it loads in makes
 * (src/launch). Taken out of the environment: one process answers. */
static void announce_loaded(void)
{
    const char *mark = getenv("GDUNLOCK_LAUNCH_MARK");
    if (mark == NULL)
        return;
    int fd = open(mark, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
    if (fd >= 0)
        close(fd);
    unsetenv("GDUNLOCK_LAUNCH_MARK");
}

__attribute__((constructor)) static void gdunlock_init(void)
{
    announce_loaded();
    gdu_preload_shim();
}

/* Writes text to path, "%p" replaced by the pid, through a temporary file. */
static void write_report(const char *pattern, const char *text)
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
    int fd = text != NULL ? open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : -1;
    size_t len = text != NULL ? strlen(text) : 0, done = 0;
    while (fd >= 0 && done < len) {
        ssize_t w = write(fd, text + done, len - done);
        if (w <= 0 && errno != EINTR)
            break;
        done += w > 0 ? (size_t)w : 0;
    }
    int saved = text == NULL ? ENOMEM : errno;
    bool ok = fd >= 0 && done == len && close(fd) == 0 && rename(tmp, path) == 0;
    if (!ok) {
        char line[1200];
        snprintf(line, sizeof line, "gdunlock: cannot write the report %s: %s", path,
                 strerror(saved ? saved : errno));
        log_line(GDU_LOG_ERROR, line);
        unlink(tmp);
    }
}

__attribute__((destructor)) static void gdunlock_fini(void)
{
    gdu_shim *s = __atomic_load_n(&g_shim, __ATOMIC_ACQUIRE);
    /* The shim stays in place: libraries finalised after us may still call ioctl. */
    if (s != NULL && g_report_path[0] && gdu_shim_saw_gpu(s)) {
        t_in_shim = 1;
        char *text = gdu_shim_report_json(s, false);
        write_report(g_report_path, text);
        free(text);
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
    gdu_shim *s = gdu_preload_shim();
    if (s == NULL)
        return real_ioctl()(fd, request, arg);
    t_in_shim = 1;
    int r = gdu_shim_ioctl(s, fd, request, arg);
    t_in_shim = 0;
    return r;
}

/* ---- file descriptors: what was a driver fd may be something else next ---- */

GDU_EXPORT int close(int fd)
{
    static int (*real)(int);
    if (real == NULL)
        *(void **)&real = next("close");
    if (fd >= 0 && fd < GDU_FD_CACHE)
        forget_fds(fd, fd);
    return real != NULL ? real(fd) : (int)syscall(SYS_close, fd);
}

GDU_EXPORT int dup2(int oldfd, int newfd)
{
    static int (*real)(int, int);
    if (real == NULL)
        *(void **)&real = next("dup2");
    if (newfd >= 0 && newfd < GDU_FD_CACHE && newfd != oldfd)
        forget_fds(newfd, newfd);
    return real != NULL ? real(oldfd, newfd) : (int)syscall(SYS_dup2, oldfd, newfd);
}

GDU_EXPORT int dup3(int oldfd, int newfd, int flags)
{
    static int (*real)(int, int, int);
    if (real == NULL)
        *(void **)&real = next("dup3");
    if (newfd >= 0 && newfd < GDU_FD_CACHE && newfd != oldfd)
        forget_fds(newfd, newfd);
    return real != NULL ? real(oldfd, newfd, flags) : (int)syscall(SYS_dup3, oldfd, newfd, flags);
}

GDU_EXPORT int close_range(unsigned int first, unsigned int last, int flags)
{
    static int (*real)(unsigned int, unsigned int, int);
    if (real == NULL)
        *(void **)&real = next("close_range");
    int r = real != NULL ? real(first, last, flags)
                         : (int)syscall(436 /* SYS_close_range */, first, last, flags);
    if (r == 0 && first < GDU_FD_CACHE)
        forget_fds((int)first, last >= GDU_FD_CACHE ? GDU_FD_CACHE - 1 : (int)last);
    return r;
}

GDU_EXPORT void closefrom(int lowfd)
{
    static void (*real)(int);
    if (real == NULL)
        *(void **)&real = next("closefrom");
    forget_fds(lowfd, GDU_FD_CACHE - 1);
    if (real != NULL) {
        real(lowfd);
        return;
    }
    DIR *d = opendir("/proc/self/fd"); /* glibc before 2.34 has no closefrom */
    struct dirent *e;
    int self = d != NULL ? dirfd(d) : -1;
    while (d != NULL && (e = readdir(d)) != NULL) {
        int fd = atoi(e->d_name);
        if (e->d_name[0] != '.' && fd >= lowfd && fd != self)
            syscall(SYS_close, fd);
    }
    if (d != NULL)
        closedir(d);
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
    unsigned long long v[9] = {t.registered,         t.unregistered,    t.live,
                               t.already_registered, t.objects_created, t.failures,
                               t.rm_calls,           t.mappings,        t.objects};
    memcpy(out, v, sizeof v);
    return 0;
}

/* What the kernel's lookup model finds for [ptr, ptr + size) now: the rule
 * (0: found), *err its errno, why one line. -2: the shim is not active. */
GDU_EXPORT int gdunlock_test_pin_lookup(unsigned long long ptr, unsigned long long size, int *err,
                                        char *why, size_t why_len)
{
    gdu_shim *s = __atomic_load_n(&g_shim, __ATOMIC_ACQUIRE);
    if (s == NULL)
        return -2;
    return gdu_shim_pin_lookup(s, ptr, size, err, why, why_len);
}

/* The RM handles of the GPU mapping at gpu_va: out[0] client, out[1]
 * memory, out[2] the client's RM fd. 0, -1 (nothing known there), or -2
 * (the shim is not active). */
GDU_EXPORT int gdunlock_test_mapping(unsigned long long gpu_va, unsigned out[3])
{
    gdu_shim *s = __atomic_load_n(&g_shim, __ATOMIC_ACQUIRE);
    if (s == NULL)
        return -2;
    uint32_t client = 0, memory = 0;
    int fd = -1;
    int r = gdu_shim_mapping_handles(s, gpu_va, &client, &memory, &fd);
    out[0] = client;
    out[1] = memory;
    out[2] = (unsigned)fd;
    return r;
}

/* The shim's reader of blocks handed to ioctls (see op_read_block): 0 with
 * n bytes at addr copied to dst, -1 where they cannot be read. */
GDU_EXPORT int gdunlock_test_read_block(const void *addr, void *dst, size_t n)
{
    return op_read_block(NULL, addr, dst, n);
}

/* The report as it stands, with every registration RM holds for the
 * process; caller frees with free(). NULL: the shim is not active. */
GDU_EXPORT char *gdunlock_test_report(void)
{
    gdu_shim *s = __atomic_load_n(&g_shim, __ATOMIC_ACQUIRE);
    return s != NULL ? gdu_shim_report_json(s, true) : NULL;
}
