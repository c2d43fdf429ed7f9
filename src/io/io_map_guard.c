/* Copies out of a file's mapping that survive the file being cut. A read
 * of a mapped page past the file's end is SIGBUS (mmap(2)), and another
 * process may truncate the file between the size check before a gather
 * and its copy, or the storage may fail under a page: the default action
 * kills the whole process from an engine worker, where a pread only comes
 * up short or fails with EIO. So the copy runs under a guard: one
 * process-wide SIGBUS handler, set at the first guarded copy, jumps back
 * out of a fault that lies in the range a thread of this process has
 * armed, and passes every other SIGBUS on to the handler that was there
 * before it (or to the default action), as browsers and mobile runtimes
 * that copy out of mapped archives do. The handler never blocks SIGBUS
 * (SA_NODEFER), so jumping out of it needs no signal mask restored.
 *
 * Code may set its own SIGBUS handler after the engine's (Python's
 * faulthandler.enable(), a test framework around each test). Such a
 * handler often passes on to the one it replaced, ours, so ours never
 * puts itself back in front of it (each would pass to the other for
 * ever): each copy asks which handler is in place (one system call), and
 * where it is not the engine's the gather is read with pread instead. */
#include "io/io_internal.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

typedef struct {
    sigjmp_buf back;
    const char *lo, *hi;
} map_guard;

/* The range this thread is copying from, while it copies. */
static _Thread_local map_guard *volatile armed;

/* The handler the engine's passes on to: a new one is written to the slot
 * not in use, then made current, so that a handler running meanwhile
 * reads a whole one. Written under lock. */
static struct sigaction previous[2];
static atomic_int current;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t first_copy = PTHREAD_ONCE_INIT;

/* The default action: a fault (si_code > 0, which the kernel never lets a
 * process ignore) happens again on return and kills; a signal sent is
 * sent again. */
static void default_action(int sig, const siginfo_t *info)
{
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    if (info->si_code <= 0)
        raise(sig);
}

static void on_sigbus(int sig, siginfo_t *info, void *ctx)
{
    map_guard *g = armed;
    const char *at = info->si_addr;
    if (g != NULL && info->si_code > 0 && at >= g->lo && at < g->hi) {
        armed = NULL;
        siglongjmp(g->back, 1);
    }
    /* Not ours: where it would have gone without us. */
    const struct sigaction *p = &previous[atomic_load(&current)];
    if (p->sa_flags & SA_SIGINFO)
        p->sa_sigaction(sig, info, ctx);
    else if (p->sa_handler == SIG_DFL || (p->sa_handler == SIG_IGN && info->si_code > 0))
        default_action(sig, info);
    else if (p->sa_handler != SIG_IGN) /* SIG_IGN: a signal sent is ignored, as before */
        p->sa_handler(sig);
}

static bool is_ours(const struct sigaction *a)
{
    return (a->sa_flags & SA_SIGINFO) && a->sa_sigaction == on_sigbus;
}

void gdu_io_map_guard_take_over(void)
{
    struct sigaction now, sa = {.sa_sigaction = on_sigbus,
                                .sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK | SA_RESTART};
    sigemptyset(&sa.sa_mask);
    pthread_mutex_lock(&lock);
    if (sigaction(SIGBUS, NULL, &now) == 0 && !is_ours(&now)) {
        int next = 1 - atomic_load(&current);
        previous[next] = now;
        atomic_store(&current, next);
        sigaction(SIGBUS, &sa, NULL);
    }
    pthread_mutex_unlock(&lock);
}

int gdu_io_map_guard(const void *lo, size_t len, void (*copy)(void *arg), void *arg)
{
    pthread_once(&first_copy, gdu_io_map_guard_take_over);
    struct sigaction now;
    if (sigaction(SIGBUS, NULL, &now) != 0 || !is_ours(&now))
        return -ENOTSUP;
    map_guard g = {.lo = lo, .hi = (const char *)lo + len};
    if (sigsetjmp(g.back, 0) != 0)
        return -EFAULT; /* the handler disarmed it */
    armed = &g;
    atomic_signal_fence(memory_order_seq_cst);
    copy(arg);
    atomic_signal_fence(memory_order_seq_cst);
    armed = NULL;
    return 0;
}
