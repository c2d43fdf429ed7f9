/* The data each GPU's source buffer holds during the measurements, so every
 * copy can be checked afterwards: a pseudo-random stream per seed (one seed
 * per source GPU), cheap to regenerate while comparing. */
#ifndef GDUNLOCK_P2P_P2P_PATTERN_H
#define GDUNLOCK_P2P_P2P_PATTERN_H

#include <stddef.h>
#include <stdint.h>

/* Writes bytes of the seed's pattern into buf. */
void gdu_p2p_pattern_fill(void *buf, size_t bytes, uint64_t seed);

/* Offset of the first byte of buf[0..bytes) that differs from the seed's
 * pattern, or SIZE_MAX when all match. */
size_t gdu_p2p_pattern_check(const void *buf, size_t bytes, uint64_t seed);

#endif
