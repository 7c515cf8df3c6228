/*
 * Kernel geometry from --kernel-us.  Two clocks must agree:
 *   the simulator charges blocks x threads x ns_per_thread (x cost factor);
 *   a real GPU runs ceil(grid / resident blocks) waves of spin_ns each.
 * So the grid follows the simulator's model and the spin follows the waves.
 */
#include <math.h>
#include <stdio.h>

#include "workload.h"

#define WL_MAX_GRID 2147483647.0

/* Blocks that fit on the whole device at once; 0 if unknown. */
static uint64_t wl_resident_blocks(const struct wl_device_info *dev, unsigned block)
{
    if (dev->sm_count <= 0 || dev->max_threads_per_sm <= 0)
        return 0;
    uint64_t per_sm = (uint64_t)dev->max_threads_per_sm / block;
    if (per_sm == 0)
        per_sm = 1;
    return per_sm * (uint64_t)dev->sm_count;
}

int wl_geometry_plan(const struct wl_config *cfg, const struct wl_device_info *dev,
                     double ns_per_thread, struct wl_geometry *geo, char *err, size_t errlen)
{
    double kernel_ns = cfg->kernel_us * 1000.0;
    geo->block = cfg->block ? cfg->block : cfg->threads;
    geo->sim_cost = cfg->cost_factor;
    geo->clamped = 0;
    if (cfg->grid) {
        geo->grid = cfg->grid;
    } else {
        double g = ceil(kernel_ns / ((double)geo->block * ns_per_thread));
        if (g > WL_MAX_GRID) {
            snprintf(err, errlen, "--kernel-us %g needs %.0f blocks of %u threads: over the "
                     "grid limit; raise --threads-per-block", cfg->kernel_us, g, geo->block);
            return -1;
        }
        geo->grid = g < 1.0 ? 1 : (unsigned)g;
    }

    uint64_t resident = wl_resident_blocks(dev, geo->block);
    if (cfg->launch == WL_LAUNCH_COOP && !cfg->grid && resident && geo->grid > resident) {
        /* A cooperative grid must be co-resident: cut it to one wave and let
         * the simulator's cost factor make up the blocks dropped. */
        geo->sim_cost = cfg->cost_factor * (double)geo->grid / (double)resident;
        geo->grid = (unsigned)resident;
        geo->clamped = 1;
    }
    geo->waves = resident ? (unsigned)((geo->grid + resident - 1) / resident) : 1;
    double spin = kernel_ns * cfg->cost_factor / geo->waves;
    geo->spin_ns = spin < 1.0 ? 1 : (uint64_t)llround(spin);
    return 0;
}
