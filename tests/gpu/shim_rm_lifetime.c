/* shim_rm_lifetime: RM's lifetime rule for ThirdPartyP2P (NV503C), on the
 * driver's first GPU, through a client of our own (src/rm/rm_client).
 * Read in 580.142: REGISTER_VA_SPACE makes the NV503C a dependant of the VA
 * space (third_party_p2p.c:394), UNREGISTER_VA_SPACE does not undo it
 * (403-421), and freeing an object puts its dependants on the free list
 * (rs_server.c:974-982), where one that is not a descendant of the freed
 * object is only invalidated (bInvalidateOnly, rs_server.c:1336-1372): RM
 * destroys it but keeps its handle, in the client and under its parent
 * (rs_client.c:811-871). A control on it answers NV_ERR_RESOURCE_LOST
 * (rs_server.c:1556-1560); the handle still fills the subdevice's one
 * NV503C place (NV_ERR_STATE_IN_USE: alloc_free.c:820-827, the class not
 * multi-instance in resource_list.h:757-765) until it is freed, which then
 * only removes it (rs_client.c:811-812).
 *   case 1: NV503C T1; register VA space A, unregister A, free A; then a
 *           control on T1 (REGISTER_VA_SPACE of B) and a second NV503C under
 *           the same subdevice; then T1 freed (case1-free-T1), and a new
 *           NV503C T2 made in its place
 *   case 2: NV503C T2 with B registered; free C, never registered; the same
 * The objects are made in libcuda's order (tests/fixtures/rm-traces,
 * workload-gpu0.jsonl seq 25-28, 90-91, 192): the GPU's /dev/nvidia<minor>
 * opened and held first, because RM refuses NV01_DEVICE_0 with
 * NV_ERR_INSUFFICIENT_PERMISSIONS to a process that holds no file of that
 * GPU open (device.c:140-147 through nv_is_gpu_accessible,
 * kernel-open/nvidia/nv.c:5785-5790); then the device (the GPU's device
 * instance, hClientShare our client) and its subdevice, FERMI_VASPACE_A
 * objects under the device (index NEW, no flags: any vaMode but SINGLE
 * takes them, vaspace_api.c:182-185), the NV503C (TYPE_BAR1) under the
 * subdevice.
 * Lines: STATUS <step> <NV_STATUS name>, then RESULT case1=<state>
 * case2=<state>, a state being gone (control refused, a second NV503C
 * made), invalidated (control NV_ERR_RESOURCE_LOST, a second NV503C
 * NV_ERR_STATE_IN_USE), alive (control NV_OK, a second NV503C
 * NV_ERR_STATE_IN_USE) or unclear (anything else). The H200 printed
 * tests/fixtures/rm-lifetime-h200-2026-12-02.txt. CPU twins: this program
 * on the fake RM
 * (tests/unit/test_shim_rm_lifetime_program.c) and the shim's side of the
 * rule (vaspace_dependency_outlives_unregister, tests/unit/test_shim_core.c). */
#include "driverabi/nv503c.h"
#include "driverabi/nv_card_info.h"
#include "driverabi/nv_classes.h"
#include "driverabi/nv_status.h"
#include "rm/rm_client.h"
#include "rm/rm_device.h"
#include "rm/rm_p2p_caps.h"
#include "rm_bar1.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Where the driver is: the real one unless the CPU twin points these at its
 * fake RM (the program is compiled into that test). */
static gdu_rm_ioctl_fn lifetime_ioctl;        /* NULL: the real ioctl */
static const char *lifetime_ctl;              /* NULL: /dev/nvidiactl */
static const char *lifetime_dev_dir = "/dev"; /* where nvidia<minor> lives */

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

static uint32_t free_object(uint32_t parent, uint32_t object)
{
    uint32_t st = GDU_NV_ERR_GENERIC;
    gdu_rm_free_checked(&c, parent, object, &st, "free", why, sizeof why);
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

/* A new FERMI_VASPACE_A under dev: index NEW, no flags, fresh parameters
 * each time (RM writes the VA space's base and size back into them,
 * vaspace_api.c:418-420). */
static uint32_t new_vaspace(uint32_t dev, uint32_t *h)
{
    gdu_nv_vaspace_alloc_params vp = {0};
    return alloc(dev, GDU_FERMI_VASPACE_A, &vp, sizeof vp, h);
}

/* What became of the NV503C tpp (gone, invalidated, alive, unclear): its
 * control, and a second NV503C under sub. */
static const char *state_of(const char *tag, uint32_t sub, uint32_t tpp, uint32_t other_vaspace)
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
    if (st == GDU_NV_OK)
        return ctl != GDU_NV_OK ? "gone" : "unclear";
    if (st != GDU_NV_ERR_STATE_IN_USE)
        return "unclear";
    return ctl == GDU_NV_OK ? "alive" : ctl == GDU_NV_ERR_RESOURCE_LOST ? "invalidated" : "unclear";
}

/* The driver's first GPU opened as libcuda opens it: its device file held
 * open (*gpu_fd), then its device and subdevice in our client. Returns RM's
 * status of the device step (GENERIC with why when no call reached RM). */
static uint32_t open_gpu(gdu_rm_device *d, int *gpu_fd)
{
    gdu_rm_card cards[GDU_NV_MAX_DEVICES];
    gdu_rm_gpu attached[GDU_RM_MAX_GPUS];
    size_t ncards = 0, nattached = 0;
    if (gdu_rm_cards(&c, cards, GDU_NV_MAX_DEVICES, &ncards, why, sizeof why) != 0)
        return GDU_NV_ERR_GENERIC;
    if (ncards == 0) {
        snprintf(why, sizeof why, "the driver lists no GPU (NV_ESC_CARD_INFO)");
        return GDU_NV_ERR_GENERIC;
    }
    const gdu_rm_card *g = &cards[0];
    char path[160];
    snprintf(path, sizeof path, "%s/nvidia%u", lifetime_dev_dir, g->minor);
    *gpu_fd = open(path, O_RDWR | O_CLOEXEC);
    if (*gpu_fd < 0) {
        snprintf(why, sizeof why, "cannot open %s: %s", path, strerror(errno));
        return GDU_NV_ERR_GENERIC;
    }
    if (gdu_rm_attached_gpus(&c, attached, GDU_RM_MAX_GPUS, &nattached, why, sizeof why) != 0)
        return GDU_NV_ERR_GENERIC;
    uint32_t gpu_id = 0;
    for (size_t i = 0; i < nattached; i++)
        if (attached[i].domain == g->domain && attached[i].bus == g->bus &&
            attached[i].device == g->slot)
            gpu_id = attached[i].gpu_id;
    if (gpu_id == 0) {
        snprintf(why, sizeof why, "GPU %04x:%02x:%02x (%s) is not among RM's attached GPUs",
                 g->domain, g->bus, g->slot, path);
        return GDU_NV_ERR_GENERIC;
    }
    uint32_t st = GDU_NV_ERR_GENERIC;
    gdu_rm_device_open(&c, gpu_id, d, &st, why, sizeof why);
    return st;
}

int main(void)
{
    const gdu_rm_calls calls = {lifetime_ioctl ? lifetime_ioctl : gdu_rm_kernel_calls.ioctl_call,
                                gdu_rm_kernel_calls.close_call};
    if (gdu_rm_client_open(&c, lifetime_ctl, &calls, why, sizeof why) != 0) {
        printf("NOGPU: %s\n", why);
        return 69;
    }
    gdu_rm_device d = {0};
    int gpu_fd = -1;
    gdu_nv503c_alloc_params ap = {.flags = GDU_NV503C_ALLOC_FLAGS_TYPE_BAR1};
    uint32_t a = 0, b = 0, cc = 0, t1 = 0, t2 = 0;
    if (step("device-and-subdevice", open_gpu(&d, &gpu_fd)) != GDU_NV_OK ||
        step("vaspace-A", new_vaspace(d.hdevice, &a)) != GDU_NV_OK ||
        step("vaspace-B", new_vaspace(d.hdevice, &b)) != GDU_NV_OK ||
        step("vaspace-C", new_vaspace(d.hdevice, &cc)) != GDU_NV_OK ||
        step("nv503c-T1", alloc(d.hsubdevice, GDU_NV50_THIRD_PARTY_P2P, &ap, sizeof ap, &t1)) !=
            GDU_NV_OK) {
        printf("SETUP failed: %s\n", why);
        gdu_rm_client_close(&c);
        if (gpu_fd >= 0)
            close(gpu_fd);
        return 1;
    }
    uint32_t dev = d.hdevice, sub = d.hsubdevice;
    step("case1-register-A", register_vaspace(t1, a));
    gdu_nv503c_unregister_va_space ua = {.hVASpace = a};
    step("case1-unregister-A",
         control(t1, GDU_NV503C_CTRL_CMD_UNREGISTER_VA_SPACE, &ua, sizeof ua));
    gdu_rm_free(&c, dev, a);
    const char *case1 = state_of("case1", sub, t1, b);
    /* Case 2 needs an NV503C of its own: T1's handle, dead or not, goes
     * first, and with it its place under the subdevice (nv503c-T2 shows it). */
    step("case1-free-T1", free_object(sub, t1));
    step("nv503c-T2", alloc(sub, GDU_NV50_THIRD_PARTY_P2P, &ap, sizeof ap, &t2));
    step("case2-register-B", register_vaspace(t2, b));
    gdu_rm_free(&c, dev, cc);
    uint32_t other = 0;
    new_vaspace(dev, &other); /* another VA space to ask with */
    const char *case2 = state_of("case2", sub, t2, other);
    printf("RESULT case1=%s case2=%s\n", case1, case2);
    gdu_rm_client_close(&c);
    close(gpu_fd);
    return 0;
}
