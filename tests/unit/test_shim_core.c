/* The shim core against the fake RM, on synthetic ioctl sequences: GeForce
 * state, native, hand-over, frees, several devices and clients, alignment,
 * UVM layouts, test mode, probes, fault injection, 8 threads. */
#include "driverabi/nv503c.h"
#include "driverabi/nv_classes.h"
#include "driverabi/nv_escape.h"
#include "driverabi/nv_status.h"
#include "driverabi/nvos.h"
#include "fake_rm_client.h"
#include "pinmodel/pin_model.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define DRIVER "580.159.04\n"
#define MiB (1024ull * 1024)
#define VA(n) (0x7f0000000000ull + (uint64_t)(n)*256 * MiB)

typedef struct {
    fake_rm *f;
    gdu_shim *s;
    lc_gpus g;
} env;

static env *env_new(const char *driver, int drop_native, uint64_t fault_at, unsigned devices)
{
    env *e = calloc(1, sizeof *e);
    e->f = fake_rm_new();
    e->s = lc_shim(e->f, driver, drop_native, fault_at);
    if (devices > 0)
        lc_make_gpus(e->s, e->f, 0xc1d00001, devices, &e->g);
    return e;
}

static void env_free(env *e)
{
    gdu_shim_free(e->s);
    fake_rm_free(e->f);
    free(e);
}

static gdu_shim_totals totals(env *e)
{
    gdu_shim_totals t;
    gdu_shim_get_totals(e->s, &t);
    return t;
}

static const char *gpu_mode(env *e, unsigned index)
{
    static char mode[32];
    json_t *r = fake_rm_shim_report(e->s, false);
    json_t *gpu = json_array_get(json_object_get(r, "gpus"), index);
    snprintf(mode, sizeof mode, "%s",
             gpu ? json_string_value(json_object_get(gpu, "mode")) : "none");
    json_decref(r);
    return mode;
}

static void geforce_unlocked(void **state)
{
    env *e = env_new(DRIVER, 0, 0, 1);
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, 0x5c000a01, VA(1), 64 * MiB), GDU_NV_OK);
    uint32_t tpp = fake_rm_tpp_of(e->f, e->g.client, e->g.subdevice[0]);
    assert_int_not_equal(tpp, 0);
    assert_true(tpp >= 0xcaf40000); /* an RM-generated handle, never one of libcuda's */
    /* One VA space, the one registered with UVM: with both, RM's lookup
     * rejects every buffer (p2p.c:886-887). */
    assert_true(fake_rm_vaspace_registered(e->f, e->g.client, tpp, e->g.vaspace[0][0]));
    assert_false(fake_rm_vaspace_registered(e->f, e->g.client, tpp, e->g.vaspace[0][1]));
    assert_true(fake_rm_is_registered(e->f, e->g.client, 0x5c000a01));
    /* What nvidia-fs will find: the whole buffer, and a piece of it. */
    assert_int_equal(lc_pin(e->f, VA(1), 64 * MiB), GDU_PIN_FOUND);
    assert_int_equal(lc_pin(e->f, VA(1) + 0x1234, MiB), GDU_PIN_FOUND);
    assert_int_equal(lc_pin(e->f, VA(1) + 0x1234, 64 * MiB), GDU_PIN_PAST_END);
    gdu_shim_totals t = totals(e);
    assert_int_equal(t.objects_created, 1);
    assert_int_equal(t.registered, 1);
    assert_int_equal(t.live, 1);
    assert_string_equal(gpu_mode(e, 0), "unlocked");

    /* A second buffer reuses the same object. */
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, 0x5c000a02, VA(2), 2 * MiB), GDU_NV_OK);
    assert_int_equal(fake_rm_count_class(e->f, GDU_NV50_THIRD_PARTY_P2P), 1);
    assert_int_equal(fake_rm_registrations(e->f), 2);

    assert_int_equal(lc_pin(e->f, VA(2), 2 * MiB), GDU_PIN_FOUND);
    /* Two allocations side by side are still two registrations. */
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, 0x5c000a03, VA(2) + 2 * MiB, 2 * MiB),
                     GDU_NV_OK);
    assert_int_equal(lc_pin(e->f, VA(2) + MiB, 2 * MiB), GDU_PIN_SPANS);
    assert_int_equal(lc_free_mapped(e->s, &e->g, 0, 0x5c000a03, VA(2) + 2 * MiB, 2 * MiB),
                     GDU_NV_OK);

    /* cuMemFree: unregistered before the VA goes away. */
    assert_int_equal(lc_free_mapped(e->s, &e->g, 0, 0x5c000a01, VA(1), 64 * MiB), GDU_NV_OK);
    assert_false(fake_rm_is_registered(e->f, e->g.client, 0x5c000a01));
    assert_int_equal(lc_pin(e->f, VA(1), 64 * MiB), GDU_PIN_NOT_REGISTERED);
    assert_int_equal(lc_free_mapped(e->s, &e->g, 0, 0x5c000a02, VA(2), 2 * MiB), GDU_NV_OK);
    t = totals(e);
    assert_int_equal(t.registered, 3);
    assert_int_equal(t.unregistered, 3);
    assert_int_equal(t.live, 0);
    assert_int_equal(t.failures, 0);
    assert_int_equal(fake_rm_registrations(e->f), 0);
    json_t *r = fake_rm_shim_report(e->s, false);
    json_t *g = json_array_get(json_object_get(r, "gpus"), 0);
    assert_int_equal(json_integer_value(json_object_get(g, "va_space")), e->g.vaspace[0][0]);
    assert_string_equal(json_string_value(json_object_get(g, "va_space_source")), "uvm");
    json_decref(r);
    env_free(e);
}

/* The VA space the process registered with UVM is the one, not the first. */
static void uvm_vaspace_chosen(void **state)
{
    env *e = env_new(DRIVER, 0, 0, 0);
    lc_gpus *g = &e->g;
    lc_make_gpus(e->s, e->f, 0xc1d00001, 1, g);
    assert_int_equal(lc_uvm_register_vaspace(e->s, g->client, g->vaspace[0][1]), GDU_NV_OK);
    assert_int_equal(lc_alloc_mapped(e->s, g, 0, 0x5c000a01, VA(1), 64 * MiB), GDU_NV_OK);
    uint32_t tpp = fake_rm_tpp_of(e->f, g->client, g->subdevice[0]);
    assert_false(fake_rm_vaspace_registered(e->f, g->client, tpp, g->vaspace[0][0]));
    assert_true(fake_rm_vaspace_registered(e->f, g->client, tpp, g->vaspace[0][1]));
    assert_int_equal(lc_pin(e->f, VA(1), 64 * MiB), GDU_PIN_FOUND);
    env_free(e);
}

/* Made before UVM said which VA space (strict test mode makes it at
 * libcuda's alloc): the first is registered, then moved to UVM's once known. */
static void vaspace_moves_to_uvms(void **state)
{
    env *e = env_new(DRIVER, 2, 0, 0);
    lc_gpus *g = &e->g;
    uint32_t c = 0xc1d00001;
    fake_rm_next_client(e->f, c);
    lc_alloc(e->s, 0, 0, 0, GDU_NV01_ROOT_CLIENT, NULL);
    gdu_nv0080_alloc_params dp = {.deviceId = 0};
    gdu_nv2080_alloc_params sp = {.subDeviceId = 0};
    g->client = c;
    g->device[0] = 0x5c000100;
    g->subdevice[0] = 0x5c000101;
    g->vaspace[0][0] = 0x5c000102;
    g->vaspace[0][1] = 0x5c000103;
    lc_alloc(e->s, c, c, g->device[0], GDU_NV01_DEVICE_0, &dp);
    lc_alloc(e->s, c, g->device[0], g->subdevice[0], GDU_NV20_SUBDEVICE_0, &sp);
    lc_alloc(e->s, c, g->device[0], g->vaspace[0][0], GDU_FERMI_VASPACE_A, NULL);
    lc_alloc(e->s, c, g->device[0], g->vaspace[0][1], GDU_FERMI_VASPACE_A, NULL);
    gdu_nv503c_alloc_params ap = {GDU_NV503C_ALLOC_FLAGS_TYPE_BAR1};
    assert_int_equal(lc_alloc(e->s, c, g->subdevice[0], 0x5c0000f0, GDU_NV50_THIRD_PARTY_P2P, &ap),
                     0);
    uint32_t own = fake_rm_tpp_of(e->f, c, g->subdevice[0]);
    assert_true(fake_rm_vaspace_registered(e->f, c, own, g->vaspace[0][0]));
    assert_int_equal(lc_alloc_mapped(e->s, g, 0, 0x5c000a01, VA(1), 64 * MiB), GDU_NV_OK);
    assert_int_equal(lc_uvm_register_vaspace(e->s, c, g->vaspace[0][1]), GDU_NV_OK);
    /* Moved by making the object anew: RM keeps an object dependent on every
     * VA space once registered with it, so one moved by unregistering would
     * be invalidated with the first VA space. */
    uint32_t now = fake_rm_tpp_of(e->f, c, g->subdevice[0]);
    assert_int_not_equal(now, 0);
    assert_int_not_equal(now, own);
    uint32_t vas[4];
    assert_int_equal(fake_rm_vaspaces_under(e->f, c, g->subdevice[0], vas, 4), 1);
    assert_int_equal(vas[0], g->vaspace[0][1]);
    assert_int_equal(lc_pin(e->f, VA(1), 64 * MiB), GDU_PIN_FOUND); /* registered again */
    assert_int_equal(lc_alloc_mapped(e->s, g, 0, 0x5c000a02, VA(2), 64 * MiB), GDU_NV_OK);
    assert_int_equal(lc_pin(e->f, VA(2), 64 * MiB), GDU_PIN_FOUND);
    /* The process frees the first VA space: the object and its registrations stay. */
    assert_int_equal(lc_free(e->s, c, g->device[0], g->vaspace[0][0]), GDU_NV_OK);
    assert_int_equal(fake_rm_tpp_of(e->f, c, g->subdevice[0]), now);
    assert_int_equal(lc_pin(e->f, VA(1), 64 * MiB), GDU_PIN_FOUND);
    assert_int_equal(lc_alloc_mapped(e->s, g, 0, 0x5c000a03, VA(3), 64 * MiB), GDU_NV_OK);
    assert_int_equal(lc_pin(e->f, VA(3), 64 * MiB), GDU_PIN_FOUND);
    assert_int_equal(totals(e).failures, 0);
    assert_string_equal(gpu_mode(e, 0), "unlocked");
    env_free(e);
}

/* The fake-RM twin of tests/gpu/shim_rm_lifetime.c: freeing a VA space once
 * registered with an NV503C, though unregistered since, invalidates the
 * NV503C (its controls answer NV_ERR_RESOURCE_LOST, its dead handle keeps a
 * new NV503C off the subdevice until freed); one it never had takes nothing
 * with it. The shim follows: libcuda's object no longer followed, its handle
 * left to libcuda, the GPU's report says why nvidia-fs finds nothing there. */
static void vaspace_dependency_outlives_unregister(void **state)
{
    env *e = env_new(DRIVER, 0, 0, 2);
    lc_gpus *g = &e->g;
    gdu_nv503c_alloc_params ap = {GDU_NV503C_ALLOC_FLAGS_TYPE_BAR1};
    for (unsigned d = 0; d < 2; d++)
        assert_int_equal(lc_alloc(e->s, g->client, g->subdevice[d], 0x5c0000f0 + d,
                                  GDU_NV50_THIRD_PARTY_P2P, &ap),
                         GDU_NV_OK);
    /* GPU 0: register A, unregister A, free A. */
    gdu_nv503c_register_va_space a = {.hVASpace = g->vaspace[0][0]};
    gdu_nv503c_unregister_va_space ua = {.hVASpace = g->vaspace[0][0]};
    assert_int_equal(lc_control(e->s, g->client, 0x5c0000f0, GDU_NV503C_CTRL_CMD_REGISTER_VA_SPACE,
                                &a, sizeof a),
                     GDU_NV_OK);
    assert_int_equal(lc_control(e->s, g->client, 0x5c0000f0,
                                GDU_NV503C_CTRL_CMD_UNREGISTER_VA_SPACE, &ua, sizeof ua),
                     GDU_NV_OK);
    unsigned calls = fake_rm_calls_on(e->f, g->client, 0x5c0000f0);
    assert_int_equal(lc_free(e->s, g->client, g->device[0], g->vaspace[0][0]), GDU_NV_OK);
    /* libcuda's handle is libcuda's to free: the shim sends nothing to it. */
    assert_int_equal(fake_rm_calls_on(e->f, g->client, 0x5c0000f0), calls);
    assert_true(fake_rm_invalidated(e->f, g->client, 0x5c0000f0));
    assert_int_equal(fake_rm_tpp_of(e->f, g->client, g->subdevice[0]), 0);
    gdu_nv503c_register_va_space b = {.hVASpace = g->vaspace[0][1]};
    assert_int_equal(lc_control(e->s, g->client, 0x5c0000f0, GDU_NV503C_CTRL_CMD_REGISTER_VA_SPACE,
                                &b, sizeof b),
                     GDU_NV_ERR_RESOURCE_LOST);
    json_t *r = fake_rm_shim_report(e->s, false);
    json_t *g0 = json_array_get(json_object_get(r, "gpus"), 0);
    assert_string_equal(json_string_value(json_object_get(g0, "mode")), "native");
    const char *reason = json_string_value(json_object_get(g0, "reason"));
    assert_non_null(strstr(reason, "was invalidated, not freed, with VA space"));
    assert_non_null(strstr(reason, "until libcuda frees the dead handle"));
    json_decref(r);
    assert_non_null(
        strstr(fake_rm_log(e->f), "RM invalidated ThirdPartyP2P 0x5c0000f0 (libcuda's)"));
    /* The dead handle keeps libcuda's next NV503C out until libcuda frees it. */
    assert_int_equal(
        lc_alloc(e->s, g->client, g->subdevice[0], 0x5c0000f2, GDU_NV50_THIRD_PARTY_P2P, &ap),
        GDU_NV_ERR_STATE_IN_USE);
    assert_int_equal(lc_free(e->s, g->client, g->subdevice[0], 0x5c0000f0), GDU_NV_OK);
    assert_false(fake_rm_invalidated(e->f, g->client, 0x5c0000f0));
    assert_int_equal(
        lc_alloc(e->s, g->client, g->subdevice[0], 0x5c0000f2, GDU_NV50_THIRD_PARTY_P2P, &ap),
        GDU_NV_OK);
    /* GPU 1: B registered, A (never registered) freed: the object lives. */
    b.hVASpace = g->vaspace[1][1];
    assert_int_equal(lc_control(e->s, g->client, 0x5c0000f1, GDU_NV503C_CTRL_CMD_REGISTER_VA_SPACE,
                                &b, sizeof b),
                     GDU_NV_OK);
    assert_int_equal(lc_free(e->s, g->client, g->device[1], g->vaspace[1][0]), GDU_NV_OK);
    assert_int_equal(fake_rm_tpp_of(e->f, g->client, g->subdevice[1]), 0x5c0000f1);
    r = fake_rm_shim_report(e->s, false);
    for (unsigned d = 0; d < 2; d++) /* GPU 0 has libcuda's new object */
        assert_true(
            json_is_null(json_object_get(json_array_get(json_object_get(r, "gpus"), d), "reason")));
    json_decref(r);
    env_free(e);
}

/* The shim's own NV503C, invalidated as the process frees the VA space
 * registered with it: the shim frees the dead handle itself (on the driver a
 * new NV503C answers NV_ERR_STATE_IN_USE while it lives: the H200 run,
 * tests/fixtures/rm-lifetime-h200-2026-12-02.txt), so that the next mapping
 * makes a new object with the VA space left and registers what is still
 * mapped. Where that free fails, the GPU is failed and says why. */
static void own_invalidated_object_freed(void **state)
{
    env *e = env_new(DRIVER, 0, 0, 1);
    uint32_t c = e->g.client;
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, 0x5c000a01, VA(1), 64 * MiB), GDU_NV_OK);
    uint32_t old = fake_rm_tpp_of(e->f, c, e->g.subdevice[0]);
    assert_int_not_equal(old, 0);
    unsigned calls = fake_rm_calls_on(e->f, c, old);
    uint64_t rm_calls = totals(e).rm_calls;
    assert_int_equal(lc_free(e->s, c, e->g.device[0], e->g.vaspace[0][0]), GDU_NV_OK);
    assert_int_equal(fake_rm_calls_on(e->f, c, old), calls + 1); /* the shim's free of it */
    assert_false(fake_rm_invalidated(e->f, c, old));
    assert_int_equal(fake_rm_count_class(e->f, GDU_NV50_THIRD_PARTY_P2P), 0); /* dead or alive */
    char line[160];
    snprintf(line, sizeof line,
             "RM invalidated ThirdPartyP2P 0x%x (the shim's) with VA space 0x%x, once registered "
             "with it; its dead handle is freed",
             old, e->g.vaspace[0][0]);
    assert_non_null(strstr(fake_rm_log(e->f), line));
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, 0x5c000a02, VA(2), 64 * MiB), GDU_NV_OK);
    uint32_t now = fake_rm_tpp_of(e->f, c, e->g.subdevice[0]);
    assert_int_not_equal(now, 0);
    assert_int_not_equal(now, old);
    assert_true(fake_rm_vaspace_registered(e->f, c, now, e->g.vaspace[0][1]));
    assert_true(fake_rm_is_registered(e->f, c, 0x5c000a01));
    assert_true(fake_rm_is_registered(e->f, c, 0x5c000a02));
    assert_int_equal(lc_pin(e->f, VA(1), 64 * MiB), GDU_PIN_FOUND);
    gdu_shim_totals t = totals(e);
    assert_int_equal(t.objects_created, 2);
    assert_int_equal(t.failures, 0);
    assert_string_equal(gpu_mode(e, 0), "unlocked");
    env_free(e);

    /* The free of the dead handle fails (a fault injected into it). */
    e = env_new(DRIVER, 0, rm_calls + 1, 1);
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, 0x5c000a01, VA(1), 64 * MiB), GDU_NV_OK);
    old = fake_rm_tpp_of(e->f, c, e->g.subdevice[0]);
    assert_int_equal(lc_free(e->s, c, e->g.device[0], e->g.vaspace[0][0]), GDU_NV_OK);
    assert_true(fake_rm_invalidated(e->f, c, old)); /* left: RM still holds the handle */
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, 0x5c000a02, VA(2), 64 * MiB), GDU_NV_OK);
    assert_int_equal(totals(e).objects_created, 1); /* no new object tried */
    assert_int_equal(totals(e).failures, 1);
    json_t *r = fake_rm_shim_report(e->s, false);
    json_t *g0 = json_array_get(json_object_get(r, "gpus"), 0);
    assert_string_equal(json_string_value(json_object_get(g0, "mode")), "failed");
    assert_non_null(strstr(json_string_value(json_object_get(g0, "reason")),
                           "freeing the shim's ThirdPartyP2P"));
    json_decref(r);
    env_free(e);
}

/* Native: libcuda's own object must hold the program's buffers. A cuFile
 * buffer registered while it holds none (VMM memory, which libcuda does not
 * register) is reported with the reason; with libcuda's registration, not. */
static void native_object_left_empty(void **state)
{
    for (int registered = 0; registered < 2; registered++) {
        env *e = env_new(DRIVER, 0, 0, 1);
        gdu_nv503c_alloc_params ap = {GDU_NV503C_ALLOC_FLAGS_TYPE_BAR1};
        assert_int_equal(lc_alloc(e->s, e->g.client, e->g.subdevice[0], 0x5c0000f0,
                                  GDU_NV50_THIRD_PARTY_P2P, &ap),
                         GDU_NV_OK);
        gdu_nv503c_register_va_space rv = {.hVASpace = e->g.vaspace[0][0]};
        lc_control(e->s, e->g.client, 0x5c0000f0, GDU_NV503C_CTRL_CMD_REGISTER_VA_SPACE, &rv,
                   sizeof rv);
        assert_int_equal(lc_alloc(e->s, e->g.client, e->g.device[0], 0x5c000a01,
                                  GDU_NV01_MEMORY_LOCAL_USER, NULL),
                         GDU_NV_OK);
        if (registered) {
            gdu_nv503c_register_vidmem reg = {0x5c000a01, VA(1), 64 * MiB, 0};
            assert_int_equal(lc_control(e->s, e->g.client, 0x5c0000f0,
                                        GDU_NV503C_CTRL_CMD_REGISTER_VIDMEM, &reg, sizeof reg),
                             GDU_NV_OK);
        }
        assert_int_equal(lc_map(e->s, e->g.client, 0x5c000a01, VA(1), 64 * MiB, 0), GDU_NV_OK);
        gdu_shim_cufile_registered(e->s, VA(1), MiB, 0, 0, "device", false);
        json_t *r = fake_rm_shim_report(e->s, false);
        json_t *g = json_array_get(json_object_get(r, "gpus"), 0);
        assert_string_equal(json_string_value(json_object_get(g, "mode")), "native");
        const char *reason = json_string_value(json_object_get(g, "reason"));
        if (registered)
            assert_null(reason);
        else
            assert_non_null(strstr(reason, "held no registration when cuFile buffer"));
        json_decref(r);
        env_free(e);
    }
}

/* RM drops a registration only with its memory: a VA range freed while the
 * memory lives on (VMM: cuMemUnmap before cuMemRelease) must be unregistered
 * wherever it lies in the range, or whatever is mapped there next is found
 * as the old memory (or cannot be registered: 0x19). */
static void unmap_anywhere_inside(void **state)
{
    env *e = env_new(DRIVER, 0, 0, 1);
    uint32_t c = e->g.client;
    assert_int_equal(
        lc_alloc(e->s, c, e->g.device[0], 0x5c000a01, GDU_NV01_MEMORY_LOCAL_USER, NULL), 0);
    assert_int_equal(
        lc_alloc(e->s, c, e->g.device[0], 0x5c000a02, GDU_NV01_MEMORY_LOCAL_USER, NULL), 0);
    assert_int_equal(lc_map(e->s, c, 0x5c000a01, VA(3), 32 * MiB, 0), 0);
    assert_int_equal(lc_map(e->s, c, 0x5c000a02, VA(3) + 32 * MiB, 32 * MiB, 0), 0);
    assert_int_equal(lc_pin(e->f, VA(3) + 40 * MiB, MiB), GDU_PIN_FOUND);
    /* One free of the whole reserved range, starting at the first mapping. */
    assert_int_equal(lc_unmap(e->s, VA(3), 64 * MiB), 0);
    assert_false(fake_rm_is_registered(e->f, c, 0x5c000a01));
    assert_false(fake_rm_is_registered(e->f, c, 0x5c000a02));
    assert_int_equal(totals(e).mappings, 0);
    /* Other memory at the same VA: registered, and found as itself. */
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, 0x5c000a03, VA(3) + 32 * MiB, 32 * MiB), 0);
    gdu_pin_verdict v;
    fake_rm_pin_lookup(e->f, VA(3) + 40 * MiB, MiB, &v);
    assert_int_equal(v.rule, GDU_PIN_FOUND);
    assert_int_equal(v.memory, 0x5c000a03);
    /* A partial unmap (UVM_UNMAP_EXTERNAL) inside it ends it too. */
    assert_int_equal(lc_unmap_external(e->s, VA(3) + 48 * MiB, 2 * MiB), 0);
    assert_false(fake_rm_is_registered(e->f, c, 0x5c000a03));
    assert_int_equal(totals(e).failures, 0);
    env_free(e);
}

/* 0x19 is never taken for "registered": a stale registration of the shim's
 * (its unregister failed) in the way is taken back and the new memory
 * registered; one the shim did not make is left, and the memory counted as
 * not registered. */
static void duplicate_is_not_registered(void **state)
{
    /* Calls: 1 create, 2 VA space, 3 register 0x5c000a01, 4 its unregister (faulted). */
    env *e = env_new(DRIVER, 0, 4, 1);
    uint32_t c = e->g.client;
    assert_int_equal(
        lc_alloc(e->s, c, e->g.device[0], 0x5c000a01, GDU_NV01_MEMORY_LOCAL_USER, NULL), 0);
    assert_int_equal(lc_map(e->s, c, 0x5c000a01, VA(1), 64 * MiB, 0), 0);
    assert_int_equal(lc_unmap(e->s, VA(1), 64 * MiB), 0);
    assert_true(fake_rm_is_registered(e->f, c, 0x5c000a01)); /* stale: RM kept it */
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, 0x5c000a02, VA(1), 64 * MiB), 0);
    assert_false(fake_rm_is_registered(e->f, c, 0x5c000a01));
    assert_true(fake_rm_is_registered(e->f, c, 0x5c000a02));
    gdu_pin_verdict v;
    fake_rm_pin_lookup(e->f, VA(1), MiB, &v);
    assert_int_equal(v.memory, 0x5c000a02);
    json_t *r = fake_rm_shim_report(e->s, false);
    assert_int_equal(json_integer_value(json_object_get(
                         json_array_get(json_object_get(r, "gpus"), 0), "stale_unregistered")),
                     1);
    json_decref(r);

    /* A registration the shim did not make, on its object, at VA(5). */
    uint32_t tpp = fake_rm_tpp_of(e->f, c, e->g.subdevice[0]);
    assert_int_equal(
        lc_alloc(e->s, c, e->g.device[0], 0x5c000a05, GDU_NV01_MEMORY_LOCAL_USER, NULL), 0);
    gdu_nv503c_register_vidmem foreign = {0x5c000a05, VA(5), 64 * MiB, 0};
    gdu_nvos54 ctl = {.hClient = c,
                      .hObject = tpp,
                      .cmd = GDU_NV503C_CTRL_CMD_REGISTER_VIDMEM,
                      .params = (uint64_t)(uintptr_t)&foreign,
                      .paramsSize = sizeof foreign};
    fake_rm_ioctl(e->f, FAKE_CTL_FD, gdu_nv_ioctl_request(GDU_NV_ESC_RM_CONTROL, sizeof ctl), &ctl);
    assert_int_equal(ctl.status, 0);
    uint64_t before = totals(e).registered;
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, 0x5c000a06, VA(5), 64 * MiB), 0);
    assert_false(fake_rm_is_registered(e->f, c, 0x5c000a06));
    assert_int_equal(totals(e).registered, before);
    assert_non_null(strstr(fake_rm_log(e->f), "overlaps a registration the shim did not make"));
    env_free(e);
}

static void native_untouched(void **state)
{
    env *e = env_new(DRIVER, 0, 0, 1);
    gdu_nv503c_alloc_params ap = {GDU_NV503C_ALLOC_FLAGS_TYPE_BAR1};
    assert_int_equal(
        lc_alloc(e->s, e->g.client, e->g.subdevice[0], 0x5c0000f0, GDU_NV50_THIRD_PARTY_P2P, &ap),
        GDU_NV_OK);
    gdu_nv503c_register_va_space rv = {.hVASpace = e->g.vaspace[0][0]};
    assert_int_equal(lc_control(e->s, e->g.client, 0x5c0000f0,
                                GDU_NV503C_CTRL_CMD_REGISTER_VA_SPACE, &rv, sizeof rv),
                     0);
    gdu_nv503c_register_vidmem reg = {0x5c000a01, VA(1), 64 * MiB, 0};
    assert_int_equal(
        lc_alloc(e->s, e->g.client, e->g.device[0], 0x5c000a01, GDU_NV01_MEMORY_LOCAL_USER, NULL),
        0);
    assert_int_equal(lc_control(e->s, e->g.client, 0x5c0000f0, GDU_NV503C_CTRL_CMD_REGISTER_VIDMEM,
                                &reg, sizeof reg),
                     0);
    assert_int_equal(lc_map(e->s, e->g.client, 0x5c000a01, VA(1), 64 * MiB, 0), 0);
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, 0x5c000a02, VA(2), 64 * MiB),
                     0); /* VMM-like */
    gdu_shim_totals t = totals(e);
    assert_int_equal(t.rm_calls, 0);
    assert_int_equal(t.objects_created, 0);
    assert_int_equal(fake_rm_count_class(e->f, GDU_NV50_THIRD_PARTY_P2P), 1);
    assert_string_equal(gpu_mode(e, 0), "native");
    env_free(e);
}

static void handover_to_libcuda(void **state)
{
    env *e = env_new(DRIVER, 0, 0, 1);
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, 0x5c000a01, VA(1), 64 * MiB), 0);
    assert_int_equal(totals(e).objects_created, 1);
    /* libcuda makes its own later: it must get NV_OK, as without the shim. */
    gdu_nv503c_alloc_params ap = {GDU_NV503C_ALLOC_FLAGS_TYPE_BAR1};
    assert_int_equal(
        lc_alloc(e->s, e->g.client, e->g.subdevice[0], 0x5c0000f0, GDU_NV50_THIRD_PARTY_P2P, &ap),
        GDU_NV_OK);
    assert_int_equal(fake_rm_tpp_of(e->f, e->g.client, e->g.subdevice[0]), 0x5c0000f0);
    gdu_shim_totals t = totals(e);
    assert_int_equal(t.live, 0);
    assert_int_equal(t.failures, 0);
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, 0x5c000a02, VA(2), 64 * MiB), 0);
    assert_int_equal(totals(e).registered, 1); /* nothing more: native now */
    env_free(e);
}

static void alignment(void **state)
{
    env *e = env_new(DRIVER, 0, 0, 1);
    /* VA 4 KiB past 64 KiB, memory offset likewise: the aligned middle is registered. */
    assert_int_equal(
        lc_alloc(e->s, e->g.client, e->g.device[0], 0x5c000a01, GDU_NV01_MEMORY_LOCAL_USER, NULL),
        0);
    assert_int_equal(lc_map(e->s, e->g.client, 0x5c000a01, VA(1) + 0x1000, 4 * MiB, 0x1000), 0);
    assert_true(fake_rm_is_registered(e->f, e->g.client, 0x5c000a01));
    /* VA and offset that cannot both be aligned: skipped, not an error. */
    assert_int_equal(
        lc_alloc(e->s, e->g.client, e->g.device[0], 0x5c000a02, GDU_NV01_MEMORY_LOCAL_USER, NULL),
        0);
    assert_int_equal(lc_map(e->s, e->g.client, 0x5c000a02, VA(2) + 0x1000, 4 * MiB, 0), 0);
    assert_false(fake_rm_is_registered(e->f, e->g.client, 0x5c000a02));
    /* Smaller than 64 KiB: nothing to register. */
    assert_int_equal(
        lc_alloc(e->s, e->g.client, e->g.device[0], 0x5c000a03, GDU_NV01_MEMORY_LOCAL_USER, NULL),
        0);
    assert_int_equal(lc_map(e->s, e->g.client, 0x5c000a03, VA(3), 0x8000, 0), 0);
    json_t *r = fake_rm_shim_report(e->s, false);
    json_t *gpu = json_array_get(json_object_get(r, "gpus"), 0);
    assert_int_equal(json_integer_value(json_object_get(gpu, "registered")), 1);
    assert_int_equal(json_integer_value(json_object_get(gpu, "skipped")), 2);
    assert_int_equal(json_integer_value(json_object_get(gpu, "skipped_bytes")),
                     (4 * MiB - (4 * MiB - 0xf000) / 0x10000 * 0x10000) + 4 * MiB + 0x8000);
    assert_int_equal(json_integer_value(json_object_get(gpu, "failures")), 0);
    json_decref(r);
    env_free(e);
}

/* The rules the fake enforces, as measured on the real driver. */
static void fake_rules(void **state)
{
    env *e = env_new(DRIVER, 0, 0, 1);
    uint32_t c = e->g.client;
    gdu_nv503c_alloc_params ap = {GDU_NV503C_ALLOC_FLAGS_TYPE_BAR1};
    assert_int_equal(
        lc_alloc(e->s, c, e->g.subdevice[0], 0x5c0000f0, GDU_NV50_THIRD_PARTY_P2P, &ap), 0);
    assert_int_equal(
        lc_alloc(e->s, c, e->g.subdevice[0], 0x5c0000f1, GDU_NV50_THIRD_PARTY_P2P, &ap), 0x63);
    assert_int_equal(
        lc_alloc(e->s, c, e->g.device[0], 0x5c000a01, GDU_NV01_MEMORY_LOCAL_USER, NULL), 0);
    gdu_nv503c_register_vidmem r = {0x5c000a01, VA(1), 64 * MiB, 0};
    uint32_t cmd = GDU_NV503C_CTRL_CMD_REGISTER_VIDMEM, un = GDU_NV503C_CTRL_CMD_UNREGISTER_VIDMEM;
    assert_int_equal(lc_control(e->s, c, 0x5c0000f0, cmd, &r, sizeof r), 0);
    assert_int_equal(lc_control(e->s, c, 0x5c0000f0, cmd, &r, sizeof r), 0x19);
    gdu_nv503c_unregister_vidmem u = {0x5c000a01};
    assert_int_equal(lc_control(e->s, c, 0x5c0000f0, un, &u, sizeof u), 0);
    assert_int_equal(lc_control(e->s, c, 0x5c0000f0, un, &u, sizeof u), 0x57);
    r.address += 0x1000;
    assert_int_equal(lc_control(e->s, c, 0x5c0000f0, cmd, &r, sizeof r), 0x1f);
    r.address -= 0x1000;
    r.hMemory = 0x5c000bad;
    assert_int_equal(lc_control(e->s, c, 0x5c0000f0, cmd, &r, sizeof r), 0x57);
    env_free(e);
}

static void frees(void **state)
{
    env *e = env_new(DRIVER, 0, 0, 2);
    uint32_t c = e->g.client;
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, 0x5c000a01, VA(1), 64 * MiB), 0);
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, 0x5c000a02, VA(2), 64 * MiB), 0);
    /* Freeing a VA space invalidates the NV503C registered with it (its
     * registrations go); the shim frees the dead handle. */
    assert_int_equal(lc_free(e->s, c, e->g.device[0], e->g.vaspace[0][0]), 0);
    assert_int_equal(fake_rm_count_class(e->f, GDU_NV50_THIRD_PARTY_P2P), 0);
    assert_int_equal(fake_rm_registrations(e->f), 0);
    gdu_shim_totals t = totals(e);
    assert_int_equal(t.live, 0);
    /* The next mapping makes a new one, with the VA space left, and registers
     * what is still mapped. */
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, 0x5c000a03, VA(3), 64 * MiB), 0);
    t = totals(e);
    assert_int_equal(t.objects_created, 2);
    assert_int_equal(fake_rm_registrations(e->f), 3);
    assert_true(fake_rm_is_registered(e->f, c, 0x5c000a01));
    uint32_t tpp = fake_rm_tpp_of(e->f, c, e->g.subdevice[0]);
    assert_true(fake_rm_vaspace_registered(e->f, c, tpp, e->g.vaspace[0][1]));
    assert_int_equal(lc_pin(e->f, VA(1), 64 * MiB), GDU_PIN_FOUND);
    /* Freeing the device takes everything below it. */
    assert_int_equal(lc_free(e->s, c, c, e->g.device[0]), 0);
    assert_int_equal(fake_rm_registrations(e->f), 0);
    t = totals(e);
    assert_int_equal(t.registered, t.unregistered);
    /* The other device is untouched and still works. */
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 1, 0x5c000b01, VA(4), 64 * MiB), 0);
    assert_true(fake_rm_is_registered(e->f, c, 0x5c000b01));
    /* Freeing the client frees it all. */
    assert_int_equal(lc_free(e->s, c, c, c), 0);
    t = totals(e);
    assert_int_equal(t.clients, 0);
    assert_int_equal(t.mappings, 0);
    assert_int_equal(t.live, 0);
    assert_int_equal(t.failures, 0);
    env_free(e);
}

static void freed_while_mapped(void **state)
{
    env *e = env_new(DRIVER, 0, 0, 1);
    uint32_t c = e->g.client;
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, 0x5c000a01, VA(1), 64 * MiB), 0);
    assert_int_equal(lc_free(e->s, c, e->g.device[0], e->g.vaspace[0][0]),
                     0); /* the NV503C is invalidated, and freed by the shim */
    assert_int_equal(lc_free(e->s, c, e->g.device[0], 0x5c000a01), 0); /* freed, never unmapped */
    assert_int_equal(totals(e).mappings, 0);
    /* The handle comes back for unmapped memory; the next NV503C must not
     * register it at the old address. */
    assert_int_equal(
        lc_alloc(e->s, c, e->g.device[0], 0x5c000a01, GDU_NV01_MEMORY_LOCAL_USER, NULL), 0);
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, 0x5c000a02, VA(2), 64 * MiB), 0);
    assert_false(fake_rm_is_registered(e->f, c, 0x5c000a01));
    assert_true(fake_rm_is_registered(e->f, c, 0x5c000a02));
    gdu_shim_totals t = totals(e);
    assert_int_equal(t.objects_created, 2);
    assert_int_equal(t.live, 1);
    assert_int_equal(t.failures, 0);
    env_free(e);
}

static void devices_and_clients(void **state)
{
    env *e = env_new(DRIVER, 0, 0, 2);
    lc_gpus g2;
    lc_make_gpus(e->s, e->f, 0xc1d00002, 1, &g2);
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, 0x5c000a01, VA(1), 64 * MiB), 0);
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 1, 0x5c000a02, VA(2), 64 * MiB), 0);
    assert_int_equal(lc_alloc_mapped(e->s, &g2, 0, 0x5c000a01, VA(3), 64 * MiB),
                     0); /* same handle, other client */
    assert_int_equal(fake_rm_count_class(e->f, GDU_NV50_THIRD_PARTY_P2P), 3);
    assert_int_not_equal(fake_rm_tpp_of(e->f, e->g.client, e->g.subdevice[1]), 0);
    assert_int_not_equal(fake_rm_tpp_of(e->f, g2.client, g2.subdevice[0]), 0);
    assert_int_equal(fake_rm_registrations(e->f), 3);
    json_t *r = fake_rm_shim_report(e->s, false);
    assert_int_equal(json_array_size(json_object_get(r, "gpus")), 2); /* RM devices 0 and 1 */
    json_decref(r);
    assert_int_equal(totals(e).failures, 0);
    env_free(e);
}

static void vmm_mapped_twice(void **state)
{
    env *e = env_new(DRIVER, 0, 0, 1);
    assert_int_equal(
        lc_alloc(e->s, e->g.client, e->g.device[0], 0x5c000a01, GDU_NV01_MEMORY_LOCAL_USER, NULL),
        0);
    assert_int_equal(lc_map(e->s, e->g.client, 0x5c000a01, VA(1), 64 * MiB, 0), 0);
    assert_int_equal(lc_map(e->s, e->g.client, 0x5c000a01, VA(2), 64 * MiB, 0), 0);
    gdu_shim_totals t = totals(e);
    assert_int_equal(t.registered, 1);
    assert_int_equal(t.already_registered, 0);
    /* RM keys registrations by memory: the second mapping cannot be, and says so. */
    json_t *r = fake_rm_shim_report(e->s, false);
    assert_int_equal(json_integer_value(json_object_get(
                         json_array_get(json_object_get(r, "gpus"), 0), "second_mappings")),
                     1);
    json_decref(r);
    assert_int_equal(lc_pin(e->f, VA(1), 64 * MiB), GDU_PIN_FOUND);
    assert_int_equal(lc_pin(e->f, VA(2), 64 * MiB), GDU_PIN_NOT_REGISTERED);
    assert_int_equal(lc_unmap(e->s, VA(2), 64 * MiB), 0); /* not the registered VA: stays */
    assert_true(fake_rm_is_registered(e->f, e->g.client, 0x5c000a01));
    assert_int_equal(lc_unmap(e->s, VA(1), 64 * MiB), 0);
    assert_false(fake_rm_is_registered(e->f, e->g.client, 0x5c000a01));
    /* Mapped again at another VA (cuMemMap after cuMemUnmap): registered again there. */
    assert_int_equal(lc_map(e->s, e->g.client, 0x5c000a01, VA(3), 64 * MiB, 0), 0);
    assert_true(fake_rm_is_registered(e->f, e->g.client, 0x5c000a01));
    assert_int_equal(totals(e).failures, 0);
    env_free(e);
}

static void unknown_layout_refuses(void **state)
{
    env *e = env_new("470.256.02\n", 0, 0, 1);
    for (unsigned i = 0; i < 5; i++)
        assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, 0x5c000a01 + i, VA(i), 64 * MiB), 0);
    assert_int_equal(totals(e).rm_calls, 0);
    assert_int_equal(fake_rm_count_class(e->f, GDU_NV50_THIRD_PARTY_P2P), 0);
    assert_int_equal(fake_rm_log_lines(e->f, GDU_LOG_ERROR), 1);
    assert_non_null(strstr(fake_rm_log(e->f), "470.256.2"));
    assert_string_equal(gpu_mode(e, 0), "failed");
    env_free(e);
}

static void layout_mismatch_refuses(void **state)
{
    /* The driver says 32 GPUs but the blocks are laid out for 256: at offset
     * 1188 there is no known client, so the shim refuses, once. */
    env *e = env_new("535.288.01\n", 0, 0, 1);
    for (unsigned i = 0; i < 5; i++)
        assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, 0x5c000a01 + i, VA(i), 64 * MiB), 0);
    assert_int_equal(totals(e).rm_calls, 0);
    assert_int_equal(fake_rm_log_lines(e->f, GDU_LOG_ERROR), 1);
    assert_non_null(strstr(fake_rm_log(e->f), "does not match the 32-GPU layout"));
    json_t *r = fake_rm_shim_report(e->s, false);
    assert_non_null(json_string_value(json_object_get(r, "refused")));
    json_decref(r);
    env_free(e);
}

static void test_mode_drop_native(void **state)
{
    env *e = env_new(DRIVER, 1, 0, 1);
    uint32_t c = e->g.client, h = 0x5c0000f0;
    gdu_nv503c_alloc_params ap = {GDU_NV503C_ALLOC_FLAGS_TYPE_BAR1};
    assert_int_equal(lc_alloc(e->s, c, e->g.subdevice[0], h, GDU_NV50_THIRD_PARTY_P2P, &ap), 0);
    assert_int_equal(fake_rm_tpp_of(e->f, c, e->g.subdevice[0]), h); /* re-created, same handle */
    assert_int_equal(totals(e).objects_created, 1);
    gdu_nv503c_register_va_space rv = {.hVASpace = e->g.vaspace[0][0]};
    assert_int_equal(lc_control(e->s, c, h, GDU_NV503C_CTRL_CMD_REGISTER_VA_SPACE, &rv, sizeof rv),
                     0);
    /* cuMemAlloc as libcuda does it: register, then map. */
    assert_int_equal(
        lc_alloc(e->s, c, e->g.device[0], 0x5c000a01, GDU_NV01_MEMORY_LOCAL_USER, NULL), 0);
    gdu_nv503c_register_vidmem reg = {0x5c000a01, VA(1), 64 * MiB, 0};
    assert_int_equal(lc_control(e->s, c, h, GDU_NV503C_CTRL_CMD_REGISTER_VIDMEM, &reg, sizeof reg),
                     0);
    assert_int_equal(lc_map(e->s, c, 0x5c000a01, VA(1), 64 * MiB, 0), 0);
    assert_true(fake_rm_vaspace_registered(e->f, c, h, e->g.vaspace[0][0]));
    assert_false(
        fake_rm_vaspace_registered(e->f, c, h, e->g.vaspace[0][1])); /* libcuda's one is the one */
    assert_int_equal(lc_pin(e->f, VA(1), 64 * MiB), GDU_PIN_FOUND);
    /* VMM: only the shim registers it. */
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, 0x5c000a02, VA(2), 64 * MiB), 0);
    assert_true(fake_rm_is_registered(e->f, c, 0x5c000a02));
    /* Both count: libcuda's cuMemAlloc registration on the shim's object, and the shim's VMM one. */
    gdu_shim_totals t = totals(e);
    assert_int_equal(t.registered, 2);
    assert_int_equal(t.already_registered,
                     1); /* the cuMemAlloc buffer, found registered at its mapping */
    /* libcuda registering what the shim registered: the shim steps aside first. */
    gdu_nv503c_register_vidmem reg2 = {0x5c000a02, VA(2), 64 * MiB, 0};
    assert_int_equal(
        lc_control(e->s, c, h, GDU_NV503C_CTRL_CMD_REGISTER_VIDMEM, &reg2, sizeof reg2), 0);
    /* cuMemFree as libcuda does it: unregister, unmap, free. */
    gdu_nv503c_unregister_vidmem u = {0x5c000a01};
    assert_int_equal(lc_control(e->s, c, h, GDU_NV503C_CTRL_CMD_UNREGISTER_VIDMEM, &u, sizeof u),
                     0);
    assert_int_equal(lc_free_mapped(e->s, &e->g, 0, 0x5c000a01, VA(1), 64 * MiB), 0);
    assert_string_equal(gpu_mode(e, 0), "unlocked");
    t = totals(e);
    assert_int_equal(t.failures, 0);
    assert_int_equal(t.registered, 3);   /* + libcuda's second, after the shim stepped aside */
    assert_int_equal(t.unregistered, 2); /* the shim's VMM one (stepping aside), libcuda's first */
    assert_int_equal(t.live, fake_rm_registrations(e->f));
    json_t *r = fake_rm_shim_report(e->s, false);
    assert_int_equal(json_integer_value(json_object_get(
                         json_array_get(json_object_get(r, "gpus"), 0), "registered_by_libcuda")),
                     2);
    json_decref(r);
    env_free(e);
}

/* Strict test mode: after its alloc, no call of libcuda's on its NV503C reaches
 * RM; each is answered NV_OK, and the shim's own object (an RM-generated
 * handle) holds the one VA space and the registrations. */
static void strict_mode_answers_for_libcuda(void **state)
{
    env *e = env_new(DRIVER, 2, 0, 1);
    uint32_t c = e->g.client, h = 0x5c0000f0;
    gdu_nv503c_alloc_params ap = {GDU_NV503C_ALLOC_FLAGS_TYPE_BAR1};
    assert_int_equal(lc_alloc(e->s, c, e->g.subdevice[0], h, GDU_NV50_THIRD_PARTY_P2P, &ap), 0);
    uint32_t own = fake_rm_tpp_of(e->f, c, e->g.subdevice[0]);
    assert_true(own != 0 && own != h);
    assert_int_equal(fake_rm_calls_on(e->f, c, h), 1); /* the shim's free of it */
    assert_true(fake_rm_vaspace_registered(e->f, c, own, e->g.vaspace[0][0]));
    assert_false(fake_rm_vaspace_registered(e->f, c, own, e->g.vaspace[0][1]));
    gdu_nv503c_register_va_space rv = {.hVASpace = e->g.vaspace[0][0]};
    assert_int_equal(lc_control(e->s, c, h, GDU_NV503C_CTRL_CMD_REGISTER_VA_SPACE, &rv, sizeof rv),
                     0);
    assert_int_equal(rv.vaSpaceToken,
                     0xfe00); /* the fake's token of the shim's first registration */
    /* cuMemAlloc: libcuda's register is answered; the shim registers at the map. */
    assert_int_equal(
        lc_alloc(e->s, c, e->g.device[0], 0x5c000a01, GDU_NV01_MEMORY_LOCAL_USER, NULL), 0);
    gdu_nv503c_register_vidmem reg = {0x5c000a01, VA(1), 64 * MiB, 0};
    assert_int_equal(lc_control(e->s, c, h, GDU_NV503C_CTRL_CMD_REGISTER_VIDMEM, &reg, sizeof reg),
                     0);
    assert_false(fake_rm_is_registered(e->f, c, 0x5c000a01));
    assert_int_equal(lc_map(e->s, c, 0x5c000a01, VA(1), 64 * MiB, 0), 0);
    assert_true(fake_rm_is_registered(e->f, c, 0x5c000a01));
    assert_int_equal(lc_pin(e->f, VA(1), 64 * MiB), GDU_PIN_FOUND);
    uint32_t st;
    assert_int_equal(gdu_shim_probe_registered(e->s, VA(1), &st), 1);
    gdu_nv503c_unregister_vidmem u = {0x5c000a01};
    assert_int_equal(lc_control(e->s, c, h, GDU_NV503C_CTRL_CMD_UNREGISTER_VIDMEM, &u, sizeof u),
                     0);
    assert_true(
        fake_rm_is_registered(e->f, c, 0x5c000a01)); /* the shim's stays until the memory goes */
    assert_int_equal(lc_free_mapped(e->s, &e->g, 0, 0x5c000a01, VA(1), 64 * MiB), 0);
    assert_false(fake_rm_is_registered(e->f, c, 0x5c000a01));
    assert_int_equal(lc_free(e->s, c, e->g.subdevice[0], h), 0);
    assert_int_equal(fake_rm_calls_on(e->f, c, h), 1);
    gdu_shim_totals t = totals(e);
    assert_int_equal(t.registered, 1);
    assert_int_equal(t.unregistered, 1);
    assert_int_equal(t.failures, 0);
    json_t *r = fake_rm_shim_report(e->s, false);
    json_t *g = json_array_get(json_object_get(r, "gpus"), 0);
    assert_true(json_is_true(json_object_get(r, "test_strict")));
    assert_int_equal(json_integer_value(json_object_get(g, "registered_by_libcuda")), 0);
    assert_int_equal(json_integer_value(json_object_get(g, "answered_for_libcuda")), 4);
    assert_int_equal(json_integer_value(json_object_get(g, "va_spaces_registered")), 1);
    json_decref(r);
    /* Freeing the client leaves nothing behind. */
    assert_int_equal(lc_free(e->s, c, c, c), 0);
    assert_int_equal(fake_rm_count_class(e->f, GDU_NV50_THIRD_PARTY_P2P), 0);
    assert_int_equal(totals(e).objects, 0);
    env_free(e);
}

/* Found by fuzz_shim_sequence: in test mode libcuda must keep getting its
 * own answers even where the shim registered things on the re-made object. */
static void test_mode_steps_aside(void **state)
{
    env *e = env_new(DRIVER, 1, 0, 1);
    uint32_t c = e->g.client, h = 0x5c0000f0;
    gdu_nv503c_alloc_params ap = {GDU_NV503C_ALLOC_FLAGS_TYPE_BAR1};
    assert_int_equal(lc_alloc(e->s, c, e->g.subdevice[0], h, GDU_NV50_THIRD_PARTY_P2P, &ap), 0);
    /* A second NV503C: refused as natively, and the first one is kept. */
    assert_int_equal(lc_alloc(e->s, c, e->g.subdevice[0], h + 1, GDU_NV50_THIRD_PARTY_P2P, &ap),
                     0x63);
    assert_int_equal(lc_alloc(e->s, c, e->g.subdevice[0], h, GDU_NV50_THIRD_PARTY_P2P, &ap), 0x19);
    assert_int_equal(fake_rm_tpp_of(e->f, c, e->g.subdevice[0]), h);
    /* The shim registers its one VA space at the first mapping... */
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, 0x5c000a01, VA(1), 64 * MiB), 0);
    /* ...but libcuda unregistering them (never registered by it) gets 0x57, twice,
     * and registering one gets NV_OK then 0x19. */
    for (int k = 1; k >= 0; k--) {
        gdu_nv503c_unregister_va_space u = {.hVASpace = e->g.vaspace[0][k]};
        assert_int_equal(
            lc_control(e->s, c, h, GDU_NV503C_CTRL_CMD_UNREGISTER_VA_SPACE, &u, sizeof u), 0x57);
    }
    gdu_nv503c_register_va_space rv = {.hVASpace = e->g.vaspace[0][0]};
    assert_int_equal(lc_control(e->s, c, h, GDU_NV503C_CTRL_CMD_REGISTER_VA_SPACE, &rv, sizeof rv),
                     0);
    assert_int_equal(lc_control(e->s, c, h, GDU_NV503C_CTRL_CMD_REGISTER_VA_SPACE, &rv, sizeof rv),
                     0x19);
    /* Unregistering memory only the shim registered: 0x57, as natively. */
    gdu_nv503c_unregister_vidmem u = {0x5c000a01};
    assert_int_equal(lc_control(e->s, c, h, GDU_NV503C_CTRL_CMD_UNREGISTER_VIDMEM, &u, sizeof u),
                     0x57);
    env_free(e);
}

static void probe_after_remap(void **state)
{
    env *e = env_new(DRIVER, 0, 0, 1);
    uint32_t st;
    assert_int_equal(
        lc_alloc(e->s, e->g.client, e->g.device[0], 0x5c000a01, GDU_NV01_MEMORY_LOCAL_USER, NULL),
        0);
    assert_int_equal(lc_map(e->s, e->g.client, 0x5c000a01, VA(1), 64 * MiB, 0), 0);
    assert_int_equal(lc_unmap(e->s, VA(1), 64 * MiB), 0);
    assert_int_equal(lc_map(e->s, e->g.client, 0x5c000a01, VA(2), 64 * MiB, 0), 0);
    /* The old address is not registered, and asking must not undo the new registration. */
    assert_int_equal(gdu_shim_probe_registered(e->s, VA(1), &st), 0);
    assert_true(fake_rm_is_registered(e->f, e->g.client, 0x5c000a01));
    assert_int_equal(gdu_shim_probe_registered(e->s, VA(2), &st), 1);
    env_free(e);
}

static void probes(void **state)
{
    env *e = env_new(DRIVER, 0, 0, 1);
    uint32_t st;
    assert_int_equal(gdu_shim_probe_registered(e->s, VA(1), &st), -1);
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, 0x5c000a01, VA(1), 64 * MiB), 0);
    assert_int_equal(gdu_shim_probe_registered(e->s, VA(1), &st), 1);
    assert_int_equal(st, GDU_NV_ERR_INSERT_DUPLICATE_NAME);
    assert_int_equal(gdu_shim_probe_registered(e->s, VA(1) + 5 * MiB, &st),
                     1); /* inside the mapping */
    assert_int_equal(lc_free_mapped(e->s, &e->g, 0, 0x5c000a01, VA(1), 64 * MiB), 0);
    assert_int_equal(gdu_shim_probe_registered(e->s, VA(1), &st), 0);
    assert_int_equal(st, GDU_NV_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(fake_rm_registrations(e->f), 0);
    assert_int_equal(totals(e).rm_calls,
                     4); /* create, the VA space, register, unregister; probes uncounted */
    env_free(e);
}

/* CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED: 1 on a GPU the shim
 * unlocks, except for the RDMA networking libraries; native values alone. */
static void rdma_attribute(void **state)
{
    env *e = env_new(DRIVER, 0, 0, 1);
    assert_int_equal(
        gdu_shim_rdma_attribute(e->s, 0, NULL, "/usr/lib/x86_64-linux-gnu/libcufile.so.0"), 1);
    assert_int_equal(gdu_shim_rdma_attribute(e->s, 0, NULL, "libcudart.so.13"), 1);
    assert_int_equal(gdu_shim_rdma_attribute(e->s, 0, NULL, NULL), 1);
    assert_int_equal(gdu_shim_rdma_attribute(e->s, 0, NULL, "/opt/nccl/lib/libnccl.so.2"), 0);
    assert_int_equal(gdu_shim_rdma_attribute(e->s, 0, NULL, "libnccl-net.so"), 0);
    assert_int_equal(gdu_shim_rdma_attribute(e->s, 1, NULL, "libnccl.so.2"),
                     1); /* native: untouched */
    json_t *r = fake_rm_shim_report(e->s, false);
    json_t *a = json_object_get(r, "gpu_direct_rdma_attribute");
    assert_int_equal(json_integer_value(json_object_get(a, "answered_1")), 3);
    assert_int_equal(json_integer_value(json_object_get(a, "kept")), 2);
    assert_string_equal(json_string_value(json_object_get(a, "kept_for")), "libnccl.so.2");
    json_decref(r);
    env_free(e);

    assert_true(gdu_shim_caller_is_rdma_network("libnvshmem_host.so.3"));
    assert_true(gdu_shim_caller_is_rdma_network("/x/libucp.so.0"));
    assert_false(gdu_shim_caller_is_rdma_network("libcufile.so.0"));
    assert_false(gdu_shim_caller_is_rdma_network("python3.12"));

    /* GDUNLOCK_RDMA_ATTR=0: the answer is off; GDUNLOCK_TEST_RDMA_ATTR=0:
     * libcuda's 1 reads 0 (GeForce), and the unlock's answer still applies. */
    fake_rm *f = fake_rm_new();
    gdu_shim_ops ops = fake_rm_ops(f);
    gdu_shim_config off = {.driver_version = DRIVER, .pid = FAKE_RM_PID};
    gdu_shim *s = gdu_shim_new(&off, &ops);
    assert_int_equal(gdu_shim_rdma_attribute(s, 0, NULL, "libcufile.so.0"), 0);
    gdu_shim_free(s);
    gdu_shim_config zero = {
        .driver_version = DRIVER, .pid = FAKE_RM_PID, .test_rdma_attr_zero = true};
    s = gdu_shim_new(&zero, &ops);
    assert_int_equal(gdu_shim_rdma_attribute(s, 1, NULL, "libcufile.so.0"), 0);
    gdu_shim_free(s);
    zero.rdma_attr_answer = true;
    s = gdu_shim_new(&zero, &ops);
    assert_int_equal(gdu_shim_rdma_attribute(s, 1, NULL, "libcufile.so.0"), 1);
    assert_int_equal(gdu_shim_rdma_attribute(s, 1, NULL, "libnccl.so.2"), 0);
    gdu_shim_free(s);
    fake_rm_free(f);

    /* A driver the shim does not act on: libcuda's answer stays. */
    e = env_new("470.256.02\n", 0, 0, 1);
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, 0x5c000a01, VA(1), 64 * MiB),
                     0); /* refuses here */
    assert_int_equal(gdu_shim_rdma_attribute(e->s, 0, NULL, "libcufile.so.0"), 0);
    env_free(e);
}

/* The strict GeForce stand-in with the attribute answers on, one GPU, and a
 * 64 MiB allocation mapped at VA(1) (registered by the shim). */
static env *standin_with_buffer(bool rdma_network)
{
    env *e = env_new(DRIVER, 2, 0, 0); /* strict stand-in: every registration is the shim's */
    gdu_shim_free(e->s);
    gdu_shim_config cfg = {.log_level = GDU_LOG_DEBUG,
                           .test_drop_native = true,
                           .test_strict = true,
                           .driver_version = DRIVER,
                           .pid = FAKE_RM_PID,
                           .rdma_attr_answer = true,
                           .rdma_network = rdma_network,
                           .test_rdma_attr_zero = true};
    gdu_shim_ops ops = fake_rm_ops(e->f);
    e->s = gdu_shim_new(&cfg, &ops);
    lc_make_gpus(e->s, e->f, 0xc1d00001, 1, &e->g);
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, 0x5c000a01, VA(1), 64 * MiB), GDU_NV_OK);
    return e;
}

/* gdunlock run --rdma (rdma_network): NCCL's GPU check (cudaDevAttr
 * GPUDirectRDMASupported through NCCL's own cudart, plugin/net.cc:452-463 of
 * NCCL 2.28.9) and ibverbs programs get the unlock's 1 for the device and for
 * a buffer the shim registered, under the GeForce stand-in; so does the
 * DMA-BUF attribute (NCCL's route (b), init.cc:355-371): the shim makes the
 * dma-bufs itself. */
static void rdma_network_answers(void **state)
{
    env *e = standin_with_buffer(true);
    static const char *const network[] = {"/opt/nccl/lib/libnccl.so.2", "libnccl-net.so",
                                          "libibverbs.so.1", "libucp.so.0"};
    for (size_t i = 0; i < sizeof network / sizeof network[0]; i++) {
        assert_int_equal(gdu_shim_rdma_attribute(e->s, 1, NULL, network[i]), 1);
        assert_int_equal(gdu_shim_rdma_pointer_attribute(e->s, 1, VA(1), network[i]), 1);
        /* memory nobody registered: no 1, whoever asks */
        assert_int_equal(gdu_shim_rdma_pointer_attribute(e->s, 1, VA(7), network[i]), 0);
    }
    /* the DMA-BUF route: the shim makes the dma-bufs (test_shim_dmabuf.c) */
    assert_int_equal(gdu_shim_dma_buf_attribute(e->s, 1, NULL, "libnccl.so.2"), 1);
    json_t *r = fake_rm_shim_report(e->s, false);
    json_t *a = json_object_get(r, "gpu_direct_rdma_attribute");
    assert_true(json_is_true(json_object_get(a, "rdma_network")));
    assert_int_equal(json_integer_value(json_object_get(a, "answered_1_for_network")), 4);
    assert_int_equal(json_integer_value(json_object_get(a, "kept")), 0);
    assert_true(json_is_null(json_object_get(a, "kept_for")));
    a = json_object_get(r, "gpu_direct_rdma_pointer_attribute");
    assert_int_equal(json_integer_value(json_object_get(a, "answered_1_for_network")), 4);
    assert_int_equal(json_integer_value(json_object_get(a, "kept")), 4);
    json_decref(r);
    env_free(e);

    /* Without the stand-in the DMA-BUF attribute is libcuda's, 0 or 1. */
    fake_rm *f = fake_rm_new();
    gdu_shim_ops ops = fake_rm_ops(f);
    gdu_shim_config plain = {.driver_version = DRIVER, .pid = FAKE_RM_PID};
    gdu_shim *s = gdu_shim_new(&plain, &ops);
    assert_int_equal(gdu_shim_dma_buf_attribute(s, 1, NULL, NULL), 1);
    assert_int_equal(gdu_shim_dma_buf_attribute(s, 0, NULL, NULL), 0);
    gdu_shim_free(s);
    fake_rm_free(f);
}

/* CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE: 1 for a buffer the shim
 * registered on a GPU it unlocked, libcuda's answer for anything else; under
 * the GeForce stand-in libcuda's 1 reads 0 first. */
static int pointer_attr(gdu_shim *s, int libcuda, uint64_t ptr, const char *caller)
{
    return gdu_shim_rdma_pointer_attribute(s, libcuda, ptr, caller);
}

static void rdma_pointer_attribute(void **state)
{
    env *e = standin_with_buffer(false);
    assert_true(fake_rm_is_registered(e->f, e->g.client, 0x5c000a01));
    assert_int_equal(pointer_attr(e->s, 1, VA(1), "libcufile.so.0"), 1);
    assert_int_equal(pointer_attr(e->s, 0, VA(1) + 63 * MiB, "libcufile.so.0"), 1);
    assert_int_equal(pointer_attr(e->s, 1, VA(1) + 64 * MiB, "libcufile.so.0"), 0); /* past it */
    assert_int_equal(pointer_attr(e->s, 1, VA(7), NULL), 0); /* nothing mapped: the stand-in's 0 */
    assert_int_equal(pointer_attr(e->s, 1, VA(1), "/opt/nccl/lib/libnccl.so.2"), 0);
    json_t *r = fake_rm_shim_report(e->s, false);
    json_t *a = json_object_get(r, "gpu_direct_rdma_pointer_attribute");
    assert_int_equal(json_integer_value(json_object_get(a, "asked_with_0")), 5);
    assert_int_equal(json_integer_value(json_object_get(a, "answered_1")), 2);
    assert_int_equal(json_integer_value(json_object_get(a, "kept")), 3);
    assert_string_equal(json_string_value(json_object_get(a, "kept_for")), "libnccl.so.2");
    json_decref(r);
    /* Freed: registered no more, 0 again. */
    assert_int_equal(lc_free_mapped(e->s, &e->g, 0, 0x5c000a01, VA(1), 64 * MiB), GDU_NV_OK);
    assert_int_equal(pointer_attr(e->s, 1, VA(1), "libcufile.so.0"), 0);
    env_free(e);

    /* Native: libcuda's object holds the registration; its answers pass. */
    e = env_new(DRIVER, 0, 0, 1);
    gdu_nv503c_alloc_params ap = {GDU_NV503C_ALLOC_FLAGS_TYPE_BAR1};
    assert_int_equal(
        lc_alloc(e->s, e->g.client, e->g.subdevice[0], 0x5c0000f0, GDU_NV50_THIRD_PARTY_P2P, &ap),
        GDU_NV_OK);
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, 0x5c000a02, VA(2), 64 * MiB), GDU_NV_OK);
    assert_int_equal(pointer_attr(e->s, 0, VA(2), "libcufile.so.0"), 0);
    assert_int_equal(pointer_attr(e->s, 1, VA(2), "libcufile.so.0"), 1);
    env_free(e);

    /* The shim's own registration, without the stand-in: libcuda's 0 becomes 1. */
    e = env_new(DRIVER, 0, 0, 1);
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, 0x5c000a03, VA(3), 64 * MiB), GDU_NV_OK);
    assert_int_equal(pointer_attr(e->s, 0, VA(3) + 4096, "libcufile.so.0"), 1);
    env_free(e);
}

/* cuFile buffers the kernel cannot pin get the reason the memory's kind
 * gives (host, managed, MPS), not only the model's "not registered"; a
 * registered buffer stays found whatever else is said. */
static const char *cufile_why(env *e, size_t index, const char *key)
{
    static char text[512];
    json_t *r = fake_rm_shim_report(e->s, false);
    json_t *b =
        json_array_get(json_object_get(json_object_get(r, "cufile_buffers"), "buffers"), index);
    json_t *v = json_object_get(b, key);
    snprintf(text, sizeof text, "%s", json_is_string(v) ? json_string_value(v) : "(none)");
    json_decref(r);
    return text;
}

static void cufile_buffer_diagnostics(void **state)
{
    env *e = env_new(DRIVER, 0, 0, 1);
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, 0x5c000a01, VA(1), 64 * MiB), GDU_NV_OK);
    gdu_shim_cufile_registered(e->s, 0x10000000, MiB, 0, 0, "host", false);
    gdu_shim_cufile_registered(e->s, VA(3), MiB, 0, 0, "managed", false);
    gdu_shim_cufile_registered(e->s, VA(4), MiB, 0, 0, "device", true);
    gdu_shim_cufile_registered(e->s, VA(1), MiB, 0, 0, "device", true);
    gdu_shim_cufile_registered(e->s, VA(1) + 60 * MiB, 8 * MiB, 0, 0, "device", false);
    assert_non_null(strstr(cufile_why(e, 0, "why"), "host memory: nvidia-fs pins only GPU memory"));
    assert_non_null(strstr(cufile_why(e, 1, "why"), "managed memory (cuMemAllocManaged)"));
    assert_non_null(strstr(cufile_why(e, 2, "why"), "MPS: the GPU memory belongs to the MPS"));
    assert_string_equal(cufile_why(e, 3, "kernel_lookup"), "found");
    assert_null(strstr(cufile_why(e, 3, "why"), "MPS"));
    assert_string_equal(cufile_why(e, 4, "kernel_lookup"), "past-end");
    env_free(e);
}

/* RM's BAR1 figures reach the report, asked again for each (other
 * processes move them), and RM's size, not the PCI BAR's, bounds the kernel
 * lookup's budget (p2p.c:1019-1030 counts RM's). */
static void rm_bar1_figures(void **state)
{
    env *e = env_new(DRIVER, 0, 0, 0);
    fake_rm_set_pci_bus(e->f, 0x1b);
    fake_rm_set_bar1(e->f, 256 * 1024 * MiB);        /* the PCI BAR: 256 GiB */
    fake_rm_set_rm_bar1(e->f, 256 * MiB, 200 * MiB); /* RM counts 256 MiB */
    lc_make_gpus(e->s, e->f, 0xc1d00001, 1, &e->g);
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, 0x5c000a01, VA(1), 64 * MiB), GDU_NV_OK);
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, 0x5c000a02, VA(2), 256 * MiB), GDU_NV_OK);
    gdu_shim_cufile_registered(e->s, VA(1), 64 * MiB, 0, 0, "device", false);
    gdu_shim_cufile_registered(e->s, VA(2), 256 * MiB, 0, 0, "device", false);
    assert_string_equal(cufile_why(e, 0, "kernel_lookup"), "found");
    assert_string_equal(cufile_why(e, 1, "kernel_lookup"), "bar1-full");
    json_t *r = fake_rm_shim_report(e->s, false);
    json_t *g = json_array_get(json_object_get(r, "gpus"), 0);
    assert_string_equal(json_string_value(json_object_get(g, "pci")), "0000:1b:00.0");
    assert_int_equal(json_integer_value(json_object_get(g, "bar1_bytes")), 256 * 1024 * MiB);
    assert_int_equal(json_integer_value(json_object_get(g, "rm_bar1_bytes")), 256 * MiB);
    assert_int_equal(json_integer_value(json_object_get(g, "rm_bar1_available_bytes")), 200 * MiB);
    assert_true(json_is_null(json_object_get(g, "rm_bar1_why")));
    json_decref(r);
    unsigned asked = fake_rm_rm_bar1_asked(e->f);
    fake_rm_set_rm_bar1(e->f, 256 * MiB, 100 * MiB); /* another process pinned 100 MiB */
    r = fake_rm_shim_report(e->s, false);
    g = json_array_get(json_object_get(r, "gpus"), 0);
    assert_int_equal(json_integer_value(json_object_get(g, "rm_bar1_available_bytes")), 100 * MiB);
    assert_int_equal(fake_rm_rm_bar1_asked(e->f), asked + 1);
    json_decref(r);
    /* RM not answering: the figures are 0 and the report says why. */
    fake_rm_set_rm_bar1(e->f, 0, 0);
    r = fake_rm_shim_report(e->s, false);
    g = json_array_get(json_object_get(r, "gpus"), 0);
    assert_int_equal(json_integer_value(json_object_get(g, "rm_bar1_bytes")), 0);
    assert_non_null(
        strstr(json_string_value(json_object_get(g, "rm_bar1_why")), "no BAR1 figures"));
    json_decref(r);
    env_free(e);
}

static void passes_through(void **state)
{
    env *e = env_new(DRIVER, 0, 0, 1);
    /* Not an NVIDIA fd: the real ioctl's result and errno come back as they are. */
    errno = 0;
    gdu_nvos00 p = {0};
    assert_int_equal(gdu_shim_ioctl(e->s, 9, 0xc0104629UL, &p), -1);
    assert_int_equal(errno, ENOTTY);
    /* A failing RM call: its status comes back unchanged. */
    gdu_nv503c_alloc_params ap = {GDU_NV503C_ALLOC_FLAGS_TYPE_BAR1};
    assert_int_equal(
        lc_alloc(e->s, e->g.client, e->g.device[0], 0x5c0000f0, GDU_NV50_THIRD_PARTY_P2P, &ap),
        GDU_NV_ERR_INVALID_OBJECT_PARENT);
    /* A bad argument block reaches the driver untouched (which answers EFAULT). */
    errno = 0;
    assert_int_equal(gdu_shim_ioctl(e->s, FAKE_CTL_FD, 0xc0104629UL, NULL), -1);
    assert_int_equal(errno, EFAULT);
    env_free(e);
}

/* Runs one full GeForce-like program; every call must get what it gets without the shim. */
static unsigned scenario(gdu_shim *s, fake_rm *f)
{
    lc_gpus g;
    unsigned bad = 0;
    lc_make_gpus(s, f, 0xc1d00001, 2, &g);
    for (unsigned i = 0; i < 4; i++) {
        bad += lc_alloc_mapped(s, &g, i % 2, 0x5c000a01 + i, VA(i), 64 * MiB) != 0;
        bad += lc_alloc_mapped(s, &g, i % 2, 0x5c000b01 + i, VA(i + 8), 2 * MiB) != 0;
        bad += lc_free_mapped(s, &g, i % 2, 0x5c000a01 + i, VA(i), 64 * MiB) != 0;
    }
    bad += lc_free(s, g.client, g.device[0], g.vaspace[0][1]) != 0;
    bad += lc_alloc_mapped(s, &g, 0, 0x5c000c01, VA(20), 64 * MiB) != 0;
    bad += lc_free(s, g.client, g.client, g.device[1]) != 0;
    bad += lc_free(s, g.client, g.client, g.client) != 0;
    return bad;
}

static void fault_injection(void **state)
{
    fake_rm *f = fake_rm_new();
    gdu_shim *s = lc_shim(f, DRIVER, 0, 0);
    assert_int_equal(scenario(s, f), 0);
    gdu_shim_totals clean;
    gdu_shim_get_totals(s, &clean);
    gdu_shim_free(s);
    fake_rm_free(f);
    assert_true(clean.rm_calls > 10);
    for (uint64_t n = 1; n <= clean.rm_calls; n++) {
        f = fake_rm_new();
        s = lc_shim(f, DRIVER, 0, n);
        assert_int_equal(scenario(s, f), 0); /* the program is unaffected */
        gdu_shim_totals t;
        gdu_shim_get_totals(s, &t);
        assert_true(t.failures >= 1);
        assert_int_equal(fake_rm_registrations(f), 0);
        assert_int_equal(fake_rm_count_class(f, GDU_NV50_THIRD_PARTY_P2P), 0);
        gdu_shim_free(s);
        fake_rm_free(f);
    }
}

struct storm {
    env *e;
    unsigned thread;
    unsigned bad;
};

enum { STORM_THREADS = 8, STORM_ROUNDS = 300 };

static void *storm_thread(void *arg)
{
    struct storm *st = arg;
    for (unsigned i = 0; i < STORM_ROUNDS; i++) {
        uint32_t mem = 0x60000000 + st->thread * 0x10000 + i;
        uint64_t va = VA(1 + st->thread * STORM_ROUNDS + i);
        unsigned dev = (st->thread + i) % 2;
        st->bad += lc_alloc_mapped(st->e->s, &st->e->g, dev, mem, va, 2 * MiB) != 0;
        st->bad += lc_free_mapped(st->e->s, &st->e->g, dev, mem, va, 2 * MiB) != 0;
    }
    return NULL;
}

static void concurrent_storm(void **state)
{
    env *e = env_new(DRIVER, 0, 0, 2);
    pthread_t th[STORM_THREADS];
    struct storm st[STORM_THREADS];
    for (unsigned i = 0; i < STORM_THREADS; i++) {
        st[i] = (struct storm){e, i, 0};
        pthread_create(&th[i], NULL, storm_thread, &st[i]);
    }
    for (unsigned i = 0; i < STORM_THREADS; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(st[i].bad, 0);
    }
    gdu_shim_totals t = totals(e);
    assert_int_equal(t.objects_created, 2);
    assert_int_equal(t.registered, STORM_THREADS * STORM_ROUNDS);
    assert_int_equal(t.unregistered, STORM_THREADS * STORM_ROUNDS);
    assert_int_equal(t.failures, 0);
    assert_int_equal(t.mappings, 0);
    assert_int_equal(fake_rm_registrations(e->f), 0);
    env_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(geforce_unlocked),
        cmocka_unit_test(uvm_vaspace_chosen),
        cmocka_unit_test(vaspace_moves_to_uvms),
        cmocka_unit_test(vaspace_dependency_outlives_unregister),
        cmocka_unit_test(own_invalidated_object_freed),
        cmocka_unit_test(native_object_left_empty),
        cmocka_unit_test(unmap_anywhere_inside),
        cmocka_unit_test(duplicate_is_not_registered),
        cmocka_unit_test(native_untouched),
        cmocka_unit_test(handover_to_libcuda),
        cmocka_unit_test(alignment),
        cmocka_unit_test(fake_rules),
        cmocka_unit_test(frees),
        cmocka_unit_test(freed_while_mapped),
        cmocka_unit_test(devices_and_clients),
        cmocka_unit_test(vmm_mapped_twice),
        cmocka_unit_test(unknown_layout_refuses),
        cmocka_unit_test(layout_mismatch_refuses),
        cmocka_unit_test(test_mode_drop_native),
        cmocka_unit_test(test_mode_steps_aside),
        cmocka_unit_test(strict_mode_answers_for_libcuda),
        cmocka_unit_test(probe_after_remap),
        cmocka_unit_test(probes),
        cmocka_unit_test(rdma_attribute),
        cmocka_unit_test(rdma_pointer_attribute),
        cmocka_unit_test(rdma_network_answers),
        cmocka_unit_test(cufile_buffer_diagnostics),
        cmocka_unit_test(rm_bar1_figures),
        cmocka_unit_test(passes_through),
        cmocka_unit_test(fault_injection),
        cmocka_unit_test(concurrent_storm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
