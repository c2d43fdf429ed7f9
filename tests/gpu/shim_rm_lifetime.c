/* shim_rm_lifetime: RM's lifetime rule for ThirdPartyP2P (NV503C), on GPU 0
 * through a client of our own (src/p2p/rm_client). Read in 580.142:
 * REGISTER_VA_SPACE makes the NV503C a dependant of the VA space
 * (third_party_p2p.c:394), UNREGISTER_VA_SPACE does not undo it (403-421),
 * and freeing an object frees its dependants (rs_server.c:974-982).
 *   case 1: NV503C T1; register VA space A, unregister A, free A; then a
 *           control on T1 (REGISTER_VA_SPACE of B) and a second NV503C under
 *           the same subdevice (NV_ERR_STATE_IN_USE while T1 lives)
 *   case 2: NV503C T2 with B registered; free C, never registered; the same
 * Lines: STATUS <step> <NV_STATUS name>, then RESULT case1=<gone|alive>
 * case2=<gone|alive>. Its fake-RM twin: vaspace_dependency_outlives_unregister
 * in tests/unit/test_shim_core.c. */
#include "driverabi/nv503c.h"
#include "driverabi/nv_classes.h"
#include "driverabi/nv_status.h"
#include "facts/rm_client.h"

#include <stdio.h>
#include <string.h>

static gdu_rm_client c;
static char why[256];

static uint32_t step(const char *name, uint32_t status)
{
    printf("STATUS %s %s\n", name, gdu_nv_status_name(status));
    return status;
}

static uint32_t alloc(uint32_t parent, uint32_t cls, void *params, uint32_t size, uint32_t *h)
{
    uint32_t st = GDU_NV_ERR_GENERIC;
    gdu_rm_alloc(&c, parent, cls, params, size, h, &st, "alloc", why, sizeof why);
    return st;
}

static uint32_t control(uint32_t object, uint32_t cmd, void *params, uint32_t size)
{
    uint32_t st = GDU_NV_ERR_GENERIC;
    gdu_rm_control(&c, object, cmd, params, size, &st, "control", why, sizeof why);
    return st;
}

static uint32_t register_vaspace(uint32_t tpp, uint32_t vaspace)
{
    gdu_nv503c_register_va_space p = {.hVASpace = vaspace};
    return control(tpp, GDU_NV503C_CTRL_CMD_REGISTER_VA_SPACE, &p, sizeof p);
}

/* Whether the NV503C tpp still lives: its control, and a second NV503C under sub. */
static const char *alive(const char *tag, uint32_t sub, uint32_t tpp, uint32_t other_vaspace)
{
    char name[64];
    snprintf(name, sizeof name, "%s-control-after", tag);
    uint32_t ctl = step(name, register_vaspace(tpp, other_vaspace));
    gdu_nv503c_alloc_params ap = {.flags = GDU_NV503C_ALLOC_FLAGS_TYPE_BAR1};
    uint32_t second = 0;
    snprintf(name, sizeof name, "%s-second-nv503c", tag);
    uint32_t st = step(name, alloc(sub, GDU_NV50_THIRD_PARTY_P2P, &ap, sizeof ap, &second));
    if (st == GDU_NV_OK)
        gdu_rm_free(&c, sub, second);
    return st == GDU_NV_OK && ctl != GDU_NV_OK                 ? "gone"
           : st == GDU_NV_ERR_STATE_IN_USE && ctl == GDU_NV_OK ? "alive"
                                                               : "unclear";
}

int main(void)
{
    if (gdu_rm_client_open(&c, NULL, NULL, why, sizeof why) != 0) {
        printf("NOGPU: %s\n", why);
        return 69;
    }
    gdu_nv0080_alloc_params dp = {.deviceId = 0, .hClientShare = c.hclient};
    gdu_nv2080_alloc_params sp = {.subDeviceId = 0};
    gdu_nv_vaspace_alloc_params vp = {0};
    gdu_nv503c_alloc_params ap = {.flags = GDU_NV503C_ALLOC_FLAGS_TYPE_BAR1};
    uint32_t dev = 0, sub = 0, a = 0, b = 0, cc = 0, t1 = 0, t2 = 0;
    if (step("device", alloc(c.hclient, GDU_NV01_DEVICE_0, &dp, sizeof dp, &dev)) != GDU_NV_OK ||
        step("subdevice", alloc(dev, GDU_NV20_SUBDEVICE_0, &sp, sizeof sp, &sub)) != GDU_NV_OK ||
        step("vaspace-A", alloc(dev, GDU_FERMI_VASPACE_A, &vp, sizeof vp, &a)) != GDU_NV_OK ||
        step("vaspace-B", alloc(dev, GDU_FERMI_VASPACE_A, &vp, sizeof vp, &b)) != GDU_NV_OK ||
        step("vaspace-C", alloc(dev, GDU_FERMI_VASPACE_A, &vp, sizeof vp, &cc)) != GDU_NV_OK ||
        step("nv503c-T1", alloc(sub, GDU_NV50_THIRD_PARTY_P2P, &ap, sizeof ap, &t1)) != GDU_NV_OK) {
        printf("SETUP failed: %s\n", why);
        gdu_rm_client_close(&c);
        return 1;
    }
    step("case1-register-A", register_vaspace(t1, a));
    gdu_nv503c_unregister_va_space ua = {.hVASpace = a};
    step("case1-unregister-A",
         control(t1, GDU_NV503C_CTRL_CMD_UNREGISTER_VA_SPACE, &ua, sizeof ua));
    gdu_rm_free(&c, dev, a);
    const char *case1 = alive("case1", sub, t1, b);
    /* T1 is gone or not; case 2 needs an NV503C of its own. */
    gdu_rm_free(&c, sub, t1);
    step("nv503c-T2", alloc(sub, GDU_NV50_THIRD_PARTY_P2P, &ap, sizeof ap, &t2));
    step("case2-register-B", register_vaspace(t2, b));
    gdu_rm_free(&c, dev, cc);
    gdu_nv_vaspace_alloc_params vp2 = {0};
    uint32_t d = 0;
    alloc(dev, GDU_FERMI_VASPACE_A, &vp2, sizeof vp2, &d); /* another VA space to ask with */
    const char *case2 = alive("case2", sub, t2, d);
    printf("RESULT case1=%s case2=%s\n", case1, case2);
    gdu_rm_client_close(&c);
    return 0;
}
