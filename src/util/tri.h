/* A fact that may not be known: what a probe could not read stays unknown
 * and is never taken for the better answer. */
#ifndef GDUNLOCK_UTIL_TRI_H
#define GDUNLOCK_UTIL_TRI_H

typedef enum gdu_tri { GDU_TRI_UNKNOWN = -1, GDU_TRI_NO = 0, GDU_TRI_YES = 1 } gdu_tri;

#endif
