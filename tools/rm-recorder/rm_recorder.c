/* LD_PRELOAD recorder of the NVIDIA RM and UVM ioctls a process issues.
 * Writes one JSON object per ioctl (see README.md) to $GDU_TRACE. Buffers are
 * read with process_vm_readv on our own pid, so a parameter block shorter
 * than the size we ask for yields a short read instead of a crash. */
#include <dlfcn.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

enum { RM_ALLOC = 0x2B, RM_CONTROL = 0x2A };
enum { UVM_MAP_EXTERNAL_ALLOCATION = 33, UVM_FREE = 34 };
enum { MAX_PARAMS = 1 << 16, ALLOC_PARAMS_GUESS = 256, UVM_UNKNOWN_BYTES = 64 };

typedef int (*ioctl_fn)(int, unsigned long, ...);
static ioctl_fn real_ioctl;
static FILE *trace;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long seq;
static __thread int busy;

static void open_trace(void)
{
    real_ioctl = (ioctl_fn)dlsym(RTLD_NEXT, "ioctl");
    const char *path = getenv("GDU_TRACE");
    char fallback[64];
    if (path == NULL) {
        snprintf(fallback, sizeof fallback, "/tmp/gdu-trace-%d.jsonl", (int)getpid());
        path = fallback;
    }
    trace = fopen(path, "a");
}

static size_t read_self(uint64_t addr, void *dst, size_t len)
{
    if (addr == 0 || len == 0)
        return 0;
    struct iovec local = {dst, len}, remote = {(void *)(uintptr_t)addr, len};
    ssize_t n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
    return n < 0 ? 0 : (size_t)n;
}

static json_t *hex(const void *buf, size_t len)
{
    static const char digits[] = "0123456789abcdef";
    char *s = malloc(len * 2 + 1);
    if (s == NULL)
        return json_null();
    for (size_t i = 0; i < len; i++) {
        s[2 * i] = digits[((const uint8_t *)buf)[i] >> 4];
        s[2 * i + 1] = digits[((const uint8_t *)buf)[i] & 15];
    }
    s[len * 2] = '\0';
    json_t *j = json_string(s);
    free(s);
    return j;
}

struct snapshot {
    uint8_t *args;
    size_t args_len;
    uint8_t *params;
    size_t params_len;
};

/* Which secondary buffer an RM escape points to, and how long it is. */
static void params_of(int is_rm, unsigned nr, const uint8_t *args, size_t args_len, uint64_t *ptr,
                      size_t *len)
{
    *ptr = 0;
    *len = 0;
    if (!is_rm)
        return;
    if (nr == RM_ALLOC && (args_len == 32 || args_len == 48)) {
        memcpy(ptr, args + 16, 8);
        uint32_t size = 0;
        if (args_len == 48)
            memcpy(&size, args + 32, 4);
        else
            memcpy(&size, args + 24, 4);
        /* libcuda passes paramsSize 0: take a window, the safe read trims it. */
        *len = size ? size : ALLOC_PARAMS_GUESS;
    } else if (nr == RM_CONTROL && args_len == 32) {
        uint32_t size;
        memcpy(ptr, args + 16, 8);
        memcpy(&size, args + 24, 4);
        *len = size < MAX_PARAMS ? size : MAX_PARAMS;
    }
}

static void take(struct snapshot *s, int is_rm, unsigned nr, void *arg, size_t args_len)
{
    s->args = malloc(args_len ? args_len : 1);
    s->args_len = s->args ? read_self((uintptr_t)arg, s->args, args_len) : 0;
    uint64_t ptr;
    size_t len;
    params_of(is_rm, nr, s->args, s->args_len, &ptr, &len);
    s->params = len ? malloc(len) : NULL;
    s->params_len = s->params ? read_self(ptr, s->params, len) : 0;
}

static void release(struct snapshot *s)
{
    free(s->args);
    free(s->params);
}

static size_t uvm_size(unsigned long req)
{
    switch (req) {
    case UVM_MAP_EXTERNAL_ALLOCATION:
        return 9264; /* the 580 layout; older drivers' block is 1200 bytes */
    case UVM_FREE:
        return 24;
    default:
        return UVM_UNKNOWN_BYTES;
    }
}

int ioctl(int fd, unsigned long request, ...)
{
    va_list ap;
    va_start(ap, request);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    if (real_ioctl == NULL) {
        pthread_mutex_lock(&lock);
        if (real_ioctl == NULL)
            open_trace();
        pthread_mutex_unlock(&lock);
    }
    char link[64], path[128] = "";
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = busy ? -1 : readlink(link, path, sizeof path - 1);
    if (n <= 0 || strncmp(path, "/dev/nvidia", 11) != 0 || trace == NULL)
        return real_ioctl(fd, request, arg);
    path[n] = '\0';
    busy = 1;
    int is_uvm = strcmp(path, "/dev/nvidia-uvm") == 0;
    int is_rm = !is_uvm && _IOC_TYPE(request) == 'F';
    unsigned nr = _IOC_NR(request);
    size_t args_len = is_uvm ? uvm_size(request) : _IOC_SIZE(request);
    struct snapshot before, after;
    take(&before, is_rm, nr, arg, args_len);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int ret = real_ioctl(fd, request, arg);
    int saved = errno;
    take(&after, is_rm, nr, arg, args_len);

    json_t *o = json_object();
    pthread_mutex_lock(&lock);
    json_object_set_new(o, "seq", json_integer((json_int_t)seq++));
    json_object_set_new(o, "t_ns", json_integer((json_int_t)ts.tv_sec * 1000000000 + ts.tv_nsec));
    json_object_set_new(o, "tid", json_integer((json_int_t)syscall(SYS_gettid)));
    json_object_set_new(o, "fd", json_integer(fd));
    json_object_set_new(o, "dev", json_string(path));
    json_object_set_new(o, "kind", json_string(is_uvm ? "uvm" : is_rm ? "rm" : "other"));
    char req[32];
    snprintf(req, sizeof req, "0x%lx", request);
    json_object_set_new(o, "req", json_string(req));
    json_object_set_new(o, "nr", json_integer(is_uvm ? (json_int_t)request : nr));
    json_object_set_new(o, "ret", json_integer(ret));
    json_object_set_new(o, "errno", json_integer(ret < 0 ? saved : 0));
    json_object_set_new(o, "args_in", hex(before.args, before.args_len));
    json_object_set_new(o, "args_out", hex(after.args, after.args_len));
    if (before.params_len || after.params_len) {
        json_object_set_new(o, "params_in", hex(before.params, before.params_len));
        json_object_set_new(o, "params_out", hex(after.params, after.params_len));
    }
    json_dumpf(o, trace, JSON_COMPACT);
    fputc('\n', trace);
    fflush(trace);
    pthread_mutex_unlock(&lock);
    json_decref(o);
    release(&before);
    release(&after);
    busy = 0;
    errno = saved;
    return ret;
}
