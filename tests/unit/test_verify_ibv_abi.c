/* Our own verbs declarations (src/verify/verify_ibv_api.h) against rdma-core's
 * infiniband/verbs.h: sizes, offsets and values must agree. Built only where
 * the header exists (libibverbs-dev); nothing is linked or loaded. */
#include "verify/verify_ibv_api.h"

#include <infiniband/verbs.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>

#define SAME_SIZE(ours, theirs) _Static_assert(sizeof(ours) == sizeof(theirs), #ours " size")
#define SAME_AT(ours, theirs, field)                                                               \
    _Static_assert(offsetof(ours, field) == offsetof(theirs, field), #ours "." #field)
#define SAME_AT_NAMED(ours, our_field, theirs, their_field)                                        \
    _Static_assert(offsetof(ours, our_field) == offsetof(theirs, their_field), #ours "." #our_field)
#define SAME_VALUE(ours, theirs) _Static_assert((int)(ours) == (int)(theirs), #ours)

/* gdu_ibv_reg_dmabuf_mr_fn's parameters in verbs.h's own types (the pointers
 * are the structs checked here): a change of verbs.h's prototype fails. */
_Static_assert(__builtin_types_compatible_p(__typeof__(ibv_reg_dmabuf_mr),
                                            struct ibv_mr *(struct ibv_pd *, uint64_t, size_t,
                                                            uint64_t, int, int)),
               "ibv_reg_dmabuf_mr prototype");

SAME_SIZE(gdu_ibv_gid, union ibv_gid);
SAME_SIZE(gdu_ibv_port_attr, struct ibv_port_attr);
SAME_AT(gdu_ibv_port_attr, struct ibv_port_attr, state);
SAME_AT(gdu_ibv_port_attr, struct ibv_port_attr, active_mtu);
SAME_AT(gdu_ibv_port_attr, struct ibv_port_attr, gid_tbl_len);
SAME_AT(gdu_ibv_port_attr, struct ibv_port_attr, max_msg_sz);
SAME_AT(gdu_ibv_port_attr, struct ibv_port_attr, lid);
SAME_AT(gdu_ibv_port_attr, struct ibv_port_attr, link_layer);
SAME_AT(gdu_ibv_port_attr, struct ibv_port_attr, port_cap_flags2);
SAME_SIZE(gdu_ibv_device_attr, struct ibv_device_attr);
SAME_AT(gdu_ibv_device_attr, struct ibv_device_attr, phys_port_cnt);
SAME_SIZE(gdu_ibv_mr, struct ibv_mr);
SAME_AT(gdu_ibv_mr, struct ibv_mr, addr);
SAME_AT(gdu_ibv_mr, struct ibv_mr, length);
SAME_AT(gdu_ibv_mr, struct ibv_mr, lkey);
SAME_AT(gdu_ibv_mr, struct ibv_mr, rkey);
SAME_SIZE(gdu_ibv_sge, struct ibv_sge);
SAME_AT(gdu_ibv_sge, struct ibv_sge, length);
SAME_AT(gdu_ibv_sge, struct ibv_sge, lkey);
SAME_SIZE(gdu_ibv_send_wr, struct ibv_send_wr);
SAME_AT(gdu_ibv_send_wr, struct ibv_send_wr, next);
SAME_AT(gdu_ibv_send_wr, struct ibv_send_wr, sg_list);
SAME_AT(gdu_ibv_send_wr, struct ibv_send_wr, num_sge);
SAME_AT(gdu_ibv_send_wr, struct ibv_send_wr, opcode);
SAME_AT(gdu_ibv_send_wr, struct ibv_send_wr, send_flags);
SAME_AT(gdu_ibv_send_wr, struct ibv_send_wr, wr.rdma.remote_addr);
SAME_AT(gdu_ibv_send_wr, struct ibv_send_wr, wr.rdma.rkey);
SAME_AT_NAMED(gdu_ibv_send_wr, xrc_remote_srqn, struct ibv_send_wr, qp_type);
SAME_AT_NAMED(gdu_ibv_send_wr, bind_mw_or_tso, struct ibv_send_wr, bind_mw);
SAME_SIZE(gdu_ibv_wc, struct ibv_wc);
SAME_AT(gdu_ibv_wc, struct ibv_wc, status);
SAME_AT(gdu_ibv_wc, struct ibv_wc, opcode);
SAME_AT(gdu_ibv_wc, struct ibv_wc, vendor_err);
SAME_AT(gdu_ibv_wc, struct ibv_wc, byte_len);
SAME_SIZE(gdu_ibv_qp_cap, struct ibv_qp_cap);
SAME_SIZE(gdu_ibv_global_route, struct ibv_global_route);
SAME_AT(gdu_ibv_global_route, struct ibv_global_route, flow_label);
SAME_AT(gdu_ibv_global_route, struct ibv_global_route, sgid_index);
SAME_AT(gdu_ibv_global_route, struct ibv_global_route, hop_limit);
SAME_SIZE(gdu_ibv_ah_attr, struct ibv_ah_attr);
SAME_AT(gdu_ibv_ah_attr, struct ibv_ah_attr, dlid);
SAME_AT(gdu_ibv_ah_attr, struct ibv_ah_attr, is_global);
SAME_AT(gdu_ibv_ah_attr, struct ibv_ah_attr, port_num);
SAME_SIZE(gdu_ibv_qp_attr, struct ibv_qp_attr);
SAME_AT(gdu_ibv_qp_attr, struct ibv_qp_attr, path_mtu);
SAME_AT(gdu_ibv_qp_attr, struct ibv_qp_attr, rq_psn);
SAME_AT(gdu_ibv_qp_attr, struct ibv_qp_attr, sq_psn);
SAME_AT(gdu_ibv_qp_attr, struct ibv_qp_attr, dest_qp_num);
SAME_AT(gdu_ibv_qp_attr, struct ibv_qp_attr, qp_access_flags);
SAME_AT(gdu_ibv_qp_attr, struct ibv_qp_attr, ah_attr);
SAME_AT(gdu_ibv_qp_attr, struct ibv_qp_attr, pkey_index);
SAME_AT(gdu_ibv_qp_attr, struct ibv_qp_attr, max_rd_atomic);
SAME_AT(gdu_ibv_qp_attr, struct ibv_qp_attr, max_dest_rd_atomic);
SAME_AT(gdu_ibv_qp_attr, struct ibv_qp_attr, min_rnr_timer);
SAME_AT(gdu_ibv_qp_attr, struct ibv_qp_attr, port_num);
SAME_AT(gdu_ibv_qp_attr, struct ibv_qp_attr, timeout);
SAME_AT(gdu_ibv_qp_attr, struct ibv_qp_attr, retry_cnt);
SAME_AT(gdu_ibv_qp_attr, struct ibv_qp_attr, rnr_retry);
SAME_AT(gdu_ibv_qp_attr, struct ibv_qp_attr, rate_limit);
SAME_SIZE(gdu_ibv_qp_init_attr, struct ibv_qp_init_attr);
SAME_AT(gdu_ibv_qp_init_attr, struct ibv_qp_init_attr, send_cq);
SAME_AT(gdu_ibv_qp_init_attr, struct ibv_qp_init_attr, recv_cq);
SAME_AT(gdu_ibv_qp_init_attr, struct ibv_qp_init_attr, cap);
SAME_AT(gdu_ibv_qp_init_attr, struct ibv_qp_init_attr, qp_type);
SAME_AT(gdu_ibv_qp_init_attr, struct ibv_qp_init_attr, sq_sig_all);
SAME_SIZE(gdu_ibv_context_ops, struct ibv_context_ops);
SAME_AT(gdu_ibv_context_ops, struct ibv_context_ops, poll_cq);
SAME_AT(gdu_ibv_context_ops, struct ibv_context_ops, post_send);
SAME_AT(struct gdu_ibv_context, struct ibv_context, ops);
SAME_AT(struct gdu_ibv_cq, struct ibv_cq, context);
SAME_AT(struct gdu_ibv_qp, struct ibv_qp, context);
SAME_AT(struct gdu_ibv_qp, struct ibv_qp, qp_num);
/* The prefixes we declare of structs the library allocates end inside them. */
_Static_assert(sizeof(struct gdu_ibv_context) <= sizeof(struct ibv_context), "context prefix");
_Static_assert(sizeof(struct gdu_ibv_cq) <= sizeof(struct ibv_cq), "cq prefix");
_Static_assert(sizeof(struct gdu_ibv_qp) <= sizeof(struct ibv_qp), "qp prefix");

SAME_VALUE(GDU_IBV_PORT_ACTIVE, IBV_PORT_ACTIVE);
SAME_VALUE(GDU_IBV_LINK_LAYER_INFINIBAND, IBV_LINK_LAYER_INFINIBAND);
SAME_VALUE(GDU_IBV_LINK_LAYER_ETHERNET, IBV_LINK_LAYER_ETHERNET);
SAME_VALUE(GDU_IBV_ACCESS_LOCAL_WRITE, IBV_ACCESS_LOCAL_WRITE);
SAME_VALUE(GDU_IBV_ACCESS_REMOTE_WRITE, IBV_ACCESS_REMOTE_WRITE);
SAME_VALUE(GDU_IBV_ACCESS_REMOTE_READ, IBV_ACCESS_REMOTE_READ);
SAME_VALUE(GDU_IBV_QPT_RC, IBV_QPT_RC);
SAME_VALUE(GDU_IBV_QPS_INIT, IBV_QPS_INIT);
SAME_VALUE(GDU_IBV_QPS_RTR, IBV_QPS_RTR);
SAME_VALUE(GDU_IBV_QPS_RTS, IBV_QPS_RTS);
SAME_VALUE(GDU_IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE);
SAME_VALUE(GDU_IBV_WR_RDMA_READ, IBV_WR_RDMA_READ);
SAME_VALUE(GDU_IBV_SEND_SIGNALED, IBV_SEND_SIGNALED);
SAME_VALUE(GDU_IBV_WC_SUCCESS, IBV_WC_SUCCESS);
SAME_VALUE(GDU_IBV_WC_REM_ACCESS_ERR, IBV_WC_REM_ACCESS_ERR);
SAME_VALUE(GDU_IBV_QP_STATE, IBV_QP_STATE);
SAME_VALUE(GDU_IBV_QP_ACCESS_FLAGS, IBV_QP_ACCESS_FLAGS);
SAME_VALUE(GDU_IBV_QP_PKEY_INDEX, IBV_QP_PKEY_INDEX);
SAME_VALUE(GDU_IBV_QP_PORT, IBV_QP_PORT);
SAME_VALUE(GDU_IBV_QP_AV, IBV_QP_AV);
SAME_VALUE(GDU_IBV_QP_PATH_MTU, IBV_QP_PATH_MTU);
SAME_VALUE(GDU_IBV_QP_TIMEOUT, IBV_QP_TIMEOUT);
SAME_VALUE(GDU_IBV_QP_RETRY_CNT, IBV_QP_RETRY_CNT);
SAME_VALUE(GDU_IBV_QP_RNR_RETRY, IBV_QP_RNR_RETRY);
SAME_VALUE(GDU_IBV_QP_RQ_PSN, IBV_QP_RQ_PSN);
SAME_VALUE(GDU_IBV_QP_MAX_QP_RD_ATOMIC, IBV_QP_MAX_QP_RD_ATOMIC);
SAME_VALUE(GDU_IBV_QP_MIN_RNR_TIMER, IBV_QP_MIN_RNR_TIMER);
SAME_VALUE(GDU_IBV_QP_SQ_PSN, IBV_QP_SQ_PSN);
SAME_VALUE(GDU_IBV_QP_MAX_DEST_RD_ATOMIC, IBV_QP_MAX_DEST_RD_ATOMIC);
SAME_VALUE(GDU_IBV_QP_DEST_QPN, IBV_QP_DEST_QPN);

/* The ops table is read at run time: pointers put in the real slots are
 * the ones our declaration reads. */
static int fake_poll(struct ibv_cq *cq, int n, struct ibv_wc *wc) { return 7; }
static int fake_post(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
    return 8;
}

static void ops_slots_agree(void **state)
{
    struct ibv_context real;
    memset(&real, 0, sizeof real);
    real.ops.poll_cq = fake_poll;
    real.ops.post_send = fake_post;
    struct gdu_ibv_context ours;
    memcpy(&ours, &real, sizeof ours);
    assert_int_equal(ours.ops.poll_cq(NULL, 0, NULL), 7);
    assert_int_equal(ours.ops.post_send(NULL, NULL, NULL), 8);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(ops_slots_agree)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
