/* gdu_live_collect against a fake two-GPU libcuda (LD_LIBRARY_PATH set by
 * ctest): CUDA's view, peer answers, the RM's absence explained, libcufile
 * missing, and the named path probed. */
#include "facts/live.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

static void collects_cuda_view(void **state)
{
    static gdu_live live;
    const char *paths[] = {"/tmp"};
    gdu_live_collect(&live, paths, 1);
    assert_int_equal(live.origin, GDU_LIVE_COLLECTED);
    assert_true(live.cuda_ok);
    assert_int_equal(live.n_gpus, 2);
    assert_string_equal(live.gpus[1].name, "Fake GPU 1");
    assert_string_equal(live.gpus[1].bdf, "0000:11:00.0");
    assert_int_equal(live.gpus[0].total_mem, 1ull << 30);
    assert_int_equal(live.gpus[0].cc_major, 9);
    assert_int_equal(live.n_pairs, 2);
    const gdu_live_pair *p = gdu_live_pair_find(&live, 1, 0);
    assert_non_null(p);
    assert_int_equal(p->can_access, 1);
    assert_int_equal(p->native_atomics, 1);
    /* no /dev/nvidiactl here: the RM's caps are missing and the reason is kept */
    if (!p->rm_known)
        assert_true(live.rm_why[0] != '\0');
    assert_false(live.cufile_found);
    assert_non_null(strstr(live.cufile_why, "/nonexistent/libcufile.so.0"));
    assert_int_equal(live.n_paths, 1);
    assert_string_equal(live.paths[0].path, "/tmp");
    assert_true(live.paths[0].fs_magic != 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(collects_cuda_view),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
