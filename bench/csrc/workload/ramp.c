/*
 * The memory schedule inside the measured loop, for the oversubscription
 * benchmark (tgs.bench.oversub): with --ramp-every-ms T the footprint
 * (--mem in --alloc-chunk steps) is allocated one chunk at t = 0, T, 2T ...
 * (t: since the measured start), each allocation reported as an "alloc"
 * line with the wall time of its call; an allocation that fails with
 * CUDA_ERROR_OUT_OF_MEMORY is reported (ok false) and ends the ramp, the job
 * goes on with what it holds (a framework would raise; the benchmark wants to
 * see who fails and when, and what the job does next).  With --free-at-s S
 * the footprint is checked (--verify) and freed at t = S (a "free" line:
 * begin_mono_s before the check, mono_s after the free), and the loop goes
 * on without it; the steps due by then are all made first.
 */
#include <time.h>

#include "workload.h"

static double wl_ramp_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const char *wl_result_name(const struct wl_run *run, CUresult rc)
{
    const char *name = NULL;
    if (!run->drv.get_error_name || run->drv.get_error_name(rc, &name) != CUDA_SUCCESS)
        return NULL;
    return name;
}

static void wl_ramp_step(struct wl_run *run, double t)
{
    struct wl_footprint *m = &run->mem;
    size_t i = m->allocated;
    uint64_t size = wl_mem_chunk_size(m, i);
    double us = 0.0;
    CUresult rc = wl_mem_alloc_chunk(run, i, size, &us);
    if (rc != CUDA_SUCCESS && rc != CUDA_ERROR_OUT_OF_MEMORY)
        wl_die_cu(run, run->cfg.managed ? "cuMemAllocManaged" : "cuMemAlloc_v2", rc);
    struct wl_json j;
    wl_json_begin(&j, "alloc", run->cfg.name);
    wl_json_uint(&j, "step", i);
    wl_json_uint(&j, "bytes", size);
    wl_json_bool(&j, "ok", rc == CUDA_SUCCESS);
    wl_json_str(&j, "result", wl_result_name(run, rc));
    wl_json_num(&j, "us", us);
    wl_json_uint(&j, "held", m->held);
    wl_json_num(&j, "t_s", t);
    wl_json_num(&j, "mono_s", wl_ramp_now());
    wl_json_emit(&j);
    if (rc != CUDA_SUCCESS)
        m->ramp_stopped = 1;
}

static void wl_ramp_free(struct wl_run *run, double t)
{
    struct wl_footprint *m = &run->mem;
    double begin = wl_ramp_now();
    if (run->cfg.verify)
        wl_mem_verify(run);
    uint64_t bytes = m->held;
    double t0 = wl_ramp_now();
    for (size_t i = 0; i < m->allocated; i++) {
        if (m->chunks[i])
            WL_CU(run, mem_free, m->chunks[i]);
        m->chunks[i] = 0;
    }
    double us = (wl_ramp_now() - t0) * 1e6;
    m->freed = 1;
    m->held = 0;
    struct wl_json j;
    wl_json_begin(&j, "free", run->cfg.name);
    wl_json_uint(&j, "bytes", bytes);
    wl_json_uint(&j, "chunks", m->allocated);
    wl_json_num(&j, "us", us);
    wl_json_num(&j, "t_s", t);
    wl_json_num(&j, "begin_mono_s", begin);
    wl_json_num(&j, "mono_s", wl_ramp_now());
    wl_json_emit(&j);
}

void wl_ramp_tick(struct wl_run *run, double t)
{
    struct wl_footprint *m = &run->mem;
    const struct wl_config *cfg = &run->cfg;
    if (m->freed)
        return;
    /* Every step due is made before the free: a loop that falls behind (a loaded machine,
     * one slow iteration) still runs the whole schedule instead of skipping to the free. */
    while (cfg->ramp_every_ms > 0 && !m->ramp_stopped && m->allocated < m->nchunks &&
           t * 1e3 >= (double)m->allocated * cfg->ramp_every_ms)
        wl_ramp_step(run, t);
    if (cfg->free_at_s > 0 && t >= cfg->free_at_s)
        wl_ramp_free(run, t);
}
