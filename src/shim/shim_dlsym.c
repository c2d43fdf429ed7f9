/* libgdunlock.so's dlsym: the stub that stands for libc's (x86-64), and the
 * way to libc's own. The stub tail-jumps to libc's dlsym for RTLD_DEFAULT
 * and RTLD_NEXT, whose meaning depends on the caller's return address, and
 * hands every explicit handle to gdu_dlsym_handle (shim_cuda_hooks.c), which
 * puts the shim's CUDA and cuFile hooks in place of a few names. */
#include "shim/shim_preload.h"

#include <dlfcn.h>

#define GDU_HIDDEN __attribute__((visibility("hidden")))

GDU_HIDDEN void *(*gdu_real_dlsym)(void *, const char *);

/* Called by the dlsym stub before its first use. */
GDU_HIDDEN void *gdu_resolve_real_dlsym(void)
{
    void *f = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (f == NULL)
        f = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    __atomic_store_n((void **)&gdu_real_dlsym, f, __ATOMIC_RELEASE);
    return f;
}

void *gdu_preload_real_dlsym(void *handle, const char *name)
{
    void *(*f)(void *, const char *) = __atomic_load_n(&gdu_real_dlsym, __ATOMIC_ACQUIRE);
    if (f == NULL)
        *(void **)&f = gdu_resolve_real_dlsym();
    return f != NULL ? f(handle, name) : NULL;
}

#if defined(__x86_64__)
/* dlsym itself: a tail jump keeps the caller's return address for libc's
 * dlsym, so RTLD_NEXT and RTLD_DEFAULT mean what they mean to the caller. */
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, @function\n"
        "dlsym:\n"
        "    .cfi_startproc\n"
        "    endbr64\n"
        "    movq gdu_real_dlsym(%rip), %rax\n"
        "    testq %rax, %rax\n"
        "    jnz 1f\n"
        "    pushq %rdi\n"
        "    .cfi_adjust_cfa_offset 8\n"
        "    pushq %rsi\n"
        "    .cfi_adjust_cfa_offset 8\n"
        "    subq $8, %rsp\n"
        "    .cfi_adjust_cfa_offset 8\n"
        "    call gdu_resolve_real_dlsym\n"
        "    addq $8, %rsp\n"
        "    .cfi_adjust_cfa_offset -8\n"
        "    popq %rsi\n"
        "    .cfi_adjust_cfa_offset -8\n"
        "    popq %rdi\n"
        "    .cfi_adjust_cfa_offset -8\n"
        "1:  cmpq $-1, %rdi\n"
        "    je 2f\n"
        "    testq %rdi, %rdi\n"
        "    je 2f\n"
        "    jmp gdu_dlsym_handle\n"
        "2:  jmp *%rax\n"
        "    .cfi_endproc\n"
        ".size dlsym, .-dlsym\n");
#endif
