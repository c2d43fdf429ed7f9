/* The shim core against the fake RM, on synthetic ioctl sequences: GeForce
 * state, native, hand-over, frees, several devices and clients, alignment,
 * UVM layouts, test mode, probes, fault injection, 8 threads. */
#include "driverabi/nv503c.h"
#include "driverabi/nv_classes.h"
#include "driverabi/nv_status.h"
#include "driverabi/nvos.h"
#include "fake_rm_client.h"

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
#define VA(n) (0x7f0000000000ull + (uint64_t)(n) * 256 * MiB)

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
    json_t *r = gdu_shim_report(e->s);
    json_t *gpu = json_array_get(json_object_get(r, "gpus"), index);
    snprintf(mode, sizeof mode, "%s", gpu ? json_string_value(json_object_get(gpu, "mode")) : "none");
    json_decref(r);
    return mode;
}

static void geforce_unlocked(void **state)
{
    env *e = env_new(DRIVER, 0, 0, 1);
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, 0x5c000a01, VA(1), 64 * MiB), GDU_NV_OK);
    uint32_t p2p = fake_rm_p2p_of(e->f, e->g.client, e->g.subdevice[0]);
    assert_int_not_equal(p2p, 0);
    assert_true(p2p >= 0xcaf40000); /* an RM-generated handle, never one of libcuda's */
    assert_true(fake_rm_vaspace_registered(e->f, e->g.client, p2p, e->g.vaspace[0][0]));
    assert_true(fake_rm_vaspace_registered(e->f, e->g.client, p2p, e->g.vaspace[0][1]));
    assert_true(fake_rm_is_registered(e->f, e->g.client, 0x5c000a01));
    gdu_shim_totals t = totals(e);
    assert_int_equal(t.objects_created, 1);
    assert_int_equal(t.registered, 1);
    assert_int_equal(t.live, 1);
    assert_string_equal(gpu_mode(e, 0), "unlocked");

    /* A second buffer reuses the same object. */
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, 0x5c000a02, VA(2), 2 * MiB), GDU_NV_OK);
    assert_int_equal(fake_rm_count_class(e->f, GDU_NV50_THIRD_PARTY_P2P), 1);
    assert_int_equal(fake_rm_registrations(e->f), 2);

    /* cuMemFree: unregistered before the VA goes away. */
    assert_int_equal(lc_free_mapped(e->s, &e->g, 0, 0x5c000a01, VA(1), 64 * MiB), GDU_NV_OK);
    assert_false(fake_rm_is_registered(e->f, e->g.client, 0x5c000a01));
    assert_int_equal(lc_free_mapped(e->s, &e->g, 0, 0x5c000a02, VA(2), 2 * MiB), GDU_NV_OK);
    t = totals(e);
    assert_int_equal(t.registered, 2);
    assert_int_equal(t.unregistered, 2);
    assert_int_equal(t.live, 0);
    assert_int_equal(t.failures, 0);
    assert_int_equal(fake_rm_registrations(e->f), 0);
    env_free(e);
}

static void native_untouched(void **state)
{
    env *e = env_new(DRIVER, 0, 0, 1);
    gdu_nv503c_alloc_params ap = {GDU_NV503C_ALLOC_FLAGS_TYPE_BAR1};
    assert_int_equal(lc_alloc(e->s, e->g.client, e->g.subdevice[0], 0x5c0000f0, GDU_NV50_THIRD_PARTY_P2P, &ap), GDU_NV_OK);
    gdu_nv503c_register_va_space rv = {.hVASpace = e->g.vaspace[0][0]};
    assert_int_equal(lc_control(e->s, e->g.client, 0x5c0000f0, GDU_NV503C_CTRL_CMD_REGISTER_VA_SPACE, &rv, sizeof rv), 0);
    gdu_nv503c_register_vidmem reg = {0x5c000a01, VA(1), 64 * MiB, 0};
    assert_int_equal(lc_alloc(e->s, e->g.client, e->g.device[0], 0x5c000a01, GDU_NV01_MEMORY_LOCAL_USER, NULL), 0);
    assert_int_equal(lc_control(e->s, e->g.client, 0x5c0000f0, GDU_NV503C_CTRL_CMD_REGISTER_VIDMEM, &reg, sizeof reg), 0);
    assert_int_equal(lc_map(e->s, e->g.client, 0x5c000a01, VA(1), 64 * MiB, 0), 0);
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, 0x5c000a02, VA(2), 64 * MiB), 0); /* VMM-like */
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
    assert_int_equal(lc_alloc(e->s, e->g.client, e->g.subdevice[0], 0x5c0000f0, GDU_NV50_THIRD_PARTY_P2P, &ap), GDU_NV_OK);
    assert_int_equal(fake_rm_p2p_of(e->f, e->g.client, e->g.subdevice[0]), 0x5c0000f0);
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
    assert_int_equal(lc_alloc(e->s, e->g.client, e->g.device[0], 0x5c000a01, GDU_NV01_MEMORY_LOCAL_USER, NULL), 0);
    assert_int_equal(lc_map(e->s, e->g.client, 0x5c000a01, VA(1) + 0x1000, 4 * MiB, 0x1000), 0);
    assert_true(fake_rm_is_registered(e->f, e->g.client, 0x5c000a01));
    /* VA and offset that cannot both be aligned: skipped, not an error. */
    assert_int_equal(lc_alloc(e->s, e->g.client, e->g.device[0], 0x5c000a02, GDU_NV01_MEMORY_LOCAL_USER, NULL), 0);
    assert_int_equal(lc_map(e->s, e->g.client, 0x5c000a02, VA(2) + 0x1000, 4 * MiB, 0), 0);
    assert_false(fake_rm_is_registered(e->f, e->g.client, 0x5c000a02));
    /* Smaller than 64 KiB: nothing to register. */
    assert_int_equal(lc_alloc(e->s, e->g.client, e->g.device[0], 0x5c000a03, GDU_NV01_MEMORY_LOCAL_USER, NULL), 0);
    assert_int_equal(lc_map(e->s, e->g.client, 0x5c000a03, VA(3), 0x8000, 0), 0);
    json_t *r = gdu_shim_report(e->s);
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
    assert_int_equal(lc_alloc(e->s, c, e->g.subdevice[0], 0x5c0000f0, GDU_NV50_THIRD_PARTY_P2P, &ap), 0);
    assert_int_equal(lc_alloc(e->s, c, e->g.subdevice[0], 0x5c0000f1, GDU_NV50_THIRD_PARTY_P2P, &ap), 0x63);
    assert_int_equal(lc_alloc(e->s, c, e->g.device[0], 0x5c000a01, GDU_NV01_MEMORY_LOCAL_USER, NULL), 0);
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
    /* Freeing a VA space takes the NV503C registered with it (and its registrations). */
    assert_int_equal(lc_free(e->s, c, e->g.device[0], e->g.vaspace[0][1]), 0);
    assert_int_equal(fake_rm_count_class(e->f, GDU_NV50_THIRD_PARTY_P2P), 0);
    assert_int_equal(fake_rm_registrations(e->f), 0);
    gdu_shim_totals t = totals(e);
    assert_int_equal(t.live, 0);
    /* The next mapping makes a new one and registers what is still mapped. */
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, 0x5c000a03, VA(3), 64 * MiB), 0);
    t = totals(e);
    assert_int_equal(t.objects_created, 2);
    assert_int_equal(fake_rm_registrations(e->f), 3);
    assert_true(fake_rm_is_registered(e->f, c, 0x5c000a01));
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
    assert_int_equal(lc_free(e->s, c, e->g.device[0], e->g.vaspace[0][0]), 0); /* the NV503C goes too */
    assert_int_equal(lc_free(e->s, c, e->g.device[0], 0x5c000a01), 0);          /* freed, never unmapped */
    assert_int_equal(totals(e).mappings, 0);
    /* The handle comes back for unmapped memory; the next NV503C must not
     * register it at the old address. */
    assert_int_equal(lc_alloc(e->s, c, e->g.device[0], 0x5c000a01, GDU_NV01_MEMORY_LOCAL_USER, NULL), 0);
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
    assert_int_equal(lc_alloc_mapped(e->s, &g2, 0, 0x5c000a01, VA(3), 64 * MiB), 0); /* same handle, other client */
    assert_int_equal(fake_rm_count_class(e->f, GDU_NV50_THIRD_PARTY_P2P), 3);
    assert_int_not_equal(fake_rm_p2p_of(e->f, e->g.client, e->g.subdevice[1]), 0);
    assert_int_not_equal(fake_rm_p2p_of(e->f, g2.client, g2.subdevice[0]), 0);
    assert_int_equal(fake_rm_registrations(e->f), 3);
    json_t *r = gdu_shim_report(e->s);
    assert_int_equal(json_array_size(json_object_get(r, "gpus")), 2); /* RM devices 0 and 1 */
    json_decref(r);
    assert_int_equal(totals(e).failures, 0);
    env_free(e);
}

static void vmm_mapped_twice(void **state)
{
    env *e = env_new(DRIVER, 0, 0, 1);
    assert_int_equal(lc_alloc(e->s, e->g.client, e->g.device[0], 0x5c000a01, GDU_NV01_MEMORY_LOCAL_USER, NULL), 0);
    assert_int_equal(lc_map(e->s, e->g.client, 0x5c000a01, VA(1), 64 * MiB, 0), 0);
    assert_int_equal(lc_map(e->s, e->g.client, 0x5c000a01, VA(2), 64 * MiB, 0), 0);
    gdu_shim_totals t = totals(e);
    assert_int_equal(t.registered, 1);
    assert_int_equal(t.already_registered, 1);
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
    json_t *r = gdu_shim_report(e->s);
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
    assert_int_equal(fake_rm_p2p_of(e->f, c, e->g.subdevice[0]), h); /* re-created, same handle */
    assert_int_equal(totals(e).objects_created, 1);
    gdu_nv503c_register_va_space rv = {.hVASpace = e->g.vaspace[0][0]};
    assert_int_equal(lc_control(e->s, c, h, GDU_NV503C_CTRL_CMD_REGISTER_VA_SPACE, &rv, sizeof rv), 0);
    /* cuMemAlloc as libcuda does it: register, then map. */
    assert_int_equal(lc_alloc(e->s, c, e->g.device[0], 0x5c000a01, GDU_NV01_MEMORY_LOCAL_USER, NULL), 0);
    gdu_nv503c_register_vidmem reg = {0x5c000a01, VA(1), 64 * MiB, 0};
    assert_int_equal(lc_control(e->s, c, h, GDU_NV503C_CTRL_CMD_REGISTER_VIDMEM, &reg, sizeof reg), 0);
    assert_int_equal(lc_map(e->s, c, 0x5c000a01, VA(1), 64 * MiB, 0), 0);
    assert_true(fake_rm_vaspace_registered(e->f, c, h, e->g.vaspace[0][1])); /* the shim did the second */
    /* VMM: only the shim registers it. */
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, 0x5c000a02, VA(2), 64 * MiB), 0);
    assert_true(fake_rm_is_registered(e->f, c, 0x5c000a02));
    /* Both count: libcuda's cuMemAlloc registration on the shim's object, and the shim's VMM one. */
    gdu_shim_totals t = totals(e);
    assert_int_equal(t.registered, 2);
    assert_int_equal(t.already_registered, 1); /* the cuMemAlloc buffer, found registered at its mapping */
    /* libcuda registering what the shim registered: the shim steps aside first. */
    gdu_nv503c_register_vidmem reg2 = {0x5c000a02, VA(2), 64 * MiB, 0};
    assert_int_equal(lc_control(e->s, c, h, GDU_NV503C_CTRL_CMD_REGISTER_VIDMEM, &reg2, sizeof reg2), 0);
    /* cuMemFree as libcuda does it: unregister, unmap, free. */
    gdu_nv503c_unregister_vidmem u = {0x5c000a01};
    assert_int_equal(lc_control(e->s, c, h, GDU_NV503C_CTRL_CMD_UNREGISTER_VIDMEM, &u, sizeof u), 0);
    assert_int_equal(lc_free_mapped(e->s, &e->g, 0, 0x5c000a01, VA(1), 64 * MiB), 0);
    assert_string_equal(gpu_mode(e, 0), "unlocked");
    t = totals(e);
    assert_int_equal(t.failures, 0);
    assert_int_equal(t.registered, 3);   /* + libcuda's second, after the shim stepped aside */
    assert_int_equal(t.unregistered, 2); /* the shim's VMM one (stepping aside), libcuda's first */
    assert_int_equal(t.live, fake_rm_registrations(e->f));
    json_t *r = gdu_shim_report(e->s);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(json_object_get(r, "gpus"), 0),
                                                        "registered_by_libcuda")),
                     2);
    json_decref(r);
    env_free(e);
}

/* Strict test mode: after its alloc, no call of libcuda's on its NV503C reaches
 * RM; each is answered NV_OK, and the shim's own object (an RM-generated
 * handle) holds both VA spaces and the registrations. */
static void strict_mode_answers_for_libcuda(void **state)
{
    env *e = env_new(DRIVER, 2, 0, 1);
    uint32_t c = e->g.client, h = 0x5c0000f0;
    gdu_nv503c_alloc_params ap = {GDU_NV503C_ALLOC_FLAGS_TYPE_BAR1};
    assert_int_equal(lc_alloc(e->s, c, e->g.subdevice[0], h, GDU_NV50_THIRD_PARTY_P2P, &ap), 0);
    uint32_t own = fake_rm_p2p_of(e->f, c, e->g.subdevice[0]);
    assert_true(own != 0 && own != h);
    assert_int_equal(fake_rm_calls_on(e->f, c, h), 1); /* the shim's free of it */
    assert_true(fake_rm_vaspace_registered(e->f, c, own, e->g.vaspace[0][0]));
    assert_true(fake_rm_vaspace_registered(e->f, c, own, e->g.vaspace[0][1]));
    gdu_nv503c_register_va_space rv = {.hVASpace = e->g.vaspace[0][0]};
    assert_int_equal(lc_control(e->s, c, h, GDU_NV503C_CTRL_CMD_REGISTER_VA_SPACE, &rv, sizeof rv), 0);
    assert_int_equal(rv.vaSpaceToken, 0xfe00); /* the fake's token of the shim's first registration */
    /* cuMemAlloc: libcuda's register is answered; the shim registers at the map. */
    assert_int_equal(lc_alloc(e->s, c, e->g.device[0], 0x5c000a01, GDU_NV01_MEMORY_LOCAL_USER, NULL), 0);
    gdu_nv503c_register_vidmem reg = {0x5c000a01, VA(1), 64 * MiB, 0};
    assert_int_equal(lc_control(e->s, c, h, GDU_NV503C_CTRL_CMD_REGISTER_VIDMEM, &reg, sizeof reg), 0);
    assert_false(fake_rm_is_registered(e->f, c, 0x5c000a01));
    assert_int_equal(lc_map(e->s, c, 0x5c000a01, VA(1), 64 * MiB, 0), 0);
    assert_true(fake_rm_is_registered(e->f, c, 0x5c000a01));
    uint32_t st;
    assert_int_equal(gdu_shim_probe_registered(e->s, VA(1), &st), 1);
    gdu_nv503c_unregister_vidmem u = {0x5c000a01};
    assert_int_equal(lc_control(e->s, c, h, GDU_NV503C_CTRL_CMD_UNREGISTER_VIDMEM, &u, sizeof u), 0);
    assert_true(fake_rm_is_registered(e->f, c, 0x5c000a01)); /* the shim's stays until the memory goes */
    assert_int_equal(lc_free_mapped(e->s, &e->g, 0, 0x5c000a01, VA(1), 64 * MiB), 0);
    assert_false(fake_rm_is_registered(e->f, c, 0x5c000a01));
    assert_int_equal(lc_free(e->s, c, e->g.subdevice[0], h), 0);
    assert_int_equal(fake_rm_calls_on(e->f, c, h), 1);
    gdu_shim_totals t = totals(e);
    assert_int_equal(t.registered, 1);
    assert_int_equal(t.unregistered, 1);
    assert_int_equal(t.failures, 0);
    json_t *r = gdu_shim_report(e->s);
    json_t *g = json_array_get(json_object_get(r, "gpus"), 0);
    assert_true(json_is_true(json_object_get(r, "test_strict")));
    assert_int_equal(json_integer_value(json_object_get(g, "registered_by_libcuda")), 0);
    assert_int_equal(json_integer_value(json_object_get(g, "answered_for_libcuda")), 4);
    assert_int_equal(json_integer_value(json_object_get(g, "va_spaces_registered")), 2);
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
    assert_int_equal(lc_alloc(e->s, c, e->g.subdevice[0], h + 1, GDU_NV50_THIRD_PARTY_P2P, &ap), 0x63);
    assert_int_equal(lc_alloc(e->s, c, e->g.subdevice[0], h, GDU_NV50_THIRD_PARTY_P2P, &ap), 0x19);
    assert_int_equal(fake_rm_p2p_of(e->f, c, e->g.subdevice[0]), h);
    /* The shim registers both VA spaces at the first mapping... */
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, 0x5c000a01, VA(1), 64 * MiB), 0);
    /* ...but libcuda unregistering them (never registered by it) gets 0x57, twice,
     * and registering one gets NV_OK then 0x19. */
    for (int k = 1; k >= 0; k--) {
        gdu_nv503c_unregister_va_space u = {.hVASpace = e->g.vaspace[0][k]};
        assert_int_equal(lc_control(e->s, c, h, GDU_NV503C_CTRL_CMD_UNREGISTER_VA_SPACE, &u, sizeof u), 0x57);
    }
    gdu_nv503c_register_va_space rv = {.hVASpace = e->g.vaspace[0][0]};
    assert_int_equal(lc_control(e->s, c, h, GDU_NV503C_CTRL_CMD_REGISTER_VA_SPACE, &rv, sizeof rv), 0);
    assert_int_equal(lc_control(e->s, c, h, GDU_NV503C_CTRL_CMD_REGISTER_VA_SPACE, &rv, sizeof rv), 0x19);
    /* Unregistering memory only the shim registered: 0x57, as natively. */
    gdu_nv503c_unregister_vidmem u = {0x5c000a01};
    assert_int_equal(lc_control(e->s, c, h, GDU_NV503C_CTRL_CMD_UNREGISTER_VIDMEM, &u, sizeof u), 0x57);
    env_free(e);
}

static void probe_after_remap(void **state)
{
    env *e = env_new(DRIVER, 0, 0, 1);
    uint32_t st;
    assert_int_equal(lc_alloc(e->s, e->g.client, e->g.device[0], 0x5c000a01, GDU_NV01_MEMORY_LOCAL_USER, NULL), 0);
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
    assert_int_equal(gdu_shim_probe_registered(e->s, VA(1) + 5 * MiB, &st), 1); /* inside the mapping */
    assert_int_equal(lc_free_mapped(e->s, &e->g, 0, 0x5c000a01, VA(1), 64 * MiB), 0);
    assert_int_equal(gdu_shim_probe_registered(e->s, VA(1), &st), 0);
    assert_int_equal(st, GDU_NV_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(fake_rm_registrations(e->f), 0);
    assert_int_equal(totals(e).rm_calls, 5); /* create, 2 VA spaces, register, unregister; probes uncounted */
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
    assert_int_equal(lc_alloc(e->s, e->g.client, e->g.device[0], 0x5c0000f0, GDU_NV50_THIRD_PARTY_P2P, &ap),
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
        cmocka_unit_test(passes_through),
        cmocka_unit_test(fault_injection),
        cmocka_unit_test(concurrent_storm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
