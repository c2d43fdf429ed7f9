#include "p2p/p2p_verdict_json.h"

#include "util/json_text.h"

json_t *gdu_p2p_verdict_json(const gdu_p2p_verdict *v)
{
    /* The sentences carry outside text (GPU names, bridges): UTF-8 made safe. */
    return json_pack("{s:s, s:b, s:s, s:s, s:o, s:o, s:o}", "class", gdu_p2p_verdict_class(v),
                     "p2p", !v->undetermined && v->cause == GDU_P2P_CAUSE_NONE, "link",
                     gdu_p2p_link_id(v->link), "cause", gdu_p2p_cause_id(v->cause), "reason",
                     gdu_json_text(v->reason), "fix", gdu_json_text(v->fix), "warning",
                     gdu_json_text(v->warning));
}
