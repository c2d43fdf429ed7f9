/* The primary-context helper against the fake libcuda: enter retains and
 * makes the context current, leave puts the caller's back and releases; a
 * failure names its call and holds nothing. */
#include "cuda/cuda_ctx.h"

#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

static const gdu_cuda *cu;
static int (*retains)(void);

static int setup(void **state)
{
    cu = gdu_cuda_load(NULL, 0);
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    *(void **)&retains = h ? dlsym(h, "fake_cuda_primary_retains") : NULL;
    return cu != NULL && retains != NULL ? 0 : -1;
}

static gdu_CUcontext current(void)
{
    gdu_CUcontext c = NULL;
    assert_int_equal(cu->cuCtxGetCurrent(&c), GDU_CUDA_SUCCESS);
    return c;
}

static void test_enter_leave(void **state)
{
    gdu_CUcontext callers = (gdu_CUcontext)&callers, saved = NULL;
    cu->cuCtxSetCurrent(callers);
    gdu_cuda_ctx c;
    assert_int_equal(gdu_cuda_ctx_enter(cu, 0, &c, &saved, NULL, 0), GDU_CUDA_SUCCESS);
    assert_non_null(c.ctx);
    assert_ptr_equal(current(), c.ctx);
    assert_ptr_equal(saved, callers);
    assert_int_equal(retains(), 1);
    gdu_cuda_ctx_leave(cu, &c, saved);
    assert_ptr_equal(current(), callers);
    assert_null(c.ctx);
    assert_int_equal(retains(), 0);
    cu->cuCtxSetCurrent(NULL);
}

static void test_failure_holds_nothing(void **state)
{
    gdu_cuda_ctx c;
    char why[128] = "";
    assert_int_not_equal(gdu_cuda_ctx_enter(cu, 1, &c, NULL, why, sizeof why), GDU_CUDA_SUCCESS);
    assert_null(c.ctx);
    assert_int_equal(strncmp(why, "cuDeviceGet: ", 13), 0);
    assert_int_equal(retains(), 0);
    assert_null(current());
    gdu_cuda_ctx_release(cu, &c); /* nothing held: nothing released */
    assert_int_equal(retains(), 0);
}

static void test_retain_keeps_current(void **state)
{
    gdu_cuda_ctx c;
    assert_int_equal(gdu_cuda_ctx_retain(cu, 0, &c, NULL, 0), GDU_CUDA_SUCCESS);
    assert_null(current());
    assert_int_equal(retains(), 1);
    gdu_CUcontext saved = (gdu_CUcontext)&saved;
    assert_int_equal(gdu_cuda_ctx_make_current(cu, c.ctx, &saved, NULL, 0), GDU_CUDA_SUCCESS);
    assert_null(saved);
    gdu_cuda_ctx_restore(cu, saved);
    assert_null(current());
    gdu_cuda_ctx_release(cu, &c);
    gdu_cuda_ctx_release(cu, &c);
    assert_int_equal(retains(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_enter_leave),
        cmocka_unit_test(test_failure_holds_nothing),
        cmocka_unit_test(test_retain_keeps_current),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
