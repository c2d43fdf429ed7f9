/* Differential fuzzing of the shim core: one sequence of what libcuda does
 * (allocations, mappings, frees, NV503C controls) runs twice against the
 * fake RM, once through an active shim and once through a passive one (as
 * without the shim). Every call must get the same answer both ways: the
 * program is unaffected. Input: a config byte (bit 0: test mode, bits 1-7:
 * fault injection at that shim RM call, GeForce mode only), then 6-byte ops.
 * Left out where the shim cannot be transparent by design: in test mode,
 * freeing a VA space (RM also invalidates the NV503C registered with it, and
 * the shim registers more VA spaces than libcuda), and under fault injection,
 * libcuda making an NV503C where the shim holds one. After every op, the
 * kernel lookup's verdict (src/pinmodel) over the shim's own account of the
 * registrations must equal its verdict over what the fake RM holds, and at
 * the end the shim's report must be JSON. */
#include "../unit/fake_rm_client.h"
#include "driverabi/nv503c.h"
#include "driverabi/nv_classes.h"
#include "shim/shim_core.h"

#include <jansson.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MiB (1024ull * 1024)
#define VA(n) (0x7f0000000000ull + (uint64_t)(n)*64 * MiB)

typedef struct {
    fake_rm *f;
    gdu_shim *s;
    lc_gpus g;
} side;

static void side_init(side *x, bool test_mode, bool strict, uint64_t fault_at, bool passive)
{
    x->f = fake_rm_new();
    gdu_shim_config cfg = {.log_level = GDU_LOG_ERROR,
                           .test_drop_native = test_mode,
                           .test_strict = strict,
                           .fault_at = fault_at,
                           .driver_version = "580.159.04",
                           .pid = FAKE_RM_PID};
    gdu_shim_ops ops = fake_rm_ops(x->f);
    lc_setup(x->f);
    x->s = gdu_shim_new(&cfg, &ops);
    if (passive) {
        gdu_shim_fork_prepare(x->s);
        gdu_shim_fork_child(x->s);
    }
    lc_make_gpus(x->s, x->f, 0xc1d00001, 2, &x->g);
}

static void side_free(side *x)
{
    gdu_shim_free(x->s);
    fake_rm_free(x->f);
}

/* One op on one side (op kinds 0..10); returns the status libcuda gets. */
static uint32_t op(side *x, unsigned kind, const uint8_t *o)
{
    unsigned d = o[1] & 1, k = (o[1] >> 1) & 1;
    uint32_t mem = 0x100 + o[2] % 32, tpp = 0x5c0000f0 + d;
    uint64_t base = VA(o[3] % 32), len = (1 + o[4] % 8) * 2 * MiB, off = (o[5] & 1) ? 0x1000 : 0;
    const lc_gpus *g = &x->g;
    switch (kind) {
    case 0:
        return lc_alloc(x->s, g->client, g->device[d], mem, GDU_NV01_MEMORY_LOCAL_USER, NULL);
    case 1:
        return lc_map(x->s, g->client, mem, base + off, len, off);
    case 2:
        return lc_unmap(x->s, base + off, len);
    case 3:
        return lc_free(x->s, g->client, g->device[d], mem);
    case 4: {
        gdu_nv503c_alloc_params ap = {GDU_NV503C_ALLOC_FLAGS_TYPE_BAR1};
        return lc_alloc(x->s, g->client, g->subdevice[d], tpp, GDU_NV50_THIRD_PARTY_P2P, &ap);
    }
    case 5: {
        gdu_nv503c_register_vidmem r = {mem, base, len, 0};
        return lc_control(x->s, g->client, tpp, GDU_NV503C_CTRL_CMD_REGISTER_VIDMEM, &r, sizeof r);
    }
    case 6: {
        gdu_nv503c_unregister_vidmem u = {mem};
        return lc_control(x->s, g->client, tpp, GDU_NV503C_CTRL_CMD_UNREGISTER_VIDMEM, &u,
                          sizeof u);
    }
    case 7: {
        gdu_nv503c_register_va_space r = {.hVASpace = g->vaspace[d][k]};
        return lc_control(x->s, g->client, tpp, GDU_NV503C_CTRL_CMD_REGISTER_VA_SPACE, &r,
                          sizeof r);
    }
    case 8: {
        gdu_nv503c_unregister_va_space u = {.hVASpace = g->vaspace[d][k]};
        return lc_control(x->s, g->client, tpp, GDU_NV503C_CTRL_CMD_UNREGISTER_VA_SPACE, &u,
                          sizeof u);
    }
    case 9:
        return lc_free(x->s, g->client, g->device[d], g->vaspace[d][k]);
    default:
        return lc_alloc(x->s, g->client, g->device[d], g->vaspace[d][k], GDU_FERMI_VASPACE_A, NULL);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    bool test_mode = data[0] & 1;
    /* Strict test mode answers libcuda's NV503C calls itself (NV_OK, whatever
     * RM would say to them): no differential check there, only the end state. */
    bool strict = test_mode && (data[0] & 2);
    uint64_t fault_at = test_mode ? 0 : data[0] >> 1;
    side a, b;
    side_init(&a, test_mode, strict, fault_at, false);
    side_init(&b, false, false, 0, true);
    for (size_t i = 1; i + 6 <= size && i < 1 + 6 * 200; i += 6) {
        unsigned kind = data[i] % 12;
        if ((test_mode && kind == 9) || (fault_at != 0 && kind == 4))
            continue;
        if (kind == 11) { /* the test probe: on the shim's side only, it must leave RM as it was */
            uint32_t st;
            unsigned before = fake_rm_registrations(a.f);
            gdu_shim_probe_registered(a.s, VA(data[i + 3] % 32), &st);
            if (fake_rm_registrations(a.f) != before)
                abort();
            continue;
        }
        uint32_t sa = op(&a, kind, data + i), sb = op(&b, kind, data + i);
        if (sa != sb && !strict)
            abort(); /* libcuda's call answered differently because of the shim */
        /* The shim's account of what RM holds is what RM holds. */
        uint64_t va = VA(data[i + 3] % 32) + (data[i + 5] & 0xf) * MiB,
                 len = (1 + data[i + 4] % 8) * MiB;
        gdu_pin_verdict want;
        fake_rm_pin_lookup(a.f, va, len, &want);
        int err;
        if (gdu_shim_pin_lookup(a.s, va, len, &err, NULL, 0) != (int)want.rule || err != want.err)
            abort();
    }
    char *report = gdu_shim_report_json(a.s, true);
    json_t *parsed = report != NULL ? json_loads(report, 0, NULL) : NULL;
    if (parsed == NULL)
        abort();
    json_decref(parsed);
    free(report);
    /* Freeing the client leaves nothing behind in the fake RM. */
    lc_free(a.s, a.g.client, a.g.client, a.g.client);
    if (fake_rm_registrations(a.f) != 0 || fake_rm_count_class(a.f, GDU_NV50_THIRD_PARTY_P2P) != 0)
        abort();
    gdu_shim_totals t;
    gdu_shim_get_totals(a.s, &t);
    if (t.clients != 0 || t.mappings != 0 || t.objects != 0 || t.live != 0)
        abort();
    side_free(&a);
    side_free(&b);
    return 0;
}
