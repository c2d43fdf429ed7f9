/* The routes data takes between (or within) GPUs in gdunlock p2p, each
 * checked with a known pattern, and what the check found. */
#ifndef GDUNLOCK_P2P_P2P_ROUTE_H
#define GDUNLOCK_P2P_P2P_ROUTE_H

typedef enum gdu_p2p_route {
    GDU_P2P_ROUTE_CE = 0,   /* copy engine with peer access enabled (cuMemcpyPeerAsync) */
    GDU_P2P_ROUTE_SM_WRITE, /* SM stores of the source GPU into the destination's memory */
    GDU_P2P_ROUTE_SM_READ,  /* SM loads of the destination GPU from the source's memory */
    GDU_P2P_ROUTES
} gdu_p2p_route;

typedef enum gdu_p2p_route_state {
    GDU_P2P_ROUTE_NOT_RUN = 0, /* not measured (see the run's SM error) */
    GDU_P2P_ROUTE_OK,          /* the data read back is what was written */
    GDU_P2P_ROUTE_WRONG,       /* the transfer completed with wrong data */
    GDU_P2P_ROUTE_FAULT,       /* the kernel or copy failed with a CUDA error */
    GDU_P2P_ROUTE_NO_PEER,     /* peer access is not enabled that way: not attempted */
} gdu_p2p_route_state;

/* "copy_engine", "sm_write", "sm_read" for JSON; "copy engine", "SM write",
 * "SM read" for tables. */
const char *gdu_p2p_route_id(gdu_p2p_route route);
const char *gdu_p2p_route_name(gdu_p2p_route route);

/* "not_run", "ok", "wrong", "fault", "no_peer". */
const char *gdu_p2p_route_state_id(gdu_p2p_route_state state);

#endif
