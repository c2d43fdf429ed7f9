/* The kernel's persistent-pin lookup, as a model (see pin_model.h). Sources:
 * nvfs = NVIDIA/gds-nvidia-fs 2.28.4 src/nvfs-core.c; nv-p2p.c =
 * kernel-open/nvidia/nv-p2p.c, p2p.c / third_party_p2p.c =
 * src/nvidia/src/kernel/gpu/bus/ of NVIDIA/open-gpu-kernel-modules 580.142. */
#include "pinmodel/pin_model.h"

#include "driverabi/nv_status.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* _isSpaceAvailableForBar1P2PMapping (p2p.c:987-1031): a new extent of
 * `length` is mapped only while bar1 - mapped >= 36 MiB + length. */
uint64_t gdu_pin_bar1_budget(uint64_t bar1_bytes, uint64_t mapped_bytes)
{
    if (bar1_bytes < mapped_bytes || bar1_bytes - mapped_bytes < GDU_PIN_BAR1_RESERVE)
        return 0;
    return bar1_bytes - mapped_bytes - GDU_PIN_BAR1_RESERVE;
}

/* RM maps a new extent only while its own check holds (p2p.c:1019-1030:
 * size less what is mapped for P2P, by any process, keeps 36 MiB besides the
 * extent) and BAR1 has room for it; the unused part RM counts
 * (kern_mem_sys_ctrl.c:302-311) less the reserve satisfies both. */
uint64_t gdu_pin_gpu_budget(const gdu_pin_gpu *g)
{
    uint64_t budget =
        g->bar1_bytes != 0 ? gdu_pin_bar1_budget(g->bar1_bytes, g->mapped_bytes) : UINT64_MAX;
    if (g->bar1_available != 0) {
        uint64_t rm =
            g->bar1_available > GDU_PIN_BAR1_RESERVE ? g->bar1_available - GDU_PIN_BAR1_RESERVE : 0;
        if (rm < budget)
            budget = rm;
    }
    return budget;
}

static const gdu_pin_vidmem *containing(const gdu_pin_object *o, uint64_t address)
{
    for (size_t i = 0; i < o->n_vidmem; i++) {
        const gdu_pin_vidmem *v = &o->vidmem[i];
        if (v->size != 0 && address >= v->address && address - v->address <= v->size - 1)
            return v;
    }
    return NULL;
}

/* RmP2PGetVASpaceInfoWithoutToken (p2p.c:833-901) for one object. Its loop
 * validates the range once per registered VA space, but the validation
 * (RmP2PValidateAddressRangeOrGetPages, p2p.c:782-830, ->
 * CliGetThirdPartyP2PVidmemInfoFromAddress, third_party_p2p.c:603-640)
 * looks at the object's registrations only, not at the VA space: so it
 * succeeds for every VA space alike, and a second success is NV_ERR_GENERIC
 * (p2p.c:886-887). */
static gdu_pin_rule object_validates(const gdu_pin_object *o, uint64_t start, uint64_t length,
                                     const gdu_pin_vidmem **reg)
{
    *reg = containing(o, start); /* btreeSearch(address), third_party_p2p.c:618 */
    if (*reg == NULL)
        return GDU_PIN_NOT_REGISTERED;
    if (start + length - 1 > (*reg)->address + (*reg)->size - 1) /* third_party_p2p.c:627 */
        return containing(o, (*reg)->address + (*reg)->size) != NULL ? GDU_PIN_SPANS
                                                                     : GDU_PIN_PAST_END;
    if (o->n_vaspaces ==
        0) /* the first thirdpartyp2pGetNextVASpaceInfo fails (third_party_p2p.c:440) */
        return GDU_PIN_NO_VASPACE;
    if (o->n_vaspaces >= 2)
        return GDU_PIN_MANY_VASPACES;
    return GDU_PIN_FOUND;
}

/* Which failure best explains an object that did not validate. */
static int rule_weight(gdu_pin_rule r)
{
    switch (r) {
    case GDU_PIN_MANY_VASPACES:
        return 4;
    case GDU_PIN_SPANS:
    case GDU_PIN_PAST_END:
        return 3;
    case GDU_PIN_NO_VASPACE:
        return 2;
    default:
        return 1;
    }
}

static const gdu_pin_gpu *gpu_of(const gdu_pin_state *st, uint32_t gpu)
{
    for (size_t i = 0; i < st->n_gpus; i++)
        if (st->gpus[i].gpu == gpu)
            return &st->gpus[i];
    return NULL;
}

static void refuse(gdu_pin_verdict *v, gdu_pin_rule rule, int err, uint32_t status,
                   const char *where)
{
    v->rule = rule;
    v->err = err;
    v->nv_status = status;
    v->where = where;
}

void gdu_pin_lookup(const gdu_pin_state *st, uint64_t gpuvaddr, uint64_t size, gdu_pin_verdict *out)
{
    memset(out, 0, sizeof *out);
    out->object = SIZE_MAX;
    /* nvfs_pin_gpu_pages (nvfs-core.c:1274-1292): start rounded down to a GPU
     * page, the length rounded up from there; a range that wraps is refused.
     * A zero-length buffer never reaches the pin (libcufile refuses it). */
    uint64_t start = gpuvaddr & ~(GDU_PIN_PAGE - 1);
    uint64_t end = gpuvaddr + size - 1;
    if (size == 0 || end < gpuvaddr || end - start + 1 == 0 ||
        end - start + 1 > UINT64_MAX - GDU_PIN_PAGE) {
        refuse(out, GDU_PIN_BAD_LENGTH, -EINVAL, GDU_NV_ERR_INVALID_ARGUMENT,
               "nvfs-core.c:1275-1280");
        return;
    }
    out->start = start;
    out->length = (end - start + 1 + GDU_PIN_PAGE - 1) & ~(GDU_PIN_PAGE - 1);
    /* nv_p2p_get_pages (nv-p2p.c:421-430) refuses unaligned ranges: the
     * rounding above always passes it. */

    /* RmP2PGetInfoWithoutToken (p2p.c:904-985), reached through
     * rm_p2p_get_gpu_info -> RmP2PGetGpuByAddress (p2p.c:1549-1576): every
     * object whose pid list holds the caller's process
     * (CliNextThirdPartyP2PInfoWithPid, third_party_p2p.c:300-342: all GPUs,
     * all clients) is validated; exactly one must hold the range. */
    gdu_pin_rule best = GDU_PIN_NOT_REGISTERED;
    size_t best_object = SIZE_MAX;
    const gdu_pin_vidmem *found_reg = NULL;
    for (size_t i = 0; i < st->n_objects; i++) {
        const gdu_pin_object *o = &st->objects[i];
        if (o->pid != st->pid)
            continue;
        const gdu_pin_vidmem *reg;
        gdu_pin_rule r = object_validates(o, out->start, out->length, &reg);
        if (r == GDU_PIN_FOUND) {
            if (found_reg != NULL) { /* p2p.c:966-971 */
                refuse(out, GDU_PIN_TWO_OBJECTS, -EIO, GDU_NV_ERR_GENERIC, "p2p.c:966-971");
                out->gpu = o->gpu;
                out->object = i;
                out->memory = reg->memory;
                return;
            }
            found_reg = reg;
            out->object = i;
        } else if (best_object == SIZE_MAX || rule_weight(r) > rule_weight(best)) {
            best = r;
            best_object = reg != NULL || r != GDU_PIN_NOT_REGISTERED ? i : SIZE_MAX;
            if (best_object != SIZE_MAX && reg != NULL)
                out->memory = reg->memory;
        }
    }
    if (found_reg == NULL) {
        /* The loop ends on CliNextThirdPartyP2PInfoWithPid's
         * NV_ERR_OBJECT_NOT_FOUND (third_party_p2p.c:341) whatever each object
         * answered: -EINVAL (nv-p2p.c:72). */
        static const char *const where[] = {
            [GDU_PIN_NOT_REGISTERED] = "third_party_p2p.c:618",
            [GDU_PIN_NO_VASPACE] = "p2p.c:866-875",
            [GDU_PIN_MANY_VASPACES] = "p2p.c:886-887",
            [GDU_PIN_SPANS] = "third_party_p2p.c:627",
            [GDU_PIN_PAST_END] = "third_party_p2p.c:627",
        };
        refuse(out, best, -EINVAL, GDU_NV_ERR_OBJECT_NOT_FOUND, where[best]);
        if (best_object != SIZE_MAX) {
            out->object = best_object;
            out->gpu = st->objects[best_object].gpu;
            out->n_vaspaces = st->objects[best_object].n_vaspaces;
        }
        return;
    }
    const gdu_pin_object *o = &st->objects[out->object];
    out->gpu = o->gpu;
    out->memory = found_reg->memory;
    out->n_vaspaces = o->n_vaspaces;

    /* RmP2PGetPagesPersistent (p2p.c:1334-1496) on the object's GPU. */
    const gdu_pin_gpu *g = gpu_of(st, o->gpu);
    if (g != NULL && g->apm) {
        refuse(out, GDU_PIN_NOT_SUPPORTED, -GDU_PIN_ENOTSUPP, GDU_NV_ERR_NOT_SUPPORTED,
               "p2p.c:1364-1367");
        return;
    }
    if (g != NULL && g->no_rm_object) {
        refuse(out, GDU_PIN_NOT_SUPPORTED, -GDU_PIN_ENOTSUPP, GDU_NV_ERR_NOT_SUPPORTED,
               "p2p.c:1417-1420");
        return;
    }
    /* The user's hMemory is duplicated into RM's own object
     * (_createOrReuseVidmemInfoPersistent, p2p.c:1133-1273) and mapped through
     * BAR1 (RmThirdPartyP2PBAR1GetPages, p2p.c:489-641) while the budget holds
     * (p2p.c:574-579). */
    if (g != NULL && (g->bar1_bytes != 0 || g->bar1_available != 0)) {
        out->bar1_bytes = g->bar1_bytes;
        out->mapped_bytes = g->mapped_bytes;
        out->bar1_available = g->bar1_available;
        if (gdu_pin_gpu_budget(g) < out->length) {
            refuse(out, GDU_PIN_BAR1_FULL, -ENOMEM, GDU_NV_ERR_INSUFFICIENT_RESOURCES,
                   "p2p.c:574-579,1030");
            return;
        }
    }
    out->rule = GDU_PIN_FOUND;
    out->where = "p2p.c:1334-1496";
    out->pages = out->length / GDU_PIN_PAGE;
}

const char *gdu_pin_rule_name(gdu_pin_rule r)
{
    static const char *const names[] = {
        [GDU_PIN_FOUND] = "found",
        [GDU_PIN_BAD_LENGTH] = "bad-length",
        [GDU_PIN_NOT_REGISTERED] = "not-registered",
        [GDU_PIN_NO_VASPACE] = "no-vaspace",
        [GDU_PIN_MANY_VASPACES] = "many-vaspaces",
        [GDU_PIN_SPANS] = "spans-allocations",
        [GDU_PIN_PAST_END] = "past-end",
        [GDU_PIN_TWO_OBJECTS] = "two-objects",
        [GDU_PIN_NOT_SUPPORTED] = "not-supported",
        [GDU_PIN_BAR1_FULL] = "bar1-full",
    };
    return (unsigned)r < sizeof names / sizeof names[0] && names[r] != NULL ? names[r] : "unknown";
}

static const char *errno_name(int err)
{
    switch (-err) {
    case 0:
        return "0";
    case EINVAL:
        return "-EINVAL";
    case EIO:
        return "-EIO";
    case ENOMEM:
        return "-ENOMEM";
    case GDU_PIN_ENOTSUPP:
        return "-ENOTSUPP (524)";
    default:
        return "an error";
    }
}

const char *gdu_pin_explain(const gdu_pin_verdict *v, char *buf, size_t len)
{
    const unsigned long long mib = 1 << 20;
    const char *e = errno_name(v->err);
    switch (v->rule) {
    case GDU_PIN_FOUND:
        snprintf(
            buf, len,
            "found: nvidia-fs would pin %llu x 64 KiB of memory 0x%x on GPU %u through BAR1 (%s)",
            (unsigned long long)v->pages, v->memory, v->gpu, v->where);
        break;
    case GDU_PIN_BAD_LENGTH:
        snprintf(buf, len,
                 "refused (%s): a buffer of length 0, or one that wraps the address space (%s)", e,
                 v->where);
        break;
    case GDU_PIN_NOT_REGISTERED:
        snprintf(buf, len,
                 "not found (%s): no ThirdPartyP2P registration of this process holds 0x%llx (%s): "
                 "the buffer is not "
                 "device memory that libcuda or gdunlock registered (host or managed memory, "
                 "memory of an MPS server, "
                 "or a GPU without the unlock); give cuFile a cuMemAlloc/cudaMalloc buffer",
                 e, (unsigned long long)v->start, v->where);
        break;
    case GDU_PIN_NO_VASPACE:
        snprintf(
            buf, len,
            "not found (%s): the ThirdPartyP2P object of GPU %u has no VA space registered (%s)", e,
            v->gpu, v->where);
        break;
    case GDU_PIN_MANY_VASPACES:
        snprintf(buf, len,
                 "not found (%s): the ThirdPartyP2P object of GPU %u has %u VA spaces registered "
                 "and RM's lookup "
                 "accepts a buffer only where exactly one validates (%s); register only the VA "
                 "space the process "
                 "registered with UVM, as libcuda does",
                 e, v->gpu, v->n_vaspaces, v->where);
        break;
    case GDU_PIN_SPANS:
        snprintf(
            buf, len,
            "not found (%s): the 64 KiB-rounded range 0x%llx+0x%llx spans two allocations and RM "
            "pins only "
            "within one registration (%s): allocate the buffer in one piece (not a sub-range of a "
            "cudaMallocAsync pool or of PyTorch's expandable segments)",
            e, (unsigned long long)v->start, (unsigned long long)v->length, v->where);
        break;
    case GDU_PIN_PAST_END:
        snprintf(buf, len,
                 "not found (%s): the 64 KiB-rounded range 0x%llx+0x%llx runs past the end of its "
                 "allocation (%s)",
                 e, (unsigned long long)v->start, (unsigned long long)v->length, v->where);
        break;
    case GDU_PIN_TWO_OBJECTS:
        snprintf(buf, len,
                 "refused (%s): two ThirdPartyP2P objects of this process hold the address (%s)", e,
                 v->where);
        break;
    case GDU_PIN_NOT_SUPPORTED:
        snprintf(
            buf, len,
            "refused (%s): RM cannot pin on GPU %u (no internal ThirdPartyP2P, or confidential "
            "computing is on) (%s)",
            e, v->gpu, v->where);
        break;
    case GDU_PIN_BAR1_FULL: {
        char rm[96] = "";
        if (v->bar1_available != 0)
            snprintf(rm, sizeof rm, "; RM counts %llu MiB unused, for every process",
                     (unsigned long long)(v->bar1_available / mib));
        snprintf(buf, len,
                 "refused (%s): pinning %llu MiB more would leave less than the 36 MiB of BAR1 RM "
                 "keeps free "
                 "(BAR1 %llu MiB, %llu MiB pinned%s) (%s): enable Resizable BAR in the firmware "
                 "(Above 4G decoding + "
                 "Re-Size BAR), or register smaller buffers, fewer at a time",
                 e, (unsigned long long)(v->length / mib),
                 (unsigned long long)(v->bar1_bytes / mib),
                 (unsigned long long)(v->mapped_bytes / mib), rm, v->where);
        break;
    }
    }
    return buf;
}
