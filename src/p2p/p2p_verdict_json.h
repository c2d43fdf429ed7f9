/* A pair's P2P verdict as JSON: the one form doctor's document and gdunlock
 * p2p's both hold (docs/doctor-json.md). */
#ifndef GDUNLOCK_P2P_P2P_VERDICT_JSON_H
#define GDUNLOCK_P2P_P2P_VERDICT_JSON_H

#include "p2p/p2p_reason.h"

#include <jansson.h>

/* {"class", "p2p", "link", "cause", "reason", "fix", "warning"}; NULL on out of memory. */
json_t *gdu_p2p_verdict_json(const gdu_p2p_verdict *verdict);

#endif
