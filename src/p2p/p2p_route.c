#include "p2p/p2p_route.h"

static const struct {
    const char *id, *name;
} routes[GDU_P2P_ROUTES] = {
    [GDU_P2P_ROUTE_CE] = {"copy_engine", "copy engine"},
    [GDU_P2P_ROUTE_SM_WRITE] = {"sm_write", "SM write"},
    [GDU_P2P_ROUTE_SM_READ] = {"sm_read", "SM read"},
};

const char *gdu_p2p_route_id(gdu_p2p_route route)
{
    return (unsigned)route < GDU_P2P_ROUTES ? routes[route].id : "unknown";
}

const char *gdu_p2p_route_name(gdu_p2p_route route)
{
    return (unsigned)route < GDU_P2P_ROUTES ? routes[route].name : "unknown";
}

const char *gdu_p2p_route_state_id(gdu_p2p_route_state state)
{
    static const char *const ids[] = {"not_run", "ok", "wrong", "fault", "no_peer"};
    return (unsigned)state < sizeof ids / sizeof ids[0] ? ids[state] : "unknown";
}
