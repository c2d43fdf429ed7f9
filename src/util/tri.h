/* A fact that may not be known: what a probe could not read stays unknown
 * and is never taken for the better answer. */
#ifndef GDUNLOCK_UTIL_TRI_H
#define GDUNLOCK_UTIL_TRI_H

typedef enum gdu_tri { GDU_TRI_UNKNOWN = -1, GDU_TRI_NO = 0, GDU_TRI_YES = 1 } gdu_tri;

/* An answer kept as an int: negative unknown, 0 no, else yes. */
static inline gdu_tri gdu_tri_of(int v)
{
    return v < 0 ? GDU_TRI_UNKNOWN : v ? GDU_TRI_YES : GDU_TRI_NO;
}

#endif
