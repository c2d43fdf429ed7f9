/* The part of rdma-core's verbs ABI (infiniband/verbs.h) that verify --rdma
 * touches, declared here because libibverbs is loaded at run time, never
 * included nor linked. ibv_post_send and ibv_poll_cq are inline functions in
 * verbs.h that call through the context's ops table, not exported symbols:
 * the table's layout is ABI. Structs the library allocates and we only read
 * (context, QP, CQ) are declared up to the last member used. Every size and
 * offset relied on is asserted below; tests/unit/test_verify_ibv_abi.c checks
 * them against the real verbs.h where one is installed. */
#ifndef GDUNLOCK_VERIFY_VERIFY_IBV_API_H
#define GDUNLOCK_VERIFY_VERIFY_IBV_API_H

#include <stddef.h>
#include <stdint.h>

typedef struct gdu_ibv_device gdu_ibv_device; /* opaque */
typedef struct gdu_ibv_pd gdu_ibv_pd;         /* opaque */
typedef struct gdu_ibv_context gdu_ibv_context;
typedef struct gdu_ibv_cq gdu_ibv_cq;
typedef struct gdu_ibv_qp gdu_ibv_qp;

enum {
    GDU_IBV_PORT_ACTIVE = 4,
    GDU_IBV_LINK_LAYER_INFINIBAND = 1,
    GDU_IBV_LINK_LAYER_ETHERNET = 2,
    GDU_IBV_ACCESS_LOCAL_WRITE = 1,
    GDU_IBV_ACCESS_REMOTE_WRITE = 2,
    GDU_IBV_ACCESS_REMOTE_READ = 4,
    GDU_IBV_QPT_RC = 2,
    GDU_IBV_QPS_INIT = 1,
    GDU_IBV_QPS_RTR = 2,
    GDU_IBV_QPS_RTS = 3,
    GDU_IBV_WR_RDMA_WRITE = 0,
    GDU_IBV_WR_RDMA_READ = 4,
    GDU_IBV_SEND_SIGNALED = 2,
    GDU_IBV_WC_SUCCESS = 0,
    GDU_IBV_WC_REM_ACCESS_ERR = 10,
};

/* ibv_qp_attr_mask bits */
enum {
    GDU_IBV_QP_STATE = 1 << 0,
    GDU_IBV_QP_ACCESS_FLAGS = 1 << 3,
    GDU_IBV_QP_PKEY_INDEX = 1 << 4,
    GDU_IBV_QP_PORT = 1 << 5,
    GDU_IBV_QP_AV = 1 << 7,
    GDU_IBV_QP_PATH_MTU = 1 << 8,
    GDU_IBV_QP_TIMEOUT = 1 << 9,
    GDU_IBV_QP_RETRY_CNT = 1 << 10,
    GDU_IBV_QP_RNR_RETRY = 1 << 11,
    GDU_IBV_QP_RQ_PSN = 1 << 12,
    GDU_IBV_QP_MAX_QP_RD_ATOMIC = 1 << 13,
    GDU_IBV_QP_MIN_RNR_TIMER = 1 << 15,
    GDU_IBV_QP_SQ_PSN = 1 << 16,
    GDU_IBV_QP_MAX_DEST_RD_ATOMIC = 1 << 17,
    GDU_IBV_QP_DEST_QPN = 1 << 20,
};

typedef union gdu_ibv_gid {
    uint8_t raw[16];
    struct {
        uint64_t subnet_prefix;
        uint64_t interface_id;
    } global;
} gdu_ibv_gid;

typedef struct gdu_ibv_port_attr {
    int state;
    int max_mtu;
    int active_mtu;
    int gid_tbl_len;
    uint32_t port_cap_flags;
    uint32_t max_msg_sz;
    uint32_t bad_pkey_cntr;
    uint32_t qkey_viol_cntr;
    uint16_t pkey_tbl_len;
    uint16_t lid;
    uint16_t sm_lid;
    uint8_t lmc;
    uint8_t max_vl_num;
    uint8_t sm_sl;
    uint8_t subnet_timeout;
    uint8_t init_type_reply;
    uint8_t active_width;
    uint8_t active_speed;
    uint8_t phys_state;
    uint8_t link_layer;
    uint8_t flags;
    uint16_t port_cap_flags2;
} gdu_ibv_port_attr;

/* ibv_device_attr: only the port count is read. */
typedef struct gdu_ibv_device_attr {
    uint8_t before_ports[227];
    uint8_t phys_port_cnt;
    uint8_t after_ports[4];
} gdu_ibv_device_attr;

typedef struct gdu_ibv_mr {
    gdu_ibv_context *context;
    gdu_ibv_pd *pd;
    void *addr;
    size_t length;
    uint32_t handle;
    uint32_t lkey;
    uint32_t rkey;
} gdu_ibv_mr;

typedef struct gdu_ibv_sge {
    uint64_t addr;
    uint32_t length;
    uint32_t lkey;
} gdu_ibv_sge;

typedef struct gdu_ibv_send_wr {
    uint64_t wr_id;
    struct gdu_ibv_send_wr *next;
    gdu_ibv_sge *sg_list;
    int num_sge;
    int opcode;
    unsigned send_flags;
    uint32_t imm_data;
    union {
        struct {
            uint64_t remote_addr;
            uint32_t rkey;
        } rdma;
        uint64_t other_ops[4]; /* atomic and UD members */
    } wr;
    uint32_t xrc_remote_srqn;
    uint64_t bind_mw_or_tso[6];
} gdu_ibv_send_wr;

typedef struct gdu_ibv_wc {
    uint64_t wr_id;
    int status;
    int opcode;
    uint32_t vendor_err;
    uint32_t byte_len;
    uint32_t imm_data;
    uint32_t qp_num;
    uint32_t src_qp;
    unsigned wc_flags;
    uint16_t pkey_index;
    uint16_t slid;
    uint8_t sl;
    uint8_t dlid_path_bits;
} gdu_ibv_wc;

typedef struct gdu_ibv_qp_cap {
    uint32_t max_send_wr;
    uint32_t max_recv_wr;
    uint32_t max_send_sge;
    uint32_t max_recv_sge;
    uint32_t max_inline_data;
} gdu_ibv_qp_cap;

typedef struct gdu_ibv_global_route {
    gdu_ibv_gid dgid;
    uint32_t flow_label;
    uint8_t sgid_index;
    uint8_t hop_limit;
    uint8_t traffic_class;
} gdu_ibv_global_route;

typedef struct gdu_ibv_ah_attr {
    gdu_ibv_global_route grh;
    uint16_t dlid;
    uint8_t sl;
    uint8_t src_path_bits;
    uint8_t static_rate;
    uint8_t is_global;
    uint8_t port_num;
} gdu_ibv_ah_attr;

typedef struct gdu_ibv_qp_attr {
    int qp_state;
    int cur_qp_state;
    int path_mtu;
    int path_mig_state;
    uint32_t qkey;
    uint32_t rq_psn;
    uint32_t sq_psn;
    uint32_t dest_qp_num;
    unsigned qp_access_flags;
    gdu_ibv_qp_cap cap;
    gdu_ibv_ah_attr ah_attr;
    gdu_ibv_ah_attr alt_ah_attr;
    uint16_t pkey_index;
    uint16_t alt_pkey_index;
    uint8_t en_sqd_async_notify;
    uint8_t sq_draining;
    uint8_t max_rd_atomic;
    uint8_t max_dest_rd_atomic;
    uint8_t min_rnr_timer;
    uint8_t port_num;
    uint8_t timeout;
    uint8_t retry_cnt;
    uint8_t rnr_retry;
    uint8_t alt_port_num;
    uint8_t alt_timeout;
    uint32_t rate_limit;
} gdu_ibv_qp_attr;

typedef struct gdu_ibv_qp_init_attr {
    void *qp_context;
    gdu_ibv_cq *send_cq;
    gdu_ibv_cq *recv_cq;
    void *srq;
    gdu_ibv_qp_cap cap;
    int qp_type;
    int sq_sig_all;
} gdu_ibv_qp_init_attr;

/* ibv_context_ops: 32 pointers; the two data-path calls verify makes are
 * named, the rest kept as their slots. */
typedef struct gdu_ibv_context_ops {
    void *before_poll_cq[11];
    int (*poll_cq)(gdu_ibv_cq *cq, int num_entries, gdu_ibv_wc *wc);
    void *before_post_send[13];
    int (*post_send)(gdu_ibv_qp *qp, gdu_ibv_send_wr *wr, gdu_ibv_send_wr **bad_wr);
    void *after_post_send[6];
} gdu_ibv_context_ops;

struct gdu_ibv_context {
    gdu_ibv_device *device;
    gdu_ibv_context_ops ops;
    /* then cmd_fd, async_fd, a mutex ...: never read */
};

struct gdu_ibv_cq {
    gdu_ibv_context *context;
    /* then the channel, user context, handle, cqe ...: never read */
};

struct gdu_ibv_qp {
    gdu_ibv_context *context;
    void *qp_context;
    gdu_ibv_pd *pd;
    gdu_ibv_cq *send_cq;
    gdu_ibv_cq *recv_cq;
    void *srq;
    uint32_t handle;
    uint32_t qp_num;
    /* then state, type, a mutex ...: never read */
};

_Static_assert(sizeof(gdu_ibv_gid) == 16, "ibv_gid size");
_Static_assert(sizeof(gdu_ibv_port_attr) == 52, "ibv_port_attr size");
_Static_assert(offsetof(gdu_ibv_port_attr, max_msg_sz) == 20, "ibv_port_attr layout");
_Static_assert(offsetof(gdu_ibv_port_attr, lid) == 34, "ibv_port_attr layout");
_Static_assert(offsetof(gdu_ibv_port_attr, link_layer) == 46, "ibv_port_attr layout");
_Static_assert(sizeof(gdu_ibv_device_attr) == 232, "ibv_device_attr size");
_Static_assert(offsetof(gdu_ibv_device_attr, phys_port_cnt) == 227, "ibv_device_attr layout");
_Static_assert(sizeof(gdu_ibv_mr) == 48, "ibv_mr size");
_Static_assert(offsetof(gdu_ibv_mr, lkey) == 36, "ibv_mr layout");
_Static_assert(offsetof(gdu_ibv_mr, rkey) == 40, "ibv_mr layout");
_Static_assert(sizeof(gdu_ibv_sge) == 16, "ibv_sge size");
_Static_assert(sizeof(gdu_ibv_send_wr) == 128, "ibv_send_wr size");
_Static_assert(offsetof(gdu_ibv_send_wr, opcode) == 28, "ibv_send_wr layout");
_Static_assert(offsetof(gdu_ibv_send_wr, send_flags) == 32, "ibv_send_wr layout");
_Static_assert(offsetof(gdu_ibv_send_wr, wr.rdma.remote_addr) == 40, "ibv_send_wr layout");
_Static_assert(offsetof(gdu_ibv_send_wr, wr.rdma.rkey) == 48, "ibv_send_wr layout");
_Static_assert(sizeof(gdu_ibv_wc) == 48, "ibv_wc size");
_Static_assert(offsetof(gdu_ibv_wc, status) == 8, "ibv_wc layout");
_Static_assert(offsetof(gdu_ibv_wc, vendor_err) == 16, "ibv_wc layout");
_Static_assert(sizeof(gdu_ibv_qp_cap) == 20, "ibv_qp_cap size");
_Static_assert(sizeof(gdu_ibv_ah_attr) == 32, "ibv_ah_attr size");
_Static_assert(offsetof(gdu_ibv_ah_attr, dlid) == 24, "ibv_ah_attr layout");
_Static_assert(offsetof(gdu_ibv_ah_attr, is_global) == 29, "ibv_ah_attr layout");
_Static_assert(offsetof(gdu_ibv_ah_attr, port_num) == 30, "ibv_ah_attr layout");
_Static_assert(offsetof(gdu_ibv_global_route, sgid_index) == 20, "ibv_global_route layout");
_Static_assert(offsetof(gdu_ibv_global_route, hop_limit) == 21, "ibv_global_route layout");
_Static_assert(sizeof(gdu_ibv_qp_attr) == 144, "ibv_qp_attr size");
_Static_assert(offsetof(gdu_ibv_qp_attr, path_mtu) == 8, "ibv_qp_attr layout");
_Static_assert(offsetof(gdu_ibv_qp_attr, rq_psn) == 20, "ibv_qp_attr layout");
_Static_assert(offsetof(gdu_ibv_qp_attr, sq_psn) == 24, "ibv_qp_attr layout");
_Static_assert(offsetof(gdu_ibv_qp_attr, dest_qp_num) == 28, "ibv_qp_attr layout");
_Static_assert(offsetof(gdu_ibv_qp_attr, qp_access_flags) == 32, "ibv_qp_attr layout");
_Static_assert(offsetof(gdu_ibv_qp_attr, ah_attr) == 56, "ibv_qp_attr layout");
_Static_assert(offsetof(gdu_ibv_qp_attr, pkey_index) == 120, "ibv_qp_attr layout");
_Static_assert(offsetof(gdu_ibv_qp_attr, max_rd_atomic) == 126, "ibv_qp_attr layout");
_Static_assert(offsetof(gdu_ibv_qp_attr, max_dest_rd_atomic) == 127, "ibv_qp_attr layout");
_Static_assert(offsetof(gdu_ibv_qp_attr, min_rnr_timer) == 128, "ibv_qp_attr layout");
_Static_assert(offsetof(gdu_ibv_qp_attr, port_num) == 129, "ibv_qp_attr layout");
_Static_assert(offsetof(gdu_ibv_qp_attr, timeout) == 130, "ibv_qp_attr layout");
_Static_assert(offsetof(gdu_ibv_qp_attr, retry_cnt) == 131, "ibv_qp_attr layout");
_Static_assert(offsetof(gdu_ibv_qp_attr, rnr_retry) == 132, "ibv_qp_attr layout");
_Static_assert(sizeof(gdu_ibv_qp_init_attr) == 64, "ibv_qp_init_attr size");
_Static_assert(offsetof(gdu_ibv_qp_init_attr, cap) == 32, "ibv_qp_init_attr layout");
_Static_assert(offsetof(gdu_ibv_qp_init_attr, qp_type) == 52, "ibv_qp_init_attr layout");
_Static_assert(offsetof(gdu_ibv_qp_init_attr, sq_sig_all) == 56, "ibv_qp_init_attr layout");
_Static_assert(sizeof(gdu_ibv_context_ops) == 256, "ibv_context_ops size");
_Static_assert(offsetof(gdu_ibv_context_ops, poll_cq) == 88, "ibv_context_ops layout");
_Static_assert(offsetof(gdu_ibv_context_ops, post_send) == 200, "ibv_context_ops layout");
_Static_assert(offsetof(struct gdu_ibv_context, ops) == 8, "ibv_context layout");
_Static_assert(offsetof(struct gdu_ibv_cq, context) == 0, "ibv_cq layout");
_Static_assert(offsetof(struct gdu_ibv_qp, context) == 0, "ibv_qp layout");
_Static_assert(offsetof(struct gdu_ibv_qp, qp_num) == 52, "ibv_qp layout");

/* X(name, parameter list, return type): the exported calls verify makes. */
#define GDU_IBV_FUNCTIONS(X)                                                                       \
    X(ibv_get_device_list, (int *num), gdu_ibv_device **)                                          \
    X(ibv_free_device_list, (gdu_ibv_device * *list), void)                                        \
    X(ibv_get_device_name, (gdu_ibv_device * device), const char *)                                \
    X(ibv_open_device, (gdu_ibv_device * device), gdu_ibv_context *)                               \
    X(ibv_close_device, (gdu_ibv_context * context), int)                                          \
    X(ibv_query_device, (gdu_ibv_context * context, gdu_ibv_device_attr * attr), int)              \
    X(ibv_query_port, (gdu_ibv_context * context, uint8_t port, gdu_ibv_port_attr * attr), int)    \
    X(ibv_query_gid, (gdu_ibv_context * context, uint8_t port, int index, gdu_ibv_gid *gid), int)  \
    X(ibv_alloc_pd, (gdu_ibv_context * context), gdu_ibv_pd *)                                     \
    X(ibv_dealloc_pd, (gdu_ibv_pd * pd), int)                                                      \
    X(ibv_reg_mr, (gdu_ibv_pd * pd, void *addr, size_t length, int access), gdu_ibv_mr *)          \
    X(ibv_dereg_mr, (gdu_ibv_mr * mr), int)                                                        \
    X(ibv_create_cq,                                                                               \
      (gdu_ibv_context * context, int cqe, void *cq_context, void *channel, int comp_vector),      \
      gdu_ibv_cq *)                                                                                \
    X(ibv_destroy_cq, (gdu_ibv_cq * cq), int)                                                      \
    X(ibv_create_qp, (gdu_ibv_pd * pd, gdu_ibv_qp_init_attr * attr), gdu_ibv_qp *)                 \
    X(ibv_destroy_qp, (gdu_ibv_qp * qp), int)                                                      \
    X(ibv_modify_qp, (gdu_ibv_qp * qp, gdu_ibv_qp_attr * attr, int mask), int)                     \
    X(ibv_wc_status_str, (int status), const char *)

/* ibv_reg_dmabuf_mr (rdma-core 34 on): NULL where the library lacks it. */
typedef gdu_ibv_mr *(*gdu_ibv_reg_dmabuf_mr_fn)(gdu_ibv_pd *pd, uint64_t offset, size_t length,
                                                uint64_t iova, int fd, int access);

#define GDU_IBV_DECLARE_FN(name, params, ret) ret(*name) params;
typedef struct gdu_ibv {
    GDU_IBV_FUNCTIONS(GDU_IBV_DECLARE_FN)
    gdu_ibv_reg_dmabuf_mr_fn ibv_reg_dmabuf_mr;
} gdu_ibv;
#undef GDU_IBV_DECLARE_FN

#endif
