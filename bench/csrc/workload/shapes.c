/*
 * Workload shapes beyond "K equal kernels, synchronize, gap":
 *
 * Kernel-duration mix (--kernel-mix L): of the iteration's K kernels, L are long and K - L
 * short.  Short durations are log-uniform in [10, 100] us, long ones uniform in [5, 20] ms; the
 * long ones sit at evenly spaced positions (k = (i + 1) * K / (L + 1) - 1).  The sequence is
 * drawn once from --seed and replayed every iteration, as a model's kernel sequence repeats.
 *
 * Poisson arrivals (--poisson-rps R): requests arrive with exponential inter-arrival times of
 * mean 1/R, independent of how fast they are served (an open loop, like users of a server).
 */
#include <math.h>

#include "workload.h"

double wl_rand01(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    return (double)(z >> 11) * (1.0 / 9007199254740992.0);   /* [0, 1) */
}

void wl_mix_plan(const struct wl_config *cfg, double *kernel_us)
{
    unsigned k = cfg->kernels, nlong = cfg->mix_long;
    uint64_t st = cfg->seed;
    for (unsigned i = 0; i < k; i++)
        kernel_us[i] = cfg->kernel_us;
    if (!nlong)
        return;
    double lo = log(WL_MIX_SHORT_US_MIN), hi = log(WL_MIX_SHORT_US_MAX);
    for (unsigned i = 0; i < k; i++)
        kernel_us[i] = exp(lo + (hi - lo) * wl_rand01(&st));
    for (unsigned i = 0; i < nlong; i++) {
        unsigned pos = (unsigned)(((uint64_t)(i + 1) * k) / (nlong + 1));
        pos = pos ? pos - 1 : 0;
        kernel_us[pos] = WL_MIX_LONG_US_MIN +
                         (WL_MIX_LONG_US_MAX - WL_MIX_LONG_US_MIN) * wl_rand01(&st);
    }
}

double wl_next_arrival(const struct wl_config *cfg, uint64_t *state, double t)
{
    double u = wl_rand01(state);
    return t - log(1.0 - u) / cfg->poisson_rps;
}
