/* shim_seccomp_run SHIM PROG [ARGS...]: runs PROG with SHIM preloaded under a
 * seccomp filter that kills the process on process_vm_readv and
 * process_vm_writev, as sandboxes that kill on system calls they do not know
 * do (browsers, container runtimes, sandboxed builds).
 * shim_seccomp_run --selftest: installs the filter and calls process_vm_readv,
 * which must end it with SIGSYS (so the filter is known to bite).
 * Exit 127 when the filter or the exec cannot be set up. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#if defined(__x86_64__)
#define FILTER_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define FILTER_ARCH AUDIT_ARCH_AARCH64
#else
#error "no seccomp architecture for this machine"
#endif

static int install_filter(void)
{
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, FILTER_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_writev, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
    };
    struct sock_fprog prog = {sizeof code / sizeof code[0], code};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
        fprintf(stderr, "shim_seccomp_run: cannot install the filter: %s\n", strerror(errno));
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--selftest") == 0) {
        if (install_filter() != 0)
            return 127;
        int a = 1, b = 0;
        struct iovec local = {&b, sizeof b}, remote = {&a, sizeof a};
        process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
        fprintf(stderr, "shim_seccomp_run: process_vm_readv was not stopped by the filter\n");
        return 1;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: shim_seccomp_run SHIM PROG [ARGS...] | --selftest\n");
        return 127;
    }
    if (setenv("LD_PRELOAD", argv[1], 1) != 0 || install_filter() != 0)
        return 127;
    execvp(argv[2], argv + 2);
    fprintf(stderr, "shim_seccomp_run: cannot run %s: %s\n", argv[2], strerror(errno));
    return 127;
}
