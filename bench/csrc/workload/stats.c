/* Per-iteration latencies: kept whole so that p50/p99 are exact. */
#include <math.h>
#include <stdlib.h>

#include "workload.h"

int wl_stats_add(struct wl_stats *s, double ms)
{
    if (s->count == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 1024;
        double *p = realloc(s->lat_ms, cap * sizeof *p);
        if (!p)
            return -1;
        s->lat_ms = p;
        s->cap = cap;
    }
    s->lat_ms[s->count++] = ms;
    s->sum_ms += ms;
    return 0;
}

static int wl_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double wl_stats_quantile(struct wl_stats *s, double q)
{
    if (!s->count)
        return 0.0;
    qsort(s->lat_ms, s->count, sizeof *s->lat_ms, wl_cmp_double);
    /* Nearest rank: the smallest value with at least q of the samples at or below it. */
    size_t rank = (size_t)ceil(q * (double)s->count - 1e-9);
    if (rank < 1)
        rank = 1;
    if (rank > s->count)
        rank = s->count;
    return s->lat_ms[rank - 1];
}

void wl_stats_free(struct wl_stats *s)
{
    free(s->lat_ms);
    s->lat_ms = NULL;
    s->count = s->cap = 0;
}
