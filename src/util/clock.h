/* The one clock for durations: seconds on CLOCK_MONOTONIC. */
#ifndef GDUNLOCK_UTIL_CLOCK_H
#define GDUNLOCK_UTIL_CLOCK_H

double gdu_now_seconds(void);

#endif
