/* Every public function of include/gdunlock/ (safetensors.h and io.h) called
 * with NULL handles, NULL outputs and out-of-range values: each refuses
 * (INVALID_ARGUMENT, -EINVAL, or an accessor's NULL, "", 0) and none
 * crashes. Before, 26 accessors dereferenced a NULL model, header, engine or
 * file. Each call runs in a child process, so the test names every call that
 * crashes; and the table must name every function the headers declare. */
#include "gdunlock/io.h"
#include "gdunlock/safetensors.h"

#include <errno.h>
#include <signal.h>
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#define FIX GDUNLOCK_FIXTURES "/safetensors/"

/* A check failing in a child: exit 2 with the line (a crash is a signal). */
#define EXPECT(cond)                                                                               \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "  line %d: %s\n", __LINE__, #cond);                                   \
            _exit(2);                                                                              \
        }                                                                                          \
    } while (0)

static void io_default_workers(void) { EXPECT(gdu_io_default_workers() >= 2); }
static void io_options_default(void) { EXPECT(gdu_io_options_default(NULL, NULL, 0) == -EINVAL); }
static void io_defaults_set(void)
{
    EXPECT(gdu_io_defaults_set(NULL, "4", NULL, 0) == -EINVAL);
    EXPECT(gdu_io_defaults_set("workers", NULL, NULL, 0) == -EINVAL);
    EXPECT(gdu_io_defaults_set("no such setting", "4", NULL, 0) == -EINVAL);
    EXPECT(gdu_io_defaults_set("workers", "many", NULL, 0) == -EINVAL);
}
static void io_backend_name(void)
{
    EXPECT(strcmp(gdu_io_backend_name((gdu_io_backend)99), "unknown") == 0);
    EXPECT(strcmp(gdu_io_backend_name((gdu_io_backend)-1), "unknown") == 0);
}
static void io_backend_parse(void)
{
    gdu_io_backend b;
    EXPECT(gdu_io_backend_parse(NULL, &b) == -EINVAL);
    EXPECT(gdu_io_backend_parse("host", NULL) == -EINVAL);
}
static void io_engine_create(void) { EXPECT(gdu_io_engine_create(NULL, NULL, NULL, 0) == -EINVAL); }
static void io_engine_prestage(void) { EXPECT(gdu_io_engine_prestage(NULL, NULL, 0) == -EINVAL); }
static void io_engine_destroy(void) { gdu_io_engine_destroy(NULL); }
static void io_engine_options(void) { EXPECT(gdu_io_engine_options(NULL) == NULL); }
static void io_engine_backend(void) { EXPECT(gdu_io_engine_backend(NULL) == GDU_IO_BACKEND_AUTO); }
static void io_engine_reason(void) { EXPECT(strcmp(gdu_io_engine_reason(NULL), "") == 0); }
static void io_engine_direct_storage(void) { EXPECT(gdu_io_engine_direct_storage(NULL) == 0); }
static void io_open(void)
{
    gdu_io_file *f = (gdu_io_file *)1;
    char why[64];
    EXPECT(gdu_io_open(NULL, FIX "small.safetensors", GDU_IO_READ, &f, why, sizeof why) == -EINVAL);
    EXPECT(f == NULL && why[0] != '\0');
    EXPECT(gdu_io_open(NULL, NULL, GDU_IO_READ, NULL, NULL, 0) == -EINVAL);
}
static void io_open_fd(void)
{
    EXPECT(gdu_io_open_fd(NULL, 0, GDU_IO_READ, NULL, NULL, 0) == -EINVAL);
}
static void io_close(void) { gdu_io_close(NULL); }
static void io_file_backend(void) { EXPECT(gdu_io_file_backend(NULL) == GDU_IO_BACKEND_AUTO); }
static void io_file_direct(void) { EXPECT(gdu_io_file_direct(NULL) == 0); }
static void io_file_reason(void) { EXPECT(strcmp(gdu_io_file_reason(NULL), "") == 0); }
static void io_file_size(void) { EXPECT(gdu_io_file_size(NULL) == -EINVAL); }
static void io_submit(void)
{
    gdu_io_request *r = (gdu_io_request *)1;
    EXPECT(gdu_io_submit(NULL, GDU_IO_OP_READ, NULL, 0, NULL, NULL, &r) == -EINVAL);
    EXPECT(r == NULL);
    EXPECT(gdu_io_submit(NULL, GDU_IO_OP_READ, NULL, 0, NULL, NULL, NULL) == -EINVAL);
}
static void io_extents_box(void)
{
    uint64_t counts[] = {4}, strides[] = {8};
    gdu_io_extent x[4];
    EXPECT(gdu_io_extents_box(NULL, 4, 0, counts, strides, 1, 2, x) == -EINVAL);
    EXPECT(gdu_io_extents_box(x, 4, 0, NULL, strides, 1, 2, x) == -EINVAL);
    EXPECT(gdu_io_extents_box(x, 4, 0, counts, NULL, 1, 2, x) == -EINVAL);
    EXPECT(gdu_io_extents_box(x, 4, 0, counts, strides, 1, 2, NULL) == -EINVAL);
    EXPECT(gdu_io_extents_box(x, 5, 0, counts, strides, 1, 2, x) == -EINVAL);
    EXPECT(gdu_io_extents_box(x, 4, UINT64_MAX, counts, strides, 1, 2, x) == -EINVAL);
}
static void io_submit_box(void)
{
    uint64_t counts[] = {4}, strides[] = {8};
    char x[8];
    gdu_io_request *r = (gdu_io_request *)1;
    EXPECT(gdu_io_submit_box(NULL, GDU_IO_OP_READ, 0, counts, strides, 1, 2, x, NULL, NULL, &r) ==
           -EINVAL);
    EXPECT(r == NULL);
    EXPECT(gdu_io_submit_box(NULL, GDU_IO_OP_READ, 0, counts, strides, 1, 2, x, NULL, NULL, NULL) ==
           -EINVAL);
}
static void io_submit_box_deferred(void)
{
    uint64_t counts[] = {4}, strides[] = {8};
    gdu_io_request *r = (gdu_io_request *)1;
    EXPECT(gdu_io_submit_box_deferred(NULL, 0, counts, strides, 1, 2, NULL, NULL, &r) == -EINVAL);
    EXPECT(r == NULL);
    EXPECT(gdu_io_submit_box_deferred(NULL, 0, counts, strides, 1, 2, NULL, NULL, NULL) == -EINVAL);
}
static void io_place(void)
{
    char x[8];
    EXPECT(gdu_io_place(NULL, x) == -EINVAL);
    EXPECT(gdu_io_place(NULL, NULL) == -EINVAL);
}
static void io_poll(void) { EXPECT(gdu_io_poll(NULL) == -EINVAL); }
static void io_wait(void) { EXPECT(gdu_io_wait(NULL, NULL, NULL, 0) == -EINVAL); }
static void io_read(void)
{
    char b[1];
    EXPECT(gdu_io_read(NULL, 0, 1, b, NULL, NULL, 0) == -EINVAL);
}
static void io_write(void) { EXPECT(gdu_io_write(NULL, 0, 1, "x", NULL, NULL, 0) == -EINVAL); }
static void io_sync(void) { EXPECT(gdu_io_sync(NULL, NULL, 0) == -EINVAL); }

static void st_status_name(void)
{
    EXPECT(strcmp(gdu_st_status_name((gdu_st_status)-1), "unknown") == 0);
    EXPECT(strcmp(gdu_st_status_name(GDU_ST_STATUS_COUNT), "unknown") == 0);
}
static void st_dtype_name(void) { EXPECT(gdu_st_dtype_name((gdu_st_dtype)-1) == NULL); }
static void st_dtype_bits(void) { EXPECT(gdu_st_dtype_bits(GDU_ST_DTYPE_COUNT) == 0); }
static void st_dtype_from_name(void)
{
    gdu_st_dtype d;
    EXPECT(gdu_st_dtype_from_name(NULL, &d) == -1);
    EXPECT(gdu_st_dtype_from_name("F32", NULL) == -1);
}
/* A valid file image: {} and no data. */
static const unsigned char empty_image[] = {2, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
static void st_header_parse(void)
{
    gdu_st_header *h = NULL;
    EXPECT(gdu_st_header_parse(NULL, 10, 10, &h, NULL) == GDU_ST_ERR_INVALID_ARGUMENT);
    EXPECT(gdu_st_header_parse(empty_image, 10, 10, NULL, NULL) == GDU_ST_ERR_INVALID_ARGUMENT);
}
static void st_header_parse_flags(void)
{
    gdu_st_header *h = NULL;
    gdu_st_error err;
    EXPECT(gdu_st_header_parse_flags(empty_image, 10, 10, 2, &h, &err) ==
           GDU_ST_ERR_INVALID_ARGUMENT);
    EXPECT(h == NULL && strstr(err.message, "flags") != NULL);
}
static void st_header_read_fd(void)
{
    gdu_st_header *h = NULL;
    EXPECT(gdu_st_header_read_fd(0, 0, NULL, NULL) == GDU_ST_ERR_INVALID_ARGUMENT);
    EXPECT(gdu_st_header_read_fd(-1, 0, &h, NULL) == GDU_ST_ERR_IO);
    EXPECT(gdu_st_header_read_fd(0, 0x100, &h, NULL) == GDU_ST_ERR_INVALID_ARGUMENT);
}
static void st_header_free(void) { gdu_st_header_free(NULL); }
static void st_header_tensor_count(void) { EXPECT(gdu_st_header_tensor_count(NULL) == 0); }
static void st_header_tensor(void) { EXPECT(gdu_st_header_tensor(NULL, 0) == NULL); }
static void st_header_data_offset(void) { EXPECT(gdu_st_header_data_offset(NULL) == 0); }
static void st_header_data_span(void) { EXPECT(gdu_st_header_data_span(NULL) == 0); }
static void st_header_hole_bytes(void) { EXPECT(gdu_st_header_hole_bytes(NULL) == 0); }
static void st_header_trailing_bytes(void) { EXPECT(gdu_st_header_trailing_bytes(NULL) == 0); }
static void st_header_metadata_count(void) { EXPECT(gdu_st_header_metadata_count(NULL) == 0); }
static void st_header_has_metadata(void) { EXPECT(gdu_st_header_has_metadata(NULL) == 0); }
static void st_header_metadata(void)
{
    const char *k, *v;
    EXPECT(gdu_st_header_metadata(NULL, 0, &k, NULL, &v, NULL) == -1);
    gdu_st_header *h = NULL;
    const char img[] = "\x1e\0\0\0\0\0\0\0{\"__metadata__\":{\"a\":\"b\"}}    ";
    EXPECT(gdu_st_header_parse(img, sizeof img - 1, sizeof img - 1, &h, NULL) == GDU_ST_OK);
    EXPECT(gdu_st_header_metadata(h, 0, NULL, NULL, &v, NULL) == -1);
    EXPECT(gdu_st_header_metadata(h, 0, &k, NULL, NULL, NULL) == -1);
    EXPECT(gdu_st_header_metadata(h, 1, &k, NULL, &v, NULL) == -1);
    EXPECT(gdu_st_header_metadata(h, 0, &k, NULL, &v, NULL) == 0 && strcmp(v, "b") == 0);
    gdu_st_header_free(h);
}
static void st_index_parse(void)
{
    char **shards;
    size_t n, t;
    EXPECT(gdu_st_index_parse(NULL, 0, &shards, &n, &t, NULL) == GDU_ST_ERR_INVALID_ARGUMENT);
    EXPECT(gdu_st_index_parse("{}", 2, NULL, NULL, NULL, NULL) == GDU_ST_ERR_INVALID_ARGUMENT);
}
static void st_string_list_free(void) { gdu_st_string_list_free(NULL); }
static void st_open(void) { EXPECT(gdu_st_open(NULL, NULL, NULL) == GDU_ST_ERR_INVALID_ARGUMENT); }
static void st_open_flags(void)
{
    gdu_st_model *m = (gdu_st_model *)1;
    gdu_st_error err;
    EXPECT(gdu_st_open_flags(FIX "small.safetensors", 4, &m, &err) == GDU_ST_ERR_INVALID_ARGUMENT);
    EXPECT(m == NULL && strstr(err.message, "flags") != NULL);
}
static void st_load(void)
{
    EXPECT(gdu_st_load(NULL, NULL, NULL) == GDU_ST_ERR_INVALID_ARGUMENT);
    /* A target that is neither GPU nor host is refused, not taken as GPU. */
    gdu_st_model *m = NULL;
    EXPECT(gdu_st_open(FIX "small.safetensors", &m, NULL) == GDU_ST_OK);
    gdu_st_load_options o = {.target = (gdu_st_target)7};
    gdu_st_error err;
    EXPECT(gdu_st_load(m, &o, &err) == GDU_ST_ERR_INVALID_ARGUMENT);
    EXPECT(strstr(err.message, "target 7") != NULL);
    o.target = (gdu_st_target)-1;
    EXPECT(gdu_st_load(m, &o, &err) == GDU_ST_ERR_INVALID_ARGUMENT);
    gdu_st_model_free(m);
}
static void st_load_start(void)
{
    EXPECT(gdu_st_load_start(NULL, NULL, NULL) == GDU_ST_ERR_INVALID_ARGUMENT);
}
static void st_load_finish(void)
{
    EXPECT(gdu_st_load_finish(NULL, NULL) == GDU_ST_ERR_INVALID_ARGUMENT);
}
static void st_engines_release(void) { EXPECT(gdu_st_engines_release(NULL) == GDU_ST_OK); }
static void st_engine_acquire(void)
{
    EXPECT(gdu_st_engine_acquire(1, 0, NULL, NULL) == GDU_ST_ERR_INVALID_ARGUMENT);
}
static void st_engine_return(void)
{
    EXPECT(gdu_st_engine_return(NULL) == GDU_ST_OK);
    int x;
    EXPECT(gdu_st_engine_return((gdu_io_engine *)&x) == GDU_ST_ERR_INVALID_ARGUMENT);
}
static void st_verify(void) { EXPECT(gdu_st_verify(NULL, NULL) == GDU_ST_ERR_INVALID_ARGUMENT); }
static void st_model_free(void) { gdu_st_model_free(NULL); }
static void st_model_tensor_count(void) { EXPECT(gdu_st_model_tensor_count(NULL) == 0); }
static void st_model_tensor(void) { EXPECT(gdu_st_model_tensor(NULL, 0) == NULL); }
static void st_model_find(void) { EXPECT(gdu_st_model_find(NULL, "a") == -1); }
static void st_model_find_n(void) { EXPECT(gdu_st_model_find_n(NULL, "a", 1) == -1); }
static void st_model_file_count(void) { EXPECT(gdu_st_model_file_count(NULL) == 0); }
static void st_model_file_path(void) { EXPECT(gdu_st_model_file_path(NULL, 0) == NULL); }
static void st_model_file_header(void) { EXPECT(gdu_st_model_file_header(NULL, 0) == NULL); }
static void st_model_file_open(void)
{
    gdu_io_file *f = (gdu_io_file *)1;
    EXPECT(gdu_st_model_file_open(NULL, 0, NULL, &f, NULL) == GDU_ST_ERR_INVALID_ARGUMENT);
    EXPECT(f == NULL);
}
static void st_model_stats(void)
{
    gdu_st_load_stats s = gdu_st_model_stats(NULL);
    EXPECT(s.files == 0 && s.backend[0] == '\0');
}
static void st_model_dlpack(void) { EXPECT(gdu_st_model_dlpack(NULL, 0) == NULL); }
static void st_abi_layout(void) { EXPECT(gdu_st_abi_layout() != NULL); }
static void st_version(void) { EXPECT(gdu_st_version() != NULL); }

#define CALL(f)                                                                                    \
    {                                                                                              \
        "gdu_" #f, f                                                                               \
    }
static const struct {
    const char *name;
    void (*call)(void);
} calls[] = {
    CALL(io_default_workers),
    CALL(io_options_default),
    CALL(io_defaults_set),
    CALL(io_backend_name),
    CALL(io_backend_parse),
    CALL(io_engine_create),
    CALL(io_engine_prestage),
    CALL(io_engine_destroy),
    CALL(io_engine_options),
    CALL(io_engine_backend),
    CALL(io_engine_reason),
    CALL(io_engine_direct_storage),
    CALL(io_open),
    CALL(io_open_fd),
    CALL(io_close),
    CALL(io_file_backend),
    CALL(io_file_direct),
    CALL(io_file_reason),
    CALL(io_file_size),
    CALL(io_submit),
    CALL(io_extents_box),
    CALL(io_submit_box),
    CALL(io_submit_box_deferred),
    CALL(io_place),
    CALL(io_poll),
    CALL(io_wait),
    CALL(io_read),
    CALL(io_write),
    CALL(io_sync),
    CALL(st_status_name),
    CALL(st_dtype_name),
    CALL(st_dtype_bits),
    CALL(st_dtype_from_name),
    CALL(st_header_parse),
    CALL(st_header_parse_flags),
    CALL(st_header_read_fd),
    CALL(st_header_free),
    CALL(st_header_tensor_count),
    CALL(st_header_tensor),
    CALL(st_header_data_offset),
    CALL(st_header_data_span),
    CALL(st_header_hole_bytes),
    CALL(st_header_trailing_bytes),
    CALL(st_header_metadata_count),
    CALL(st_header_has_metadata),
    CALL(st_header_metadata),
    CALL(st_index_parse),
    CALL(st_string_list_free),
    CALL(st_open),
    CALL(st_open_flags),
    CALL(st_load),
    CALL(st_load_start),
    CALL(st_load_finish),
    CALL(st_engines_release),
    CALL(st_engine_acquire),
    CALL(st_engine_return),
    CALL(st_verify),
    CALL(st_model_free),
    CALL(st_model_tensor_count),
    CALL(st_model_tensor),
    CALL(st_model_find),
    CALL(st_model_find_n),
    CALL(st_model_file_count),
    CALL(st_model_file_path),
    CALL(st_model_file_header),
    CALL(st_model_file_open),
    CALL(st_model_stats),
    CALL(st_model_dlpack),
    CALL(st_abi_layout),
    CALL(st_version),
};
#define N_CALLS (sizeof calls / sizeof calls[0])

/* Each call in a child; every one that fails or crashes is named. */
static void test_null_handles_refused(void **state)
{
    size_t n_failed = 0;
    for (size_t i = 0; i < N_CALLS; i++) {
        fflush(NULL);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            /* cmocka's handlers would carry on its loop in the child */
            const int crashes[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
            for (size_t c = 0; c < sizeof crashes / sizeof crashes[0]; c++)
                signal(crashes[c], SIG_DFL);
            calls[i].call();
            _exit(0);
        }
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
            continue;
        n_failed++;
        print_message("%s: %s\n", calls[i].name,
                      WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "did not refuse");
    }
    if (n_failed)
        fail_msg("%zu of %zu calls crashed or did not refuse (listed above)", n_failed, N_CALLS);
}

/* The table names every function the public headers declare. */
static void test_table_covers_the_headers(void **state)
{
    static const char *const headers[] = {GDUNLOCK_INCLUDE "/gdunlock/io.h",
                                          GDUNLOCK_INCLUDE "/gdunlock/safetensors.h"};
    regex_t re;
    assert_int_equal(regcomp(&re, "(^|[^a-z0-9_])(gdu_[a-z0-9_]+)[[:space:]]*\\(", REG_EXTENDED),
                     0);
    size_t declared = 0;
    for (size_t h = 0; h < 2; h++) {
        FILE *f = fopen(headers[h], "r");
        assert_non_null(f);
        char line[512];
        while (fgets(line, sizeof line, f) != NULL) {
            regmatch_t m[3];
            for (const char *p = line; regexec(&re, p, 3, m, 0) == 0; p += m[0].rm_eo) {
                char name[128];
                snprintf(name, sizeof name, "%.*s", (int)(m[2].rm_eo - m[2].rm_so), p + m[2].rm_so);
                size_t i = 0;
                while (i < N_CALLS && strcmp(calls[i].name, name) != 0)
                    i++;
                if (i == N_CALLS)
                    fail_msg("%s (%s) is not called by this test", name, headers[h]);
                declared++;
            }
        }
        fclose(f);
    }
    regfree(&re);
    assert_true(declared >= N_CALLS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_null_handles_refused),
        cmocka_unit_test(test_table_covers_the_headers),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    gdu_st_engines_release(NULL);
    return failed;
}
