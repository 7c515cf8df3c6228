/*
 * tgs-workload: set up the device like a framework would (driver lookup,
 * primary context, module JIT, memory), print the start line, run the job,
 * tear down.  Any failure is reported and exits 1; nothing is left hanging.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "workload.h"

#define WL_PTX_MAX 8192

/* TGS_SIM_NS_PER_THREAD: the simulator's cost of one thread (default 1 ns). */
static double wl_ns_per_thread(void)
{
    const char *s = getenv("TGS_SIM_NS_PER_THREAD");
    char *end = NULL;
    if (!s || !*s)
        return 1.0;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v) || v <= 0.0) {
        fprintf(stderr, "tgs-workload: ignoring malformed TGS_SIM_NS_PER_THREAD='%s' (using 1)\n",
                s);
        return 1.0;
    }
    return v;
}

static int wl_attribute(struct wl_run *run, CUdevice_attribute attr)
{
    int v = 0;
    if (run->drv.device_get_attribute(&v, attr, run->dev) != CUDA_SUCCESS)
        return 0;
    return v;
}

static void wl_device_setup(struct wl_run *run)
{
    int count = 0;
    WL_CU(run, init, 0);
    WL_CU(run, device_get_count, &count);
    if (run->cfg.device >= count)
        wl_die(run, "device %d does not exist (the driver sees %d device%s)", run->cfg.device,
               count, count == 1 ? "" : "s");
    WL_CU(run, device_get, &run->dev, run->cfg.device);
    WL_CU(run, device_get_name, run->device_name, (int)sizeof run->device_name, run->dev);
    run->devinfo.sm_count = wl_attribute(run, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    run->devinfo.max_threads_per_sm =
        wl_attribute(run, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
    /* The primary context, as the CUDA runtime uses. */
    WL_CU(run, primary_ctx_retain, &run->ctx, run->dev);
    WL_CU(run, ctx_set_current, run->ctx);
}

static void wl_module_setup(struct wl_run *run, double ns_per_thread)
{
    char err[256];
    char ptx[WL_PTX_MAX];
    if (wl_geometry_plan(&run->cfg, &run->devinfo, ns_per_thread, &run->geo, err, sizeof err))
        wl_die(run, "%s", err);
    if (wl_ptx_build(ptx, sizeof ptx, run->geo.sim_cost) != 0)
        wl_die(run, "internal error: PTX image does not fit %d bytes", WL_PTX_MAX);
    WL_CU(run, module_load_data, &run->module, ptx);
    WL_CU(run, module_get_function, &run->launcher.fn, run->module, WL_KERNEL_NAME);
}

static const void *wl_launch_fn(const struct wl_run *run)
{
    switch (run->cfg.launch) {
    case WL_LAUNCH_EX: return (const void *)run->drv.launch_kernel_ex;
    case WL_LAUNCH_COOP: return (const void *)run->drv.launch_cooperative_kernel;
    case WL_LAUNCH_GRAPH: return (const void *)run->drv.graph_launch;
    case WL_LAUNCH_KERNEL: break;
    }
    return (const void *)run->drv.launch_kernel;
}

static void wl_start_line(const struct wl_run *run, double ns_per_thread)
{
    const struct wl_config *c = &run->cfg;
    int version = 0;
    struct wl_json j;
    if (run->drv.driver_get_version(&version) != CUDA_SUCCESS)
        version = 0;
    wl_json_begin(&j, "start", c->name);
    wl_json_int(&j, "pid", (long long)getpid());
    wl_json_str(&j, "resolve", wl_resolve_name(c->resolve));
    wl_json_str(&j, "getproc", run->drv.getproc_symbol);
    wl_json_str(&j, "launch_symbol", wl_symbol_of(wl_launch_fn(run)));
    wl_json_int(&j, "driver_version", version);
    wl_json_int(&j, "device", c->device);
    wl_json_str(&j, "device_name", run->device_name);
    wl_json_int(&j, "sm_count", run->devinfo.sm_count);
    wl_json_int(&j, "max_threads_per_sm", run->devinfo.max_threads_per_sm);
    wl_json_obj_begin(&j, "config");
    wl_json_uint(&j, "kernels", c->kernels);
    wl_json_num(&j, "kernel_us", c->kernel_us);
    wl_json_uint(&j, "threads_per_block", c->threads);
    wl_json_num(&j, "gap_ms", c->gap_ms);
    wl_json_uint(&j, "phases", c->nphases);
    wl_json_uint(&j, "iters", c->iters);
    wl_json_num(&j, "seconds", c->seconds);
    wl_json_uint(&j, "warmup", c->warmup);
    wl_json_num(&j, "report_ms", c->report_ms);
    wl_json_uint(&j, "mem_bytes", c->mem_bytes);
    wl_json_uint(&j, "alloc_chunk", c->alloc_chunk);
    wl_json_num(&j, "cost_factor", c->cost_factor);
    wl_json_str(&j, "launch", wl_launch_name(c->launch));
    wl_json_bool(&j, "stream", c->use_stream);
    wl_json_int(&j, "priority", c->priority);
    wl_json_bool(&j, "per_thread", c->per_thread);
    wl_json_int(&j, "cuda_version", c->cuda_version);
    wl_json_uint(&j, "sync_every", c->sync_every);
    wl_json_uint(&j, "ahead", c->ahead);
    wl_json_uint(&j, "streams", c->streams);
    wl_json_uint(&j, "kernel_mix", c->mix_long);
    wl_json_num(&j, "poisson_rps", c->poisson_rps);
    wl_json_uint(&j, "seed", c->seed);
    wl_json_bool(&j, "managed", c->managed);
    wl_json_bool(&j, "prefer_device", c->prefer_device);
    wl_json_num(&j, "ramp_every_ms", c->ramp_every_ms);
    wl_json_num(&j, "free_at_s", c->free_at_s);
    wl_json_bool(&j, "verify", c->verify);
    wl_json_uint(&j, "touch_stride", c->touch_stride);
    wl_json_obj_end(&j);
    wl_json_obj_begin(&j, "geometry");
    wl_json_uint(&j, "grid", run->geo.grid);
    wl_json_uint(&j, "block", run->geo.block);
    wl_json_uint(&j, "spin_ns", run->geo.spin_ns);
    wl_json_uint(&j, "waves", run->geo.waves);
    wl_json_num(&j, "sim_cost", run->geo.sim_cost);
    wl_json_bool(&j, "clamped", run->geo.clamped);
    wl_json_num(&j, "ns_per_thread", ns_per_thread);
    double iter_us = 0.0, longest = 0.0;
    for (unsigned k = 0; k < c->kernels; k++) {
        iter_us += run->launcher.kernels[k].us;
        if (run->launcher.kernels[k].us > longest)
            longest = run->launcher.kernels[k].us;
    }
    wl_json_num(&j, "iteration_gpu_us", iter_us);
    wl_json_num(&j, "longest_kernel_us", longest);
    wl_json_obj_end(&j);
    wl_json_obj_begin(&j, "mem");
    wl_json_uint(&j, "bytes", run->mem.bytes);
    wl_json_uint(&j, "chunks", run->mem.nchunks);
    wl_json_uint(&j, "free_before", run->mem.free_before);
    wl_json_uint(&j, "free_after", run->mem.free_after);
    wl_json_uint(&j, "total", run->mem.total);
    wl_json_obj_end(&j);
    wl_json_emit(&j);
}

int main(int argc, char **argv)
{
    struct wl_run run;
    memset(&run, 0, sizeof run);
    if (wl_parse_args(argc, argv, &run.cfg)) {
        char ptx[WL_PTX_MAX];
        if (wl_ptx_build(ptx, sizeof ptx, run.cfg.cost_factor) != 0)
            return WL_EXIT_FAIL;
        fputs(ptx, stdout);
        return 0;
    }
    double ns_per_thread = wl_ns_per_thread();
    run.ns_per_thread = ns_per_thread;
    wl_loop_install_signals();
    wl_resolve_driver(&run, &run.drv);
    wl_device_setup(&run);
    wl_module_setup(&run, ns_per_thread);
    wl_mem_setup(&run);
    wl_launch_setup(&run);
    wl_touch_setup(&run);
    wl_start_line(&run, ns_per_thread);

    wl_loop_run(&run);
    if (run.cfg.verify)
        wl_mem_verify(&run);

    wl_launch_teardown(&run);
    wl_mem_release(&run);
    WL_CU(&run, module_unload, run.module);
    WL_CU(&run, primary_ctx_release, run.dev);
    return 0;
}
