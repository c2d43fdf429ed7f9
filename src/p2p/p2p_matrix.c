#include "p2p/p2p_matrix.h"

#include <stdlib.h>

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

gdu_p2p_stat gdu_p2p_stat_of(double *samples, size_t count)
{
    gdu_p2p_stat s = {0};
    if (count == 0)
        return s;
    qsort(samples, count, sizeof samples[0], compare_doubles);
    s.valid = 1;
    s.min = samples[0];
    s.max = samples[count - 1];
    s.median = count % 2 ? samples[count / 2] : (samples[count / 2 - 1] + samples[count / 2]) / 2.0;
    return s;
}
