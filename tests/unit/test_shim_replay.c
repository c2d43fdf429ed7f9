/* The shim core replaying the ioctl traces recorded on the H200 (580.159.04)
 * against the fake RM: as recorded (native), as libcuda behaves on GeForce
 * (its NV503C calls left out), in test mode, with every RM call of the shim
 * failing in turn, and with an unknown UVM layout. In every case each call
 * of the traced program must get the result the real driver gave it. */
#include "driverabi/nv_classes.h"
#include "driverabi/nv_status.h"
#include "fake_rm_trace.h"
#include "pinmodel/pin_model.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define DRIVER "580.159.04\n"

static trace g_gpu0, g_gpu1, g_torch, g_load, g_verify;

static int load_traces(void **state)
{
    if (trace_load("rm-traces/workload-gpu0.jsonl", &g_gpu0) != 0 ||
        trace_load("rm-traces/workload-gpu1.jsonl", &g_gpu1) != 0 ||
        trace_load("rm-traces/torch.jsonl", &g_torch) != 0 ||
        trace_load("rm-traces/load.jsonl", &g_load) != 0 ||
        trace_load("rm-traces/verify.jsonl", &g_verify) != 0)
        return -1;
    return 0;
}

static int free_traces(void **state)
{
    trace_free(&g_gpu0);
    trace_free(&g_gpu1);
    trace_free(&g_torch);
    trace_free(&g_load);
    trace_free(&g_verify);
    return 0;
}

typedef struct {
    fake_rm *f;
    gdu_shim *s;
    replay_result r;
    replay_opts o;
} run;

enum {
    DROP_NONE = 0,
    DROP_ADOPT = 1,
    DROP_STRICT = 2
}; /* GDUNLOCK_TEST_DROP_NATIVE unset, 1, strict */

static void run_start(run *x, const char *driver, bool geforce, int drop, uint64_t fault_at)
{
    memset(x, 0, sizeof *x);
    x->f = fake_rm_new();
    gdu_shim_config cfg = {.log_level = GDU_LOG_DEBUG,
                           .test_drop_native = drop != DROP_NONE,
                           .test_strict = drop == DROP_STRICT,
                           .fault_at = fault_at,
                           .driver_version = driver,
                           .pid = FAKE_RM_PID,
                           .rdma_attr_answer = true};
    gdu_shim_ops ops = fake_rm_ops(x->f);
    x->s = gdu_shim_new(&cfg, &ops);
    x->o.geforce = geforce;
}

static void run_to(run *x, const trace *t, size_t *at, long seq)
{
    size_t to = seq < 0 ? t->n : trace_index_of(t, seq);
    trace_replay(t, *at, to, x->s, x->f, &x->o, &x->r);
    *at = to;
}

static void run_end(run *x)
{
    gdu_shim_free(x->s);
    fake_rm_free(x->f);
}

static gdu_shim_totals totals(run *x)
{
    gdu_shim_totals t;
    gdu_shim_get_totals(x->s, &t);
    return t;
}

static void assert_faithful(run *x)
{
    if (x->r.mismatches != 0)
        fail_msg("%u results differ from the recording; first: %s", x->r.mismatches,
                 x->r.first_mismatch);
    assert_true(x->r.compared > 150);
}

static void assert_modes(run *x, const char *mode)
{
    json_t *rep = fake_rm_shim_report(x->s, false);
    json_t *gpus = json_object_get(rep, "gpus");
    assert_true(json_array_size(gpus) >= 1);
    size_t i;
    json_t *g;
    json_array_foreach(gpus, i, g)
    {
        const char *m = json_string_value(json_object_get(g, "mode"));
        if (strcmp(m, mode) != 0 && strcmp(m, "idle") != 0)
            fail_msg("GPU %zu is %s, expected %s", i, m, mode);
    }
    json_decref(rep);
}

static void native_as_recorded(void **state)
{
    const trace *traces[] = {&g_gpu0, &g_gpu1, &g_torch};
    for (size_t i = 0; i < 3; i++) {
        run x;
        size_t at = 0;
        run_start(&x, DRIVER, false, false, 0);
        run_to(&x, traces[i], &at, -1);
        assert_faithful(&x);
        gdu_shim_totals t = totals(&x);
        assert_int_equal(t.rm_calls, 0); /* native: the shim makes no RM call at all */
        assert_int_equal(t.objects_created, 0);
        assert_modes(&x, "native");
        run_end(&x);
    }
}

/* The workload: cuMemAlloc x4 mapped by seq 567; a 64 MiB VMM buffer mapped
 * at 582 (0x402000000, memory 0x5c0000a2) and unmapped at 583. */
static void workload_unlocked(const trace *t, uint32_t client, bool drop_native)
{
    run x;
    size_t at = 0;
    uint32_t st;
    run_start(&x, DRIVER, !drop_native, drop_native, 0);
    run_to(&x, t, &at, 568);
    for (uint32_t mem = 0x5c0000a2; mem <= 0x5c0000a8; mem += 2)
        assert_true(fake_rm_is_registered(x.f, client, mem));
    assert_int_equal(gdu_shim_probe_registered(x.s, 0x7f0000000000ull, &st), -1);
    run_to(&x, t, &at, 583);
    assert_true(fake_rm_is_registered(x.f, client, 0x5c0000a2)); /* the VMM buffer */
    assert_int_equal(gdu_shim_probe_registered(x.s, 0x402000000ull, &st), 1);
    assert_int_equal(st, GDU_NV_ERR_INSERT_DUPLICATE_NAME);
    run_to(&x, t, &at, 584);
    assert_false(fake_rm_is_registered(x.f, client, 0x5c0000a2));
    assert_int_equal(gdu_shim_probe_registered(x.s, 0x402000000ull, &st), 0);
    assert_int_equal(st, GDU_NV_ERR_OBJECT_NOT_FOUND);
    run_to(&x, t, &at, -1);
    assert_faithful(&x);
    gdu_shim_totals tot = totals(&x);
    assert_int_equal(tot.failures, 0);
    assert_true(tot.registered >= 20); /* libcuda's own device memory too */
    assert_int_equal(tot.objects_created, drop_native ? 2 : 1);
    assert_int_equal(fake_rm_registrations(x.f),
                     tot.live); /* every registration in RM is accounted for */
    assert_modes(&x, "unlocked");
    run_end(&x);
}

static uint64_t report_sum(run *x, const char *key)
{
    json_t *rep = fake_rm_shim_report(x->s, false);
    json_t *g;
    size_t i;
    uint64_t sum = 0;
    json_array_foreach(json_object_get(rep, "gpus"), i, g) sum +=
        (uint64_t)json_integer_value(json_object_get(g, key));
    json_decref(rep);
    return sum;
}

/* Strict test mode: libcuda's NV503C objects (0x5c000018 on the first GPU made,
 * 0x5c000019 on the other) are freed by the shim right after their alloc; after
 * that no call of libcuda's on them reaches RM, yet each gets the recorded
 * answer (status and the VA space token); the shim's own objects (handles RM
 * generated) hold one VA space per GPU (the UVM one) and every registration. */
static void strict_workload(const trace *t, uint32_t client)
{
    run x;
    size_t at = 0;
    uint32_t st;
    run_start(&x, DRIVER, false, DROP_STRICT, 0);
    run_to(&x, t, &at, 196);
    for (uint32_t h = 0x5c000018; h <= 0x5c000019; h++)
        assert_int_equal(fake_rm_calls_on(x.f, client, h), 1); /* the shim's own free of it */
    assert_int_equal(fake_rm_count_class(x.f, GDU_NV50_THIRD_PARTY_P2P), 2);
    assert_int_equal(report_sum(&x, "va_spaces_registered"), 2); /* one per GPU */
    run_to(&x, t, &at, 568);
    for (uint32_t mem = 0x5c0000a2; mem <= 0x5c0000a8; mem += 2)
        assert_true(fake_rm_is_registered(x.f, client, mem));
    run_to(&x, t, &at, 583);
    assert_int_equal(gdu_shim_probe_registered(x.s, 0x402000000ull, &st), 1); /* the VMM buffer */
    assert_int_equal(st, GDU_NV_ERR_INSERT_DUPLICATE_NAME);
    run_to(&x, t, &at, 584);
    assert_int_equal(gdu_shim_probe_registered(x.s, 0x402000000ull, &st), 0);
    assert_int_equal(st, GDU_NV_ERR_OBJECT_NOT_FOUND);
    run_to(&x, t, &at, -1);
    assert_faithful(&x);
    for (uint32_t h = 0x5c000018; h <= 0x5c000019; h++)
        assert_int_equal(fake_rm_calls_on(x.f, client, h), 1);
    gdu_shim_totals tot = totals(&x);
    assert_int_equal(tot.failures, 0);
    assert_int_equal(tot.objects_created, 2);
    assert_true(tot.registered >= 20);
    assert_int_equal(report_sum(&x, "registered_by_libcuda"), 0);
    assert_int_equal(report_sum(&x, "answered_for_libcuda"),
                     12); /* 2 VA spaces, 5 registers, 5 unregisters */
    assert_int_equal(fake_rm_registrations(x.f), tot.live);
    assert_modes(&x, "unlocked");
    run_end(&x);
}

static void strict_gpu0(void **state) { strict_workload(&g_gpu0, 0xc1d00034); }

static void strict_gpu1(void **state) { strict_workload(&g_gpu1, 0xc1d0003a); }

static void geforce_gpu0(void **state) { workload_unlocked(&g_gpu0, 0xc1d00034, false); }

static void geforce_gpu1(void **state) { workload_unlocked(&g_gpu1, 0xc1d0003a, false); }

static void test_mode_gpu0(void **state) { workload_unlocked(&g_gpu0, 0xc1d00034, true); }

static void test_mode_gpu1(void **state) { workload_unlocked(&g_gpu1, 0xc1d0003a, true); }

static void torch_two_clients(void **state)
{
    for (int drop = DROP_NONE; drop <= DROP_STRICT; drop++) {
        run x;
        size_t at = 0;
        run_start(&x, DRIVER, drop == DROP_NONE, drop, 0);
        run_to(&x, &g_torch, &at, -1);
        assert_faithful(&x);
        gdu_shim_totals t = totals(&x);
        assert_int_equal(t.failures, 0);
        assert_true(t.registered > 0);
        assert_int_equal(t.clients, 2); /* libcuda's and NVML's */
        /* Every tensor buffer was unregistered after torch freed it. */
        assert_false(fake_rm_is_registered(x.f, 0xc1d00042, 0x5c0000a4));
        assert_false(fake_rm_is_registered(x.f, 0xc1d00042, 0x5c0000a6));
        if (drop == DROP_STRICT) {
            assert_int_equal(fake_rm_calls_on(x.f, 0xc1d00042, 0x5c000018),
                             1); /* the shim's free only */
            assert_int_equal(report_sum(&x, "registered_by_libcuda"), 0);
        }
        run_end(&x);
    }
}

/* ---- differential: native vs unlocked, judged by the kernel's lookup ---- */

enum { MAX_REGS = 512 };

typedef struct {
    fake_rm_reg regs[MAX_REGS];
    size_t n_regs;
    uint32_t vas[2][8];
    unsigned n_vas[2];
} snapshot;

static void snap(run *x, uint32_t client, const uint32_t subs[2], snapshot *out)
{
    out->n_regs = fake_rm_regs(x->f, out->regs, MAX_REGS);
    assert_true(out->n_regs <= MAX_REGS);
    for (int i = 0; i < 2; i++)
        out->n_vas[i] = fake_rm_vaspaces_under(x->f, client, subs[i], out->vas[i], 8);
}

static bool holds(const snapshot *sn, const fake_rm_reg *r)
{
    for (size_t i = 0; i < sn->n_regs; i++)
        if (sn->regs[i].memory == r->memory && sn->regs[i].address == r->address &&
            sn->regs[i].size == r->size && sn->regs[i].offset == r->offset)
            return true;
    return false;
}

/* One recorded program and the calls it is stopped before (in order), with
 * the registrations libcuda holds natively at each. */
typedef struct {
    const trace *t;
    uint32_t client;
    long seq[2];
    size_t native_regs[2];
    int n;
} diff_case;

static const uint32_t g_workload_subs[2] = {0x5c000003, 0x5c00000c};

/* The same recorded program natively and unlocked (GeForce replay, test
 * mode, strict test mode), each run once through its stops: at every stop
 * every registration libcuda holds natively RM holds identically unlocked
 * (memory, address, size, offset); each GPU's NV503C holds the same one VA
 * space; and the kernel's lookup finds every natively registered buffer, as
 * the same memory, both in the fake's state and in the shim's own account of
 * it. extra[mode][k]: the unlocked run's registrations that native lacks. */
static void differential(const diff_case *dc, size_t extra[3][2])
{
    static snapshot native[2], unlocked;
    uint32_t native_tpp[2][2];
    run nx;
    size_t at = 0;
    run_start(&nx, DRIVER, false, DROP_NONE, 0);
    for (int k = 0; k < dc->n; k++) {
        run_to(&nx, dc->t, &at, dc->seq[k]);
        snap(&nx, dc->client, g_workload_subs, &native[k]);
        assert_int_equal(native[k].n_regs, dc->native_regs[k]);
        for (int i = 0; i < 2; i++)
            native_tpp[k][i] = fake_rm_tpp_of(nx.f, dc->client, g_workload_subs[i]);
        for (size_t i = 0; i < native[k].n_regs; i++) {
            gdu_pin_verdict v;
            fake_rm_pin_lookup(nx.f, native[k].regs[i].address, native[k].regs[i].size, &v);
            assert_int_equal(v.rule, GDU_PIN_FOUND);
        }
    }
    run_end(&nx);
    for (int mode = 0; mode <= DROP_STRICT; mode++) {
        run ux;
        at = 0;
        run_start(&ux, DRIVER, mode == 0, mode, 0);
        for (int k = 0; k < dc->n; k++) {
            long seq = dc->seq[k];
            const snapshot *nat = &native[k];
            run_to(&ux, dc->t, &at, seq);
            snap(&ux, dc->client, g_workload_subs, &unlocked);
            for (int i = 0; i < 2; i++) {
                /* The shim makes its object at a GPU's first mapping: a GPU the
                 * program leaves alone may have none (where libcuda's holds nothing). */
                bool used = false;
                for (size_t j = 0; j < nat->n_regs; j++)
                    used |= nat->regs[j].tpp == native_tpp[k][i];
                if (unlocked.n_vas[i] == 0 && !used)
                    continue;
                if (nat->n_vas[i] != 1 || unlocked.n_vas[i] != 1 ||
                    nat->vas[i][0] != unlocked.vas[i][0])
                    fail_msg(
                        "seq %ld mode %d GPU %d: VA spaces native %u (0x%x) unlocked %u (0x%x)",
                        seq, mode, i, nat->n_vas[i], nat->vas[i][0], unlocked.n_vas[i],
                        unlocked.vas[i][0]);
            }
            for (size_t i = 0; i < nat->n_regs; i++) {
                const fake_rm_reg *r = &nat->regs[i];
                if (!holds(&unlocked, r))
                    fail_msg("seq %ld mode %d: libcuda's registration of 0x%x at 0x%llx+0x%llx is "
                             "missing unlocked",
                             seq, mode, r->memory, (unsigned long long)r->address,
                             (unsigned long long)r->size);
                gdu_pin_verdict v;
                fake_rm_pin_lookup(ux.f, r->address, r->size, &v);
                if (v.rule != GDU_PIN_FOUND || v.memory != r->memory)
                    fail_msg("seq %ld mode %d: the kernel would not find 0x%llx+0x%llx: %s", seq,
                             mode, (unsigned long long)r->address, (unsigned long long)r->size,
                             gdu_pin_rule_name(v.rule));
                int err;
                assert_int_equal(gdu_shim_pin_lookup(ux.s, r->address, r->size, &err, NULL, 0),
                                 GDU_PIN_FOUND);
            }
            if (extra != NULL)
                extra[mode][k] = unlocked.n_regs - nat->n_regs;
        }
        run_end(&ux);
    }
}

static void differential_workload(void **state)
{
    const trace *traces[] = {&g_gpu0, &g_gpu1};
    const uint32_t clients[] = {0xc1d00034, 0xc1d0003a};
    for (int k = 0; k < 2; k++) {
        /* After the four cuMemAlloc buffers are mapped, and with the VMM
         * buffer mapped after they were freed. */
        diff_case dc = {traces[k], clients[k], {568, 583}, {4, 0}, 2};
        size_t extra[3][2];
        differential(&dc, extra);
        for (int mode = 0; mode <= DROP_STRICT; mode++) {
            assert_true(extra[mode][0] >
                        0); /* libcuda's internal device memory, which it never registers */
            assert_int_equal(extra[mode][1],
                             extra[mode][0] + 1); /* the same, plus the VMM buffer */
        }
    }
}

static void differential_torch(void **state)
{
    diff_case dc = {&g_torch, 0xc1d00042, {623}, {3}, 1}; /* the three tensors mapped */
    differential(&dc, NULL);
}

/* gdunlock load and gdunlock verify as recorded on the H200 (tools/rm-recorder):
 * every buffer they allocate that libcuda registers (load's memory segment;
 * verify's cuMemAlloc and RDMA-capable VMM buffers) is found unlocked as
 * natively, stopped at the first unregistration (all of them live). */
static void differential_load_and_verify(void **state)
{
    diff_case load = {&g_load, 0xc1d0001b, {483}, {1}, 1};
    diff_case verify = {&g_verify, 0xc1d0001f, {1039}, {5}, 1};
    differential(&load, NULL);
    differential(&verify, NULL);
}

/* The VMM buffer (PTR vmm in workload-gpu*.marks): libcuda never registers
 * it, so natively nvidia-fs cannot pin it; unlocked it can. */
static void vmm_found_unlocked(void **state)
{
    for (int mode = DROP_NONE - 1; mode <= DROP_STRICT; mode++) {
        run x;
        size_t at = 0;
        run_start(&x, DRIVER, mode == DROP_NONE - 1, mode < 0 ? DROP_NONE : mode, 0);
        if (mode == DROP_NONE)
            x.o.geforce = false; /* native */
        run_to(&x, &g_gpu0, &at, 583);
        int want = mode == DROP_NONE ? GDU_PIN_NOT_REGISTERED : GDU_PIN_FOUND;
        gdu_pin_verdict v;
        fake_rm_pin_lookup(x.f, 0x402000000ull, 64ull << 20, &v);
        assert_int_equal(v.rule, want);
        run_end(&x);
    }
}

static void every_shim_call_failing(void **state)
{
    run x;
    size_t at = 0;
    run_start(&x, DRIVER, true, false, 0);
    run_to(&x, &g_gpu0, &at, -1);
    uint64_t calls = totals(&x).rm_calls;
    run_end(&x);
    assert_true(calls > 20);
    for (uint64_t n = 1; n <= calls; n++) {
        at = 0;
        run_start(&x, DRIVER, true, false, n);
        run_to(&x, &g_gpu0, &at, -1);
        assert_faithful(&x); /* the program is unaffected */
        assert_true(totals(&x).failures >= 1);
        assert_true(fake_rm_count_class(x.f, GDU_NV50_THIRD_PARTY_P2P) <= 1);
        run_end(&x);
    }
}

static void unknown_layout(void **state)
{
    const char *drivers[] = {"470.256.02\n", "535.288.01\n", "garbage"};
    for (size_t i = 0; i < 3; i++) {
        run x;
        size_t at = 0;
        run_start(&x, drivers[i], true, false, 0);
        run_to(&x, &g_gpu0, &at, -1);
        assert_faithful(&x);
        assert_int_equal(totals(&x).rm_calls, 0);
        assert_int_equal(fake_rm_log_lines(x.f, GDU_LOG_ERROR), 1);
        json_t *rep = fake_rm_shim_report(x.s, false);
        assert_non_null(json_string_value(json_object_get(rep, "refused")));
        json_decref(rep);
        run_end(&x);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(native_as_recorded),
        cmocka_unit_test(geforce_gpu0),
        cmocka_unit_test(geforce_gpu1),
        cmocka_unit_test(test_mode_gpu0),
        cmocka_unit_test(test_mode_gpu1),
        cmocka_unit_test(torch_two_clients),
        cmocka_unit_test(strict_gpu0),
        cmocka_unit_test(strict_gpu1),
        cmocka_unit_test(every_shim_call_failing),
        cmocka_unit_test(unknown_layout),
        cmocka_unit_test(differential_workload),
        cmocka_unit_test(differential_torch),
        cmocka_unit_test(vmm_found_unlocked),
        cmocka_unit_test(differential_load_and_verify),
    };
    return cmocka_run_group_tests(tests, load_traces, free_traces);
}
