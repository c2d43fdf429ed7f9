/* A stand-in for rdma-core's libibverbs.so.1 with every call gdunlock verify
 * --rdma makes, its data path included: the QP's post_send copies bytes
 * between registered ranges (GPU memory is host memory under the fake
 * libcuda), checking keys, bounds, access rights and that the QP was
 * brought to RTS aimed at itself, as an adapter would.
 *   FAKE_IBV_DEVICES  the devices, comma-separated (unset or empty: none, as
 *                     on a machine without an RDMA adapter)
 *   FAKE_IBV_PORT     "down": every port is DOWN
 *   FAKE_IBV_LINK     "ethernet": RoCE (no LID; a GRH is required)
 *   FAKE_IBV_FAIL     one call fails: open_device, alloc_pd, reg_mr (the first
 *                     registration), reg_dmabuf_mr (EOPNOTSUPP: an adapter
 *                     driver that imports no dma-buf), create_cq, create_qp,
 *                     modify_qp, post_send, or completion (a remote access
 *                     error)
 * ibv_reg_dmabuf_mr takes only a dma-buf of verify's fake libcuda (a memfd
 * named "fake-dmabuf:<device address>:<bytes>") whose range holds
 * [iova, iova + length) at the offset given, as an adapter's mapping of the
 * dma-buf would; the range is then reached at iova.
 *   FAKE_IBV_CORRUPT  "1": the RDMA write flips one byte on the way */
#include "verify/verify_ibv_api.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FAKE_DECLARE(name, params, ret) ret name params;
GDU_IBV_FUNCTIONS(FAKE_DECLARE)

struct gdu_ibv_device {
    char name[64];
};
struct gdu_ibv_pd {
    gdu_ibv_context *context;
};
struct fake_mr {
    gdu_ibv_mr mr;
    int access;
    struct fake_mr *next;
};
struct fake_cq {
    struct gdu_ibv_cq cq;
    gdu_ibv_wc done[8];
    int n;
};
struct fake_qp {
    struct gdu_ibv_qp qp;
    int state;
    uint32_t dest_qp_num;
};

static struct fake_mr *mrs; /* every registration, newest first */
static uint32_t next_key = 0x100;
static int registrations;

static bool failing(const char *call)
{
    const char *f = getenv("FAKE_IBV_FAIL");
    return f != NULL && strcmp(f, call) == 0;
}

/* The devices live as long as the library, as the real ones do once opened:
 * an open context names its device after the list is freed. */
static gdu_ibv_device devices[8];

gdu_ibv_device **ibv_get_device_list(int *num)
{
    const char *names = getenv("FAKE_IBV_DEVICES");
    int n = 0;
    gdu_ibv_device **list = calloc(9, sizeof *list);
    if (list == NULL)
        return NULL;
    char copy[512];
    strncpy(copy, names != NULL ? names : "", sizeof copy - 1);
    copy[sizeof copy - 1] = '\0';
    char *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t != NULL && n < 8; t = strtok_r(NULL, ",", &save)) {
        gdu_ibv_device *d = &devices[n];
        strncpy(d->name, t, sizeof d->name - 1);
        list[n++] = d;
    }
    if (num != NULL)
        *num = n;
    return list;
}

void ibv_free_device_list(gdu_ibv_device **list) { free(list); }

const char *ibv_get_device_name(gdu_ibv_device *device) { return device->name; }

static int poll_cq(gdu_ibv_cq *cq, int num_entries, gdu_ibv_wc *wc)
{
    struct fake_cq *f = (struct fake_cq *)cq;
    int n = 0;
    while (n < num_entries && f->n > 0) {
        wc[n++] = f->done[0];
        memmove(f->done, f->done + 1, (size_t)--f->n * sizeof f->done[0]);
    }
    return n;
}

/* The registration holding [addr, addr + len) under key with access, or NULL. */
static struct fake_mr *find(uint64_t addr, uint64_t len, uint32_t key, bool remote, int access)
{
    for (struct fake_mr *m = mrs; m != NULL; m = m->next) {
        uint64_t start = (uint64_t)(uintptr_t)m->mr.addr;
        if ((remote ? m->mr.rkey : m->mr.lkey) == key && addr >= start &&
            addr + len <= start + m->mr.length && (m->access & access) == access)
            return m;
    }
    return NULL;
}

/* What an adapter would do with one RDMA work request: its completion status. */
static int execute(struct fake_qp *q, const gdu_ibv_send_wr *wr)
{
    if (q->dest_qp_num != q->qp.qp_num)
        return 12; /* IBV_WC_RETRY_EXC_ERR: nobody answers at that QPN */
    if (failing("completion"))
        return GDU_IBV_WC_REM_ACCESS_ERR;
    const gdu_ibv_sge *sge = wr->sg_list;
    bool write = wr->opcode == GDU_IBV_WR_RDMA_WRITE;
    if (wr->num_sge != 1 || (!write && wr->opcode != GDU_IBV_WR_RDMA_READ))
        return 2; /* IBV_WC_LOC_QP_OP_ERR */
    if (find(sge->addr, sge->length, sge->lkey, false, write ? 0 : GDU_IBV_ACCESS_LOCAL_WRITE) ==
        NULL)
        return 4; /* IBV_WC_LOC_PROT_ERR */
    int remote_access = write ? GDU_IBV_ACCESS_REMOTE_WRITE : GDU_IBV_ACCESS_REMOTE_READ;
    if (find(wr->wr.rdma.remote_addr, sge->length, wr->wr.rdma.rkey, true, remote_access) == NULL)
        return GDU_IBV_WC_REM_ACCESS_ERR;
    void *local = (void *)(uintptr_t)sge->addr;
    void *remote = (void *)(uintptr_t)wr->wr.rdma.remote_addr;
    memmove(write ? remote : local, write ? local : remote, sge->length);
    const char *corrupt = getenv("FAKE_IBV_CORRUPT");
    if (write && corrupt != NULL && strcmp(corrupt, "1") == 0 && sge->length > 0)
        ((unsigned char *)remote)[sge->length / 3] ^= 0x5a;
    return GDU_IBV_WC_SUCCESS;
}

static int post_send(gdu_ibv_qp *qp, gdu_ibv_send_wr *wr, gdu_ibv_send_wr **bad)
{
    struct fake_qp *q = (struct fake_qp *)qp;
    struct fake_cq *cq = (struct fake_cq *)qp->send_cq;
    for (; wr != NULL; wr = wr->next) {
        if (failing("post_send") || q->state != GDU_IBV_QPS_RTS || cq->n == 8) {
            *bad = wr;
            return EINVAL;
        }
        gdu_ibv_wc wc = {.wr_id = wr->wr_id, .status = execute(q, wr), .qp_num = qp->qp_num};
        wc.byte_len = wc.status == GDU_IBV_WC_SUCCESS ? wr->sg_list->length : 0;
        if ((wr->send_flags & GDU_IBV_SEND_SIGNALED) || wc.status != GDU_IBV_WC_SUCCESS)
            cq->done[cq->n++] = wc;
    }
    return 0;
}

gdu_ibv_context *ibv_open_device(gdu_ibv_device *device)
{
    gdu_ibv_context *c = calloc(1, sizeof *c);
    if (failing("open_device") || c == NULL) {
        free(c);
        errno = ENODEV;
        return NULL;
    }
    c->device = device;
    c->ops.poll_cq = poll_cq;
    c->ops.post_send = post_send;
    return c;
}

int ibv_close_device(gdu_ibv_context *context)
{
    free(context);
    return 0;
}

int ibv_query_device(gdu_ibv_context *context, gdu_ibv_device_attr *attr)
{
    memset(attr, 0, sizeof *attr);
    attr->phys_port_cnt = 1;
    return 0;
}

/* Like the exported call: fills only the older, shorter struct (up to link_layer). */
int ibv_query_port(gdu_ibv_context *context, uint8_t port, gdu_ibv_port_attr *attr)
{
    if (port != 1)
        return EINVAL;
    const char *state = getenv("FAKE_IBV_PORT");
    const char *link = getenv("FAKE_IBV_LINK");
    bool ethernet = link != NULL && strcmp(link, "ethernet") == 0;
    attr->state = state != NULL && strcmp(state, "down") == 0 ? 1 : GDU_IBV_PORT_ACTIVE;
    attr->active_mtu = attr->max_mtu = 3; /* IBV_MTU_1024 */
    attr->max_msg_sz = 1u << 30;
    attr->lid = ethernet ? 0 : 7;
    attr->link_layer = ethernet ? GDU_IBV_LINK_LAYER_ETHERNET : GDU_IBV_LINK_LAYER_INFINIBAND;
    return 0;
}

int ibv_query_gid(gdu_ibv_context *context, uint8_t port, int index, gdu_ibv_gid *gid)
{
    memset(gid, 0, sizeof *gid);
    gid->raw[0] = 0xfe;
    gid->raw[1] = 0x80;
    gid->raw[15] = 1;
    return port == 1 && index == 0 ? 0 : EINVAL;
}

gdu_ibv_pd *ibv_alloc_pd(gdu_ibv_context *context)
{
    gdu_ibv_pd *pd = failing("alloc_pd") ? NULL : calloc(1, sizeof *pd);
    if (pd == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    pd->context = context;
    return pd;
}

int ibv_dealloc_pd(gdu_ibv_pd *pd)
{
    free(pd);
    return 0;
}

gdu_ibv_mr *ibv_reg_mr(gdu_ibv_pd *pd, void *addr, size_t length, int access)
{
    if (registrations++ == 0 && failing("reg_mr")) {
        errno = EFAULT; /* what ib_core answers for memory no one can pin */
        return NULL;
    }
    struct fake_mr *m = calloc(1, sizeof *m);
    if (m == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    m->mr = (gdu_ibv_mr){.context = pd->context, .pd = pd, .addr = addr, .length = length};
    m->mr.lkey = next_key++;
    m->mr.rkey = next_key++;
    m->access = access;
    m->next = mrs;
    mrs = m;
    return &m->mr;
}

gdu_ibv_mr *ibv_reg_dmabuf_mr(gdu_ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova, int fd,
                              int access);

gdu_ibv_mr *ibv_reg_dmabuf_mr(gdu_ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova, int fd,
                              int access)
{
    if (failing("reg_dmabuf_mr")) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    char link[64], target[256];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    uint64_t base = 0, size = 0;
    if (n <= 0 || (target[n] = '\0',
                   sscanf(target, "/memfd:fake-dmabuf:%" SCNx64 ":%" SCNu64, &base, &size) != 2)) {
        errno = EBADF; /* not a dma-buf */
        return NULL;
    }
    if (offset + length > size || iova != base + offset) {
        errno = EINVAL;
        return NULL;
    }
    return ibv_reg_mr(pd, (void *)(uintptr_t)iova, length, access);
}

int ibv_dereg_mr(gdu_ibv_mr *mr)
{
    for (struct fake_mr **p = &mrs; *p != NULL; p = &(*p)->next) {
        if (&(*p)->mr == mr) {
            struct fake_mr *m = *p;
            *p = m->next;
            free(m);
            return 0;
        }
    }
    return EINVAL;
}

gdu_ibv_cq *ibv_create_cq(gdu_ibv_context *context, int cqe, void *cq_context, void *channel,
                          int comp_vector)
{
    struct fake_cq *f = failing("create_cq") ? NULL : calloc(1, sizeof *f);
    if (f == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    f->cq.context = context;
    return &f->cq;
}

int ibv_destroy_cq(gdu_ibv_cq *cq)
{
    free(cq);
    return 0;
}

gdu_ibv_qp *ibv_create_qp(gdu_ibv_pd *pd, gdu_ibv_qp_init_attr *attr)
{
    struct fake_qp *q = failing("create_qp") ? NULL : calloc(1, sizeof *q);
    if (q == NULL || attr->qp_type != GDU_IBV_QPT_RC) {
        free(q);
        errno = q == NULL ? ENOMEM : EINVAL;
        return NULL;
    }
    q->qp = (struct gdu_ibv_qp){.context = pd->context,
                                .pd = pd,
                                .send_cq = attr->send_cq,
                                .recv_cq = attr->recv_cq,
                                .qp_num = 0x1234};
    return &q->qp;
}

int ibv_destroy_qp(gdu_ibv_qp *qp)
{
    free(qp);
    return 0;
}

/* The state machine RESET -> INIT -> RTR -> RTS, with the attributes each
 * step requires; RoCE needs a global route to the port's own GID. */
int ibv_modify_qp(gdu_ibv_qp *qp, gdu_ibv_qp_attr *attr, int mask)
{
    struct fake_qp *q = (struct fake_qp *)qp;
    const char *link = getenv("FAKE_IBV_LINK");
    bool ethernet = link != NULL && strcmp(link, "ethernet") == 0;
    if (failing("modify_qp") || !(mask & GDU_IBV_QP_STATE) || attr->qp_state != q->state + 1)
        return EINVAL;
    if (attr->qp_state == GDU_IBV_QPS_INIT && (!(mask & GDU_IBV_QP_PORT) || attr->port_num != 1))
        return EINVAL;
    if (attr->qp_state == GDU_IBV_QPS_RTR) {
        const gdu_ibv_ah_attr *ah = &attr->ah_attr;
        if ((mask & (GDU_IBV_QP_AV | GDU_IBV_QP_DEST_QPN | GDU_IBV_QP_PATH_MTU)) !=
                (GDU_IBV_QP_AV | GDU_IBV_QP_DEST_QPN | GDU_IBV_QP_PATH_MTU) ||
            (ethernet ? !ah->is_global || ah->grh.dgid.raw[0] != 0xfe : ah->dlid != 7))
            return EINVAL;
        q->dest_qp_num = attr->dest_qp_num;
    }
    q->state = attr->qp_state;
    return 0;
}

const char *ibv_wc_status_str(int status)
{
    return status == GDU_IBV_WC_SUCCESS          ? "success"
           : status == GDU_IBV_WC_REM_ACCESS_ERR ? "remote access error"
                                                 : "other error";
}
