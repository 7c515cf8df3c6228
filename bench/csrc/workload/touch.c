/*
 * --touch STRIDE: after each iteration's kernels, one tgs_touch kernel per
 * chunk of the footprint still held reads one 32-bit word every STRIDE
 * bytes of it (grid-stride, at most WL_TOUCH_MAX_THREADS threads).  The
 * spin kernels read no memory, so on a real GPU an evicted (managed)
 * footprint costs nothing without this; with it, every iteration faults in
 * what is not resident, as a training step touching its weights would.
 * The simulator charges every kernel for its process's non-resident managed
 * memory whatever it reads (docs/simulator.md), so the oversubscription
 * benchmark uses --touch on real GPUs only.
 */
#include "workload.h"

void wl_touch_setup(struct wl_run *run)
{
    if (!run->cfg.touch_stride)
        return;
    if (!run->drv.launch_kernel)
        wl_die(run, "--touch needs cuLaunchKernel");
    WL_CU(run, module_get_function, &run->launcher.touch_fn, run->module, WL_TOUCH_NAME);
}

void wl_touch_launch(struct wl_run *run)
{
    struct wl_launcher *l = &run->launcher;
    const struct wl_footprint *m = &run->mem;
    uint64_t stride = run->cfg.touch_stride;
    if (!stride || m->freed)
        return;
    for (size_t i = 0; i < m->allocated; i++) {
        if (!m->chunks[i])
            continue;
        uint64_t base = m->chunks[i], bytes = wl_mem_chunk_size(m, i);
        uint64_t words = (bytes + stride - 1) / stride;
        unsigned threads = words < WL_TOUCH_MAX_THREADS ? (unsigned)words : WL_TOUCH_MAX_THREADS;
        unsigned block = threads < WL_TOUCH_BLOCK ? threads : WL_TOUCH_BLOCK;
        unsigned grid = (threads + block - 1) / block;
        void *params[3] = {&base, &bytes, &stride};
        WL_CU(run, launch_kernel, l->touch_fn, grid, 1, 1, block, 1, 1, 0, l->stream, params,
              NULL);
        l->touches++;
    }
}
