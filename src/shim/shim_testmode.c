/* The shim's test modes, which reproduce the GeForce state on a datacenter
 * GPU, and its test probe. Everything here runs only when a test asks for
 * it (GDUNLOCK_TEST_DROP_NATIVE, the test queries); the production paths
 * reach it through s->testmode alone.
 *
 *   "1"       libcuda's NV503C is freed at once and the shim's own made under
 *             the same handle: libcuda's later controls reach the shim's
 *             object, where the shim steps aside for them;
 *   "strict"  libcuda's NV503C is freed at once and the shim's own made under
 *             a handle RM picks; libcuda's later calls on its freed handle are
 *             answered NV_OK by the shim and never reach RM, as if libcuda
 *             were the GeForce one that never makes them. */
#include "driverabi/nv503c.h"
#include "driverabi/nv_classes.h"
#include "driverabi/nv_status.h"
#include "shim/shim_decode.h"
#include "shim/shim_state.h"

#include <stdio.h>
#include <string.h>

/* Test mode: frees libcuda's NV503C and makes the shim's own under the same
 * handle, so that libcuda's later controls on that handle keep working. */
static void adopt(gdu_shim *s, gdu_obj *sub, gdu_obj *tpp)
{
    uint32_t h = tpp->handle;
    char what[160];
    uint32_t st = gdu_tpp_own_free(s, sub->client, sub->handle, h);
    if (st != GDU_NV_OK) {
        snprintf(what, sizeof what, "test mode: freeing libcuda's ThirdPartyP2P 0x%x (left native)",
                 h);
        gdu_tpp_failure(s, sub, st, what);
        sub->tpp = h;
        gdu_tpp_set_mode(s, sub, GDU_TPP_NATIVE, NULL);
        return;
    }
    gdu_nv503c_alloc_params ap = {.flags = GDU_NV503C_ALLOC_FLAGS_TYPE_BAR1};
    st = gdu_tpp_own_alloc(s, sub->client, sub->handle, &h, GDU_NV50_THIRD_PARTY_P2P, &ap,
                           sizeof ap);
    if (st != GDU_NV_OK) {
        snprintf(what, sizeof what,
                 "test mode: re-creating ThirdPartyP2P 0x%x (libcuda's handle is now gone)", h);
        gdu_shim_obj_remove(s, tpp);
        sub->tpp = 0;
        gdu_tpp_own_failed(s, sub, st, what);
        return;
    }
    tpp->tpp_adopted = true;
    gdu_tpp_own_made(s, sub, tpp);
    gdu_shim_log(s, GDU_LOG_INFO,
                 "GPU %u: test mode: libcuda's ThirdPartyP2P 0x%x replaced by the shim's own",
                 gdu_tpp_gpu_number(s, sub), h);
}

/* Strict test mode: frees libcuda's NV503C and answers libcuda's later calls
 * on its handle; the shim's own NV503C gets a handle RM generates. */
static void stand_in(gdu_shim *s, gdu_obj *sub, gdu_obj *tpp)
{
    uint32_t st = gdu_tpp_own_free(s, sub->client, sub->handle, tpp->handle);
    if (st != GDU_NV_OK) {
        char what[160];
        snprintf(what, sizeof what,
                 "strict test mode: freeing libcuda's ThirdPartyP2P 0x%x (left native)",
                 tpp->handle);
        gdu_tpp_failure(s, sub, st, what);
        sub->tpp = tpp->handle;
        gdu_tpp_set_mode(s, sub, GDU_TPP_NATIVE, NULL);
        return;
    }
    tpp->tpp_answered = true;
    __atomic_add_fetch(&s->answered_tpp, 1, __ATOMIC_RELAXED);
    gdu_shim_log(s, GDU_LOG_INFO,
                 "GPU %u: strict test mode: libcuda's ThirdPartyP2P 0x%x freed; its calls on it "
                 "are answered by the shim",
                 gdu_tpp_gpu_number(s, sub), tpp->handle);
    if (!sub->tpp_owned)
        gdu_tpp_create(s, sub);
}

/* Only VA spaces of the stand-in's device are answered with a token: the
 * shim's own registration of it. */
static uint64_t own_token(gdu_shim *s, gdu_obj *sub, uint32_t vaspace)
{
    gdu_obj *own = sub->tpp_owned ? gdu_shim_obj(s, sub->client, sub->tpp) : NULL;
    if (own != NULL)
        own = gdu_tpp_ensure_vaspace(s, sub, own);
    if (own == NULL)
        return 0;
    for (unsigned i = 0; i < own->n_tpp_vaspaces; i++)
        if (own->tpp_vaspaces[i] == vaspace)
            return own->tpp_vaspace_tokens[i];
    return 0;
}

static uint32_t answer_control(gdu_shim *s, gdu_obj *stand_in_tpp, uint32_t cmd, void *params,
                               uint32_t size)
{
    gdu_obj *sub = gdu_shim_obj(s, stand_in_tpp->client, stand_in_tpp->parent);
    if (sub == NULL)
        return GDU_NV_OK;
    gdu_shim_gpu(s, sub)->answered_for_libcuda++;
    if (cmd == GDU_NV503C_CTRL_CMD_REGISTER_VA_SPACE && params != NULL &&
        size >= sizeof(gdu_nv503c_register_va_space)) {
        gdu_nv503c_register_va_space p;
        memcpy(&p, params, sizeof p);
        p.vaSpaceToken = own_token(s, sub, p.hVASpace);
        memcpy(params, &p, sizeof p);
    }
    gdu_shim_log(s, GDU_LOG_DEBUG,
                 "GPU %u: strict test mode: libcuda's control 0x%x on 0x%x answered NV_OK",
                 gdu_tpp_gpu_number(s, sub), cmd, stand_in_tpp->handle);
    return GDU_NV_OK;
}

static const gdu_testmode g_modes[] = {
    {"1", adopt, true},
    {"strict", stand_in, false},
};

const gdu_testmode *gdu_testmode_for(const gdu_shim_config *cfg)
{
    if (!cfg->test_drop_native)
        return NULL;
    return cfg->test_strict ? &g_modes[1] : &g_modes[0];
}

/* Strict test mode: a call of libcuda's on the NV503C handle the shim freed
 * for it is answered here and never reaches RM. Returns true with *status
 * set when it is. */
bool gdu_testmode_answer(gdu_shim *s, const gdu_rm_call *c, uint32_t *status)
{
    gdu_obj *o = gdu_shim_obj(s, c->client, c->handle);
    if (o == NULL || !o->tpp_answered)
        return false;
    if (c->op == GDU_RM_OP_FREE) {
        gdu_obj *sub = gdu_shim_obj(s, o->client, o->parent);
        if (sub != NULL)
            gdu_shim_gpu(s, sub)->answered_for_libcuda++;
        gdu_tpp_forget(s, o);
        gdu_shim_obj_remove(s, o);
        *status = GDU_NV_OK;
        return true;
    }
    if (c->op != GDU_RM_OP_CONTROL || (c->cmd >> 16) != GDU_NV50_THIRD_PARTY_P2P)
        return false;
    unsigned char params[sizeof(gdu_nv503c_register_vidmem)];
    size_t want = c->params_size < sizeof params ? c->params_size : sizeof params;
    if (want != 0 &&
        s->ops.read_block(s->ops.ctx, (const void *)(uintptr_t)c->params, params, want) != 0)
        return false; /* unreadable parameters: RM gives libcuda its answer */
    *status = answer_control(s, o, c->cmd, want != 0 ? params : NULL, (uint32_t)want);
    if (c->cmd == GDU_NV503C_CTRL_CMD_REGISTER_VA_SPACE &&
        want >= sizeof(gdu_nv503c_register_va_space))
        memcpy((void *)(uintptr_t)c->params, params,
               sizeof(gdu_nv503c_register_va_space)); /* the token */
    return true;
}

/* Test mode only: libcuda controls the NV503C that replaced its own. Whatever
 * the shim registered there is taken back first, so that libcuda's call gets
 * the answer it would get from its own object. */
void gdu_testmode_before_control(gdu_shim *s, gdu_obj *tpp, uint32_t cmd, const void *params,
                                 size_t size)
{
    if (cmd == GDU_NV503C_CTRL_CMD_REGISTER_VIDMEM && size >= sizeof(gdu_nv503c_register_vidmem)) {
        /* Step aside so that libcuda's registration gets the answer it would get natively. */
        gdu_nv503c_register_vidmem p;
        memcpy(&p, params, sizeof p);
        gdu_obj *mem = gdu_shim_obj(s, tpp->client, p.hMemory);
        if (mem != NULL && mem->reg_tpp == tpp->handle && mem->reg_by_shim)
            gdu_tpp_unregister(s, mem);
        gdu_obj *o;
        while ((o = gdu_tpp_registration_overlapping(s, tpp, p.address, p.size, true)) != NULL) {
            gdu_tpp_unregister(s, o);
            if (o->reg_tpp != 0)
                break; /* RM kept it: libcuda gets the answer it gets */
        }
    } else if (cmd == GDU_NV503C_CTRL_CMD_UNREGISTER_VIDMEM && size >= sizeof(uint32_t)) {
        /* What libcuda did not register is not there for it to unregister. */
        uint32_t h;
        memcpy(&h, params, sizeof h);
        gdu_obj *mem = gdu_shim_obj(s, tpp->client, h);
        if (mem != NULL && mem->reg_tpp == tpp->handle && mem->reg_by_shim)
            gdu_tpp_unregister(s, mem);
    } else if (cmd == GDU_NV503C_CTRL_CMD_REGISTER_VA_SPACE) {
        /* One VA space per object: libcuda's choice replaces the shim's. */
        gdu_tpp_unregister_own_vaspaces(s, tpp);
    } else if (cmd == GDU_NV503C_CTRL_CMD_UNREGISTER_VA_SPACE && size >= sizeof(uint32_t)) {
        uint32_t v;
        memcpy(&v, params, sizeof v);
        for (unsigned i = 0; i < tpp->n_tpp_vaspaces; i++) {
            if (tpp->tpp_vaspaces[i] != v || !gdu_tpp_vaspace_by_shim(tpp, i))
                continue;
            gdu_nv503c_unregister_va_space u = {.hVASpace = v};
            if (gdu_tpp_own_control(s, tpp, GDU_NV503C_CTRL_CMD_UNREGISTER_VA_SPACE, &u, sizeof u,
                                    true) == GDU_NV_OK)
                gdu_tpp_remove_vaspace(tpp, v);
            break;
        }
    }
}

/* ---- test probe ---- */

/* A GPU VA in the kernel half, which no allocation of a process has. */
#define GDU_PROBE_VA 0xfff0000000000000ull

int gdu_testmode_probe(gdu_shim *s, uint64_t gpu_va, uint32_t *status)
{
    *status = GDU_NV_ERR_GENERIC;
    gdu_mapping *m = gdu_shim_mapping_at(s, gpu_va);
    if (m != NULL) {
        gdu_obj *mem = gdu_shim_obj(s, m->client, m->memory);
        gdu_obj *sub = mem != NULL ? gdu_shim_subdevice_of(s, mem) : NULL;
        gdu_obj *tpp = sub != NULL ? gdu_shim_obj(s, sub->client, sub->tpp) : NULL;
        if (tpp == NULL)
            return -1;
        /* RM keys registrations by hMemory before it looks at the range
         * (third_party_p2p.c:499-503): a registration of the memory at an
         * address no allocation has answers 0x19 exactly when the memory is
         * registered already, whatever else overlaps what. */
        gdu_nv503c_register_vidmem p = {
            .hMemory = mem->handle, .address = GDU_PROBE_VA, .size = GDU_NV503C_VIDMEM_ALIGN};
        *status =
            gdu_tpp_own_control(s, tpp, GDU_NV503C_CTRL_CMD_REGISTER_VIDMEM, &p, sizeof p, false);
        if (*status == GDU_NV_ERR_INSERT_DUPLICATE_NAME)
            return 1;
        if (*status != GDU_NV_OK)
            return -1;
        gdu_nv503c_unregister_vidmem u = {.hMemory = mem->handle};
        gdu_tpp_own_control(s, tpp, GDU_NV503C_CTRL_CMD_UNREGISTER_VIDMEM, &u, sizeof u, false);
        return 0;
    }
    for (unsigned i = 1; i <= GDU_SHIM_FREED_RING; i++) {
        const gdu_freed_mapping *f = &s->freed[(s->freed_next - i) % GDU_SHIM_FREED_RING];
        if (f->base != gpu_va || f->tpp == 0)
            continue;
        gdu_obj *tpp = gdu_shim_obj(s, f->client, f->tpp);
        if (tpp == NULL)
            return -1;
        gdu_obj *mem = gdu_shim_obj(s, f->client, f->memory);
        if (mem != NULL && mem->reg_tpp != 0) {
            /* The handle is registered again, for a live mapping elsewhere:
             * asking RM would take that registration away. */
            *status = GDU_NV_OK;
            return 0;
        }
        gdu_nv503c_unregister_vidmem u = {.hMemory = f->memory};
        *status =
            gdu_tpp_own_control(s, tpp, GDU_NV503C_CTRL_CMD_UNREGISTER_VIDMEM, &u, sizeof u, false);
        return *status == GDU_NV_ERR_OBJECT_NOT_FOUND ? 0 : *status == GDU_NV_OK ? 1 : -1;
    }
    return -1;
}
