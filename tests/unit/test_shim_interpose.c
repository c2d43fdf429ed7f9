/* libgdunlock.so preloaded into this test (ctest sets LD_PRELOAD): the real
 * interposer on a machine without NVIDIA devices. Ordinary ioctls keep their
 * results and errno, requests that look like RM escapes on other files are
 * passed through untouched, the test queries answer, fork works. */
#include "driverabi/nv_escape.h"
#include "driverabi/nvos.h"

#include <dirent.h>
#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_runtime.h"

static void preloaded(void **state)
{
    void *sym = dlsym(RTLD_DEFAULT, "gdunlock_test_totals");
    assert_non_null(sym); /* ctest preloads the shim */
    Dl_info info;
    assert_true(dladdr((void *)ioctl, &info) != 0);
    assert_non_null(strstr(info.dli_fname, "libgdunlock.so"));
}

static void ordinary_ioctls(void **state)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    assert_int_equal(write(p[1], "hello", 5), 5);
    int n = -1;
    assert_int_equal(ioctl(p[0], FIONREAD, &n), 0);
    assert_int_equal(n, 5);
    errno = 0;
    assert_int_equal(ioctl(-1, FIONREAD, &n), -1);
    assert_int_equal(errno, EBADF);
    /* An RM_FREE-shaped request on a pipe: the kernel says ENOTTY, the block is untouched. */
    gdu_nvos00 block = {.hRoot = 1, .hObjectParent = 2, .hObjectOld = 3, .status = 0x77};
    errno = 0;
    assert_int_equal(ioctl(p[0], gdu_nv_ioctl_request(GDU_NV_ESC_RM_FREE, sizeof block), &block),
                     -1);
    assert_int_equal(errno, ENOTTY);
    assert_int_equal(block.status, 0x77);
    assert_int_equal(block.hObjectOld, 3);
    close(p[0]);
    close(p[1]);
}

static void test_queries(void **state)
{
    int (*totals)(unsigned long long *);
    int (*probe)(unsigned long long, unsigned *);
    *(void **)&totals = dlsym(RTLD_DEFAULT, "gdunlock_test_totals");
    *(void **)&probe = dlsym(RTLD_DEFAULT, "gdunlock_test_probe_registered");
    unsigned long long t[9];
    memset(t, 0xff, sizeof t);
    assert_int_equal(totals(t), 0);
    for (int i = 0; i < 9; i++)
        assert_int_equal(t[i], 0);
    unsigned st = 0;
    assert_int_equal(probe(0x7f0000000000ull, &st), -1); /* nothing mapped */
}

/* dlsym through the shim keeps its meaning: RTLD_NEXT from this program
 * finds the next definition after the program (the shim's own ioctl), as
 * libc's dlsym does for the caller; a tail jump, not a call from the shim,
 * or it would be libc's. */
static void dlsym_keeps_the_caller(void **state)
{
    Dl_info info;
    void *next_ioctl = dlsym(RTLD_NEXT, "ioctl");
    assert_non_null(next_ioctl);
    assert_true(dladdr(next_ioctl, &info) != 0);
    assert_non_null(strstr(info.dli_fname, "libgdunlock.so"));
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(libc);
    void *libc_ioctl = dlsym(libc, "ioctl");
    assert_true(dladdr(libc_ioctl, &info) != 0);
    assert_non_null(strstr(info.dli_fname, "libc.so"));
    assert_null(dlsym(libc, "no_such_symbol_anywhere"));
    dlclose(libc);
}

/* What a GPUDirect RDMA attribute reads through the shim here: the fake
 * libcuda's 1, or 0 under the GeForce stand-in (GDUNLOCK_TEST_RDMA_ATTR=0,
 * the ctest test_shim_interpose_standin): no driver, so nothing the shim
 * registered, so no 1 of its own. */
static int libcuda_answer(void)
{
    const char *z = getenv("GDUNLOCK_TEST_RDMA_ATTR");
    return z != NULL && strcmp(z, "0") == 0 ? 0 : 1;
}

/* libcufile reaches libcuda, and loaders reach libcufile, by dlsym on a
 * handle: for those names the shim hands out its own function, which calls
 * the library's and returns its answer. */
static void dlsym_hands_out_the_hooks(void **state)
{
    void *cuda = dlopen(FAKE_LIBCUDA, RTLD_NOW | RTLD_LOCAL);
    void *cufile = dlopen(FAKE_LIBCUFILE, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(cuda);
    assert_non_null(cufile);
    Dl_info info;
    int (*attr)(int *, int, int);
    *(void **)&attr = dlsym(cuda, "cuDeviceGetAttribute");
    assert_true(dladdr((void *)attr, &info) != 0);
    assert_non_null(strstr(info.dli_fname, "libgdunlock.so"));
    int v = -1;
    assert_int_equal(attr(&v, 116, 0), 0);
    assert_int_equal(v, libcuda_answer()); /* no driver here: the shim does not act */
    /* cuGetProcAddress_v2 asked for "cuGetProcAddress" as of CUDA 12 hands
     * back libcuda's five-argument function under the old name (NCCL and
     * cudart call it so): the shim's stand-in for it must take five too. */
    int (*gpa2)(const char *, void **, int, unsigned long long, int *);
    *(void **)&gpa2 = dlsym(cuda, "cuGetProcAddress_v2");
    assert_true(dladdr((void *)gpa2, &info) != 0);
    assert_non_null(strstr(info.dli_fname, "libgdunlock.so"));
    int (*gpa)(const char *, void **, int, unsigned long long, int *) = NULL;
    int status = -1;
    assert_int_equal(gpa2("cuGetProcAddress", (void **)&gpa, 12000, 0, &status), 0);
    assert_int_equal(status, 0);
    void *pfn = NULL;
    status = -1;
    assert_int_equal(gpa("cuDeviceGetAttribute", &pfn, 12000, 0, &status), 0);
    assert_int_equal(status, 0); /* the fifth argument reached libcuda */
    assert_ptr_equal(pfn, (void *)attr);
    /* Each reached the function it stands for: the four-argument export
     * stays four-argument. */
    unsigned *calls = dlsym(cuda, "fake_cuda_get_proc_calls");
    assert_non_null(calls);
    unsigned v1 = calls[0], v2 = calls[1];
    assert_int_equal(v2, 2);
    int (*gpa1)(const char *, void **, int, unsigned long long);
    *(void **)&gpa1 = dlsym(cuda, "cuGetProcAddress");
    pfn = NULL;
    assert_int_equal(gpa1("cuDeviceGetAttribute", &pfn, 11030, 0), 0);
    assert_ptr_equal(pfn, (void *)attr);
    assert_int_equal(calls[0], v1 + 1);
    assert_int_equal(calls[1], v2);
    void *other = dlsym(cuda, "cuMemAlloc_v2");
    assert_true(dladdr(other, &info) != 0);
    assert_null(strstr(info.dli_fname, "libgdunlock.so")); /* every other name: the library's own */
    struct {
        int err, cu_err;
    } (*reg)(const void *, size_t, int);
    *(void **)&reg = dlsym(cufile, "cuFileBufRegister");
    assert_true(dladdr((void *)reg, &info) != 0);
    assert_non_null(strstr(info.dli_fname, "libgdunlock.so"));
    static char buf[1 << 16];
    assert_int_equal(reg(buf, sizeof buf, 0).err, 0);
    char *(*report)(void);
    *(void **)&report = dlsym(RTLD_DEFAULT, "gdunlock_test_report");
    char *text = report();
    assert_non_null(text);
    assert_non_null(strstr(text, "\"registered\": 1"));
    assert_non_null(strstr(text, "\"kernel_lookup\": \"not-registered\""));
    /* CUDA (the fake) does not know the buffer: host memory, and said so. */
    assert_non_null(strstr(text, "\"memory_kind\": \"host\""));
    assert_non_null(strstr(text, "host memory: nvidia-fs pins only GPU memory"));
    free(text);
    dlclose(cufile);
    dlclose(cuda);
}

/* The reader of blocks handed to ioctls before they run: what can be read is
 * copied, a block touching a page that cannot be read is refused, errno is
 * left as it was. check_shim_seccomp.sh runs this under a filter that kills
 * on process_vm_readv. */
static void reads_blocks_safely(void **state)
{
    int (*read_block)(const void *, void *, size_t);
    *(void **)&read_block = dlsym(RTLD_DEFAULT, "gdunlock_test_read_block");
    assert_non_null(read_block);
    size_t page = (size_t)getpagesize();
    unsigned char *m =
        mmap(NULL, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(m != MAP_FAILED);
    for (size_t i = 0; i < page; i++)
        m[i] = (unsigned char)(i * 7);
    assert_int_equal(mprotect(m + page, page, PROT_NONE), 0);
    assert_int_equal(munmap(m + 2 * page, page), 0);
    unsigned char out[64];
    errno = 1234;
    assert_int_equal(read_block(m + page - sizeof out, out, sizeof out), 0);
    assert_memory_equal(out, m + page - sizeof out, sizeof out);
    assert_int_equal(read_block(m + 5, out, 3), 0); /* not word aligned */
    assert_int_equal(out[0], 35);
    if (RUNNING_ON_VALGRIND) { /* memcheck reports a system call given unreadable memory */
        munmap(m, 2 * page);
        return;
    }
    assert_int_equal(read_block(m + page - 8, out, 16), -1); /* runs into PROT_NONE */
    assert_int_equal(read_block(m + page + 64, out, 8), -1);
    assert_int_equal(read_block(m + 2 * page, out, 8), -1); /* unmapped */
    assert_int_equal(read_block(NULL, out, 8), -1);
    assert_int_equal(read_block((void *)(uintptr_t)-8, out, 16), -1); /* wraps */
    assert_int_equal(errno, 1234);
    munmap(m, 2 * page);
}

typedef int (*pointer_attr_fn)(void *, int, unsigned long long);
typedef int (*pointer_attrs_fn)(unsigned, int *, void **, unsigned long long);

static void assert_shims(const void *f)
{
    Dl_info info;
    assert_non_null(f);
    assert_true(dladdr(f, &info) != 0);
    assert_non_null(strstr(info.dli_fname, "libgdunlock.so"));
}

/* A caller's buffer for attribute 15, eight bytes of 0xa5 before the call:
 * what libcuda and the shim wrote into it shows byte by byte. */
typedef union {
    unsigned char b[8];
    unsigned long long all;
} answer_buf;

static void fill(answer_buf *a) { memset(a->b, 0xa5, sizeof a->b); }

/* The four bytes libcuda writes (an unsigned int) hold want; the rest is as it was. */
static void assert_answer(const answer_buf *a, unsigned want)
{
    unsigned got;
    memcpy(&got, a->b, sizeof got);
    assert_int_equal(got, want);
    for (size_t k = sizeof got; k < sizeof a->b; k++)
        assert_int_equal(a->b[k], 0xa5);
}

static void assert_untouched(const answer_buf *a) { assert_true(a->all == 0xa5a5a5a5a5a5a5a5ull); }

/* The function name resolves to through each route libcufile, NCCL's cudart
 * and others take: dlsym on libcuda's handle, cuGetProcAddress_v2 and the
 * four-argument cuGetProcAddress, the exported name. */
static void four_routes(void *cuda, const char *name, void **routes)
{
    routes[0] = dlsym(cuda, name);
    int (*gpa2)(const char *, void **, int, unsigned long long, int *);
    int (*gpa1)(const char *, void **, int, unsigned long long);
    *(void **)&gpa2 = dlsym(cuda, "cuGetProcAddress_v2");
    *(void **)&gpa1 = dlsym(cuda, "cuGetProcAddress");
    int status = -1;
    assert_int_equal(gpa2(name, &routes[1], 12000, 0, &status), 0);
    assert_int_equal(gpa1(name, &routes[2], 11030, 0), 0);
    routes[3] = dlsym(RTLD_DEFAULT, name);
}

/* CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE (15) on every route
 * libcufile and others take: dlsym on the handle, cuGetProcAddress and its
 * _v2, cuPointerGetAttributes, the exported name. Each reaches the shim,
 * which gives libcuda's answer (the stand-in's 0) for memory it did not
 * register, in the bytes libcuda wrote; libcuda's errors (memory CUDA does
 * not know, another attribute) pass with the caller's buffer untouched, and
 * cuPointerGetAttributes' defaults for unknown memory stand. */
static void pointer_attribute_routes(void **state)
{
    void *cuda = dlopen(FAKE_LIBCUDA, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(cuda);
    int (*alloc)(unsigned long long *, size_t);
    int (*release)(unsigned long long);
    *(void **)&alloc = dlsym(cuda, "cuMemAlloc_v2");
    *(void **)&release = dlsym(cuda, "cuMemFree_v2");
    unsigned long long dev = 0;
    assert_int_equal(alloc(&dev, 1 << 20), 0);
    static char host_buffer[4096];
    unsigned long long host = (unsigned long long)(uintptr_t)host_buffer;
    pointer_attr_fn routes[4];
    four_routes(cuda, "cuPointerGetAttribute", (void **)routes);
    int (*gpa2)(const char *, void **, int, unsigned long long, int *);
    *(void **)&gpa2 = dlsym(cuda, "cuGetProcAddress_v2");
    int status = -1;
    answer_buf a;
    for (int i = 0; i < 4; i++) {
        assert_shims((void *)routes[i]);
        fill(&a);
        assert_int_equal(routes[i](a.b, 15, dev), 0);
        assert_answer(&a, (unsigned)libcuda_answer());
        fill(&a);
        assert_int_equal(routes[i](a.b, 15, host), 1); /* CUDA_ERROR_INVALID_VALUE */
        assert_untouched(&a);
        fill(&a);
        assert_int_equal(routes[i](a.b, 2, dev), 1); /* another attribute: libcuda's error */
        assert_untouched(&a);
    }
    pointer_attrs_fn many[2];
    *(void **)&many[0] = dlsym(cuda, "cuPointerGetAttributes");
    assert_int_equal(gpa2("cuPointerGetAttributes", (void **)&many[1], 12000, 0, &status), 0);
    for (int i = 0; i < 2; i++) {
        assert_shims((void *)many[i]);
        int attrs[2] = {15, 15};
        answer_buf x, y;
        void *data[2] = {x.b, y.b};
        fill(&x);
        fill(&y);
        assert_int_equal(many[i](2, attrs, data, dev), 0);
        assert_answer(&x, (unsigned)libcuda_answer());
        assert_answer(&y, (unsigned)libcuda_answer());
        fill(&x);
        fill(&y);
        assert_int_equal(many[i](2, attrs, data, host), 0); /* no error: default values */
        assert_answer(&x, 0);
        assert_answer(&y, 0);
    }
    release(dev);
    dlclose(cuda);
}

/* CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED (124), NCCL's DMA-BUF gate
 * (init.cc:355-371 of NCCL 2.28.9), on every route NCCL's cudart and others
 * take: libcuda's 1, or under the GeForce stand-in 0, since GeForce libcuda
 * does not advertise it (without GDUNLOCK_RDMA the shim makes no dma-buf;
 * docs/rdma-model.md). Another attribute passes as libcuda gave it. */
static void dma_buf_attribute_routes(void **state)
{
    void *cuda = dlopen(FAKE_LIBCUDA, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(cuda);
    typedef int (*attr_fn)(int *, int, int);
    attr_fn routes[4];
    four_routes(cuda, "cuDeviceGetAttribute", (void **)routes);
    for (int i = 0; i < 4; i++) {
        assert_shims((void *)routes[i]);
        int v = -1;
        assert_int_equal(routes[i](&v, 124, 0), 0);
        assert_int_equal(v, libcuda_answer());
        v = -1;
        assert_int_equal(routes[i](&v, 16, 0), 0); /* multiprocessor count: untouched */
        assert_int_equal(v, 1);
    }
    dlclose(cuda);
}

static int open_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    if (d != NULL)
        closedir(d);
    return n;
}

/* cuMemGetHandleForAddressRange for a dma-buf (NCCL's DMA-BUF route,
 * net.cc:953), on every route: libcuda's descriptor passes as it is; under
 * the GeForce stand-in it is closed and refused with 801, as GeForce libcuda
 * refuses it (without GDUNLOCK_RDMA the shim makes none of its own; with it
 * here, no GPU memory is tracked, so none either). libcufile's PCIe-mapped
 * probe (flags 1) gets libcuda's refusal. */
static void dma_buf_handle_routes(void **state)
{
    void *cuda = dlopen(FAKE_LIBCUDA, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(cuda);
    typedef int (*range_fn)(void *, unsigned long long, size_t, int, unsigned long long);
    range_fn routes[4];
    four_routes(cuda, "cuMemGetHandleForAddressRange", (void **)routes);
    for (int i = 0; i < 4; i++) {
        assert_shims((void *)routes[i]);
        int before = open_fds();
        int fd = -1;
        int r = routes[i](&fd, 0x7f0000200000ull, 2 << 20, 1, 0);
        if (libcuda_answer() == 1) {
            assert_int_equal(r, 0);
            assert_true(fd >= 0);
            close(fd);
        } else {
            assert_int_equal(r, 801);
        }
        assert_int_equal(open_fds(), before); /* nothing left open by the shim */
        assert_int_equal(routes[i](&fd, 0x7f0000200000ull, 65536, 1, 1), 801);
    }
    dlclose(cuda);
}

/* The span of the loaded object that holds p: its lowest and highest address. */
struct span {
    const void *p;
    uintptr_t lo, hi;
};

static int find_span(struct dl_phdr_info *info, size_t size, void *data)
{
    struct span *sp = data;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t a = info->dlpi_addr + ph->p_vaddr;
        lo = a < lo ? a : lo;
        hi = a + ph->p_memsz > hi ? a + ph->p_memsz : hi;
    }
    if ((uintptr_t)sp->p < lo || (uintptr_t)sp->p >= hi)
        return 0;
    sp->lo = lo;
    sp->hi = hi;
    return 1;
}

typedef int (*device_attr_fn)(int *, int, int);

/* libcuda unloaded and loaded again at another address (its old place held
 * here): the hooks call the new one, both one dlsym hands out again and one
 * no route handed out since (the exported name, cuFileBufRegister's look at
 * the buffer). The shim once kept the first address it was given and jumped
 * into the unmapped library. */
static void hooks_follow_a_reloaded_library(void **state)
{
    void *cuda = dlopen(FAKE_LIBCUDA, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(cuda);
    device_attr_fn attr;
    pointer_attr_fn pointer;
    *(void **)&attr = dlsym(cuda, "cuDeviceGetAttribute");
    *(void **)&pointer = dlsym(cuda, "cuPointerGetAttribute");
    int (*alloc)(unsigned long long *, size_t);
    int (*release)(unsigned long long);
    *(void **)&alloc = dlsym(cuda, "cuMemAlloc_v2");
    *(void **)&release = dlsym(cuda, "cuMemFree_v2");
    unsigned long long dev = 0;
    assert_int_equal(alloc(&dev, 1 << 16), 0);
    int v = -1;
    assert_int_equal(attr(&v, 116, 0), 0);
    assert_int_equal(pointer(&v, 15, dev), 0);
    release(dev);
    struct span sp = {.p = dlsym(cuda, "cuMemAlloc_v2")};
    assert_int_equal(dl_iterate_phdr(find_span, &sp), 1);
    dlclose(cuda);
    assert_null(dlopen(FAKE_LIBCUDA, RTLD_NOW | RTLD_NOLOAD)); /* unloaded */
    size_t page = (size_t)getpagesize();
    uintptr_t lo = sp.lo & ~(page - 1), hi = (sp.hi + page - 1) & ~(page - 1);
    void *hold = mmap((void *)lo, hi - lo, PROT_NONE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    assert_ptr_equal(hold, (void *)lo);
    cuda = dlopen(FAKE_LIBCUDA, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(cuda);
    *(void **)&attr = dlsym(cuda, "cuDeviceGetAttribute");
    assert_shims((void *)attr);
    v = -1;
    assert_int_equal(attr(&v, 116, 0), 0);
    assert_int_equal(v, libcuda_answer());
    void *cufile = dlopen(FAKE_LIBCUFILE, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(cufile);
    struct {
        int err, cu_err;
    } (*reg)(const void *, size_t, int), (*dereg)(const void *);
    *(void **)&reg = dlsym(cufile, "cuFileBufRegister");
    *(void **)&dereg = dlsym(cufile, "cuFileBufDeregister");
    static char buf[4096];
    assert_int_equal(reg(buf, sizeof buf, 0).err, 0); /* asks libcuda what buf is */
    assert_int_equal(dereg(buf).err, 0);
    dlclose(cufile);
    *(void **)&pointer = dlsym(RTLD_DEFAULT, "cuPointerGetAttribute"); /* the shim's export */
    assert_shims((void *)pointer);
    *(void **)&alloc = dlsym(cuda, "cuMemAlloc_v2");
    *(void **)&release = dlsym(cuda, "cuMemFree_v2");
    assert_int_equal(alloc(&dev, 1 << 16), 0); /* known to the new load */
    v = -1;
    assert_int_equal(pointer(&v, 15, dev), 0);
    assert_int_equal(v, libcuda_answer());
    release(dev);
    dlclose(cuda);
    munmap(hold, hi - lo);
}

/* traces_libcufile points stderr at a file; the teardown puts it back also
 * where the test failed or crashed half way (cmocka jumps out of it), or
 * every later message of the run, its own failure first, went to that file. */
static int save_stderr(void **state)
{
    static int saved;
    saved = dup(STDERR_FILENO);
    *state = &saved;
    return saved >= 0 ? 0 : -1;
}

static int restore_stderr(void **state)
{
    int saved = *(int *)*state;
    int r = dup2(saved, STDERR_FILENO);
    close(saved);
    return r == STDERR_FILENO ? 0 : -1;
}

/* At debug log level the shim traces what a library named libcufile*
 * resolves from libcuda and the attributes it asks (ctest
 * test_shim_interpose_trace); at other levels nothing is written. */
static void traces_libcufile(void **state)
{
    const char *level = getenv("GDUNLOCK_LOG");
    bool debug = level != NULL && strcmp(level, "debug") == 0;
    char path[] = "/tmp/gdu-test-trace-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    int saved = *(int *)*state;
    dup2(fd, STDERR_FILENO);
    void *cuda = dlopen(FAKE_LIBCUDA, RTLD_NOW | RTLD_LOCAL);
    int (*alloc)(unsigned long long *, size_t);
    *(void **)&alloc = dlsym(cuda, "cuMemAlloc_v2");
    unsigned long long dev = 0;
    assert_int_equal(alloc(&dev, 1 << 16), 0);
    void *probe = dlopen(TRACE_PROBE, RTLD_NOW | RTLD_LOCAL);
    int (*ask)(const char *, unsigned long long, int[3]);
    *(void **)&ask = probe != NULL ? dlsym(probe, "trace_probe_ask") : NULL;
    int out[3] = {-1, -1, -1};
    int r = ask != NULL ? ask(FAKE_LIBCUDA, dev, out) : -2;
    dup2(saved, STDERR_FILENO);
    assert_int_equal(r, 0);
    assert_int_equal(out[0], libcuda_answer());
    assert_int_equal(out[1], libcuda_answer());
    assert_int_equal(out[2], 801); /* the fake's refusal, passed on untouched */
    char text[8192];
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    close(fd);
    text[n > 0 ? n : 0] = '\0';
    if (!debug) {
        assert_string_equal(text, "");
    } else {
        assert_non_null(strstr(text, "gdunlock: libcufile_trace_probe.so resolves "
                                     "cuPointerGetAttribute through dlsym: the shim's hook"));
        assert_non_null(strstr(text, "libcufile_trace_probe.so calls cuDeviceGetAttribute(116) "
                                     "of device 0: status 0"));
        char want[128];
        snprintf(want, sizeof want,
                 "libcufile_trace_probe.so calls cuPointerGetAttribute(15) of 0x%llx: status 0, "
                 "value %d",
                 dev, libcuda_answer());
        assert_non_null(strstr(text, want));
        assert_non_null(strstr(text, "gdunlock: libcufile_trace_probe.so resolves "
                                     "cuMemGetHandleForAddressRange through dlsym: the shim's "
                                     "hook"));
        snprintf(want, sizeof want,
                 "libcufile_trace_probe.so calls cuMemGetHandleForAddressRange(0x%llx, 65536 "
                 "bytes, handle type 1, flags 0x1): status 801",
                 dev);
        assert_non_null(strstr(text, want));
    }
    dlclose(probe);
    int (*release)(unsigned long long);
    *(void **)&release = dlsym(cuda, "cuMemFree_v2");
    release(dev);
    dlclose(cuda);
}

static void fork_works(void **state)
{
    pid_t pid = fork();
    if (pid == 0) {
        int n;
        _exit(ioctl(-1, FIONREAD, &n) == -1 && errno == EBADF ? 3 : 4);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 3);
    int n;
    assert_int_equal(ioctl(-1, FIONREAD, &n), -1); /* the parent's shim still answers */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(preloaded),
        cmocka_unit_test(ordinary_ioctls),
        cmocka_unit_test(test_queries),
        cmocka_unit_test(fork_works),
        cmocka_unit_test(reads_blocks_safely),
        cmocka_unit_test(pointer_attribute_routes),
        cmocka_unit_test(dma_buf_attribute_routes),
        cmocka_unit_test(dma_buf_handle_routes),
        cmocka_unit_test_setup_teardown(traces_libcufile, save_stderr, restore_stderr),
        cmocka_unit_test(dlsym_keeps_the_caller),
        cmocka_unit_test(dlsym_hands_out_the_hooks),
        cmocka_unit_test(hooks_follow_a_reloaded_library),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
