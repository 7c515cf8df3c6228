/*
 * One iteration's kernels, by the launch path under test: each path is one
 * a shim must see (PyTorch on H100 uses cuLaunchKernelEx, CUDA graphs use
 * cuGraphLaunch, some libraries launch cooperatively).
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "workload.h"

static void wl_need(struct wl_run *run, const void *fn, const char *what)
{
    if (!fn)
        wl_die(run, "%s is not available from this driver (--resolve %s, --cuda-version %d)",
               what, wl_resolve_name(run->cfg.resolve), run->cfg.cuda_version);
}

/* Adds K kernel nodes in a chain, as stream capture of K launches would. */
static void wl_graph_build(struct wl_run *run)
{
    struct wl_launcher *l = &run->launcher;
    CUgraphNode prev = NULL;
    int v2 = run->drv.graph_add_kernel_node_v2 != NULL;

    wl_need(run, (const void *)run->drv.graph_create, "cuGraphCreate");
    wl_need(run, v2 ? (const void *)run->drv.graph_add_kernel_node_v2
                    : (const void *)run->drv.graph_add_kernel_node, "cuGraphAddKernelNode");
    wl_need(run, (const void *)run->drv.graph_instantiate_with_flags,
            "cuGraphInstantiateWithFlags");
    wl_need(run, (const void *)run->drv.graph_launch, "cuGraphLaunch");
    WL_CU(run, graph_create, &l->graph, 0);
    for (unsigned k = 0; k < run->cfg.kernels; k++) {
        CUgraphNode node = NULL;
        size_t ndeps = prev ? 1 : 0;
        /* v1 is the leading part of v2 (v2 only adds kern and ctx): checked below */
        CUDA_KERNEL_NODE_PARAMS_v2 p;
        memset(&p, 0, sizeof p);
        p.func = l->fn;
        p.gridDimX = l->kernels[k].grid;
        p.gridDimY = p.gridDimZ = 1;
        p.blockDimX = l->kernels[k].block;
        p.blockDimY = p.blockDimZ = 1;
        p.kernelParams = l->kernels[k].params;
        if (v2) {
            WL_CU(run, graph_add_kernel_node_v2, &node, l->graph, &prev, ndeps, &p);
        } else {
            CUDA_KERNEL_NODE_PARAMS_v1 p1;
            memcpy(&p1, &p, sizeof p1);
            WL_CU(run, graph_add_kernel_node, &node, l->graph, &prev, ndeps, &p1);
        }
        prev = node;
    }
    WL_CU(run, graph_instantiate_with_flags, &l->exec, l->graph, 0);
}

_Static_assert(sizeof(CUDA_KERNEL_NODE_PARAMS_v1) <= sizeof(CUDA_KERNEL_NODE_PARAMS_v2) &&
                   offsetof(CUDA_KERNEL_NODE_PARAMS_v1, extra) ==
                       offsetof(CUDA_KERNEL_NODE_PARAMS_v2, extra),
               "kernel node params v1 is a prefix of v2");

/* Per-kernel geometry: every kernel as --kernel-us, or the --kernel-mix sequence. */
static void wl_kernels_plan(struct wl_run *run)
{
    struct wl_launcher *l = &run->launcher;
    unsigned k = run->cfg.kernels;
    double *us = calloc(k, sizeof *us);
    l->kernels = calloc(k, sizeof *l->kernels);
    if (!us || !l->kernels)
        wl_die(run, "out of host memory for %u kernels", k);
    wl_mix_plan(&run->cfg, us);
    for (unsigned i = 0; i < k; i++) {
        struct wl_kernel *kn = &l->kernels[i];
        struct wl_geometry g = run->geo;
        if (run->cfg.mix_long) {
            char err[256];
            struct wl_config c = run->cfg;
            c.kernel_us = us[i];
            if (wl_geometry_plan(&c, &run->devinfo, run->ns_per_thread, &g, err, sizeof err))
                wl_die(run, "%s", err);
        }
        kn->grid = g.grid;
        kn->block = g.block;
        kn->spin_ns = g.spin_ns;
        kn->params[0] = &kn->spin_ns;
        kn->us = us[i];
    }
    free(us);
}

static void wl_streams_setup(struct wl_run *run)
{
    struct wl_launcher *l = &run->launcher;
    unsigned n = run->cfg.streams > 1 ? run->cfg.streams : 1;
    l->nstreams = n;
    l->stream = NULL;
    if (!run->cfg.use_stream && n == 1)
        return;
    wl_need(run, (const void *)run->drv.stream_create_with_priority,
            "cuStreamCreateWithPriority");
    for (unsigned i = 0; i < n; i++)
        WL_CU(run, stream_create_with_priority, &l->streams[i], CU_STREAM_DEFAULT,
              run->cfg.priority);
    l->stream = l->streams[0];
    if (n > 1)
        wl_need(run, (const void *)run->drv.stream_synchronize, "cuStreamSynchronize");
}

static void wl_ahead_setup(struct wl_run *run)
{
    struct wl_launcher *l = &run->launcher;
    if (!run->cfg.ahead)
        return;
    wl_need(run, (const void *)run->drv.event_create, "cuEventCreate");
    wl_need(run, (const void *)run->drv.event_record, "cuEventRecord");
    wl_need(run, (const void *)run->drv.event_synchronize, "cuEventSynchronize");
    l->ahead_events = calloc(run->cfg.ahead, sizeof *l->ahead_events);
    if (!l->ahead_events)
        wl_die(run, "out of host memory for %u events", run->cfg.ahead);
    for (unsigned i = 0; i < run->cfg.ahead; i++)
        WL_CU(run, event_create, &l->ahead_events[i], 0);
}

void wl_launch_setup(struct wl_run *run)
{
    wl_kernels_plan(run);
    wl_streams_setup(run);
    wl_ahead_setup(run);
    switch (run->cfg.launch) {
    case WL_LAUNCH_KERNEL:
        wl_need(run, (const void *)run->drv.launch_kernel, "cuLaunchKernel");
        break;
    case WL_LAUNCH_EX:
        wl_need(run, (const void *)run->drv.launch_kernel_ex, "cuLaunchKernelEx");
        break;
    case WL_LAUNCH_COOP:
        wl_need(run, (const void *)run->drv.launch_cooperative_kernel,
                "cuLaunchCooperativeKernel");
        break;
    case WL_LAUNCH_GRAPH:
        wl_graph_build(run);
        break;
    }
}

uint64_t wl_iteration_work(const struct wl_run *run)
{
    uint64_t w = 0;
    for (unsigned k = 0; k < run->cfg.kernels; k++)
        w += (uint64_t)run->launcher.kernels[k].grid * run->launcher.kernels[k].block;
    return w;
}

void wl_ahead_mark(struct wl_run *run, uint64_t iter)
{
    struct wl_launcher *l = &run->launcher;
    if (!run->cfg.ahead)
        return;
    CUevent ev = l->ahead_events[iter % run->cfg.ahead];
    if (iter >= run->cfg.ahead)       /* iteration iter - K must be done first */
        WL_CU(run, event_synchronize, ev);
    WL_CU(run, event_record, ev, l->streams[l->nstreams - 1] ? l->streams[l->nstreams - 1]
                                                              : l->stream);
}

void wl_launch_iteration(struct wl_run *run)
{
    struct wl_launcher *l = &run->launcher;

    if (run->cfg.launch == WL_LAUNCH_GRAPH) {
        WL_CU(run, graph_launch, l->exec, l->stream);
        return;
    }
    for (unsigned k = 0; k < run->cfg.kernels; k++) {
        const struct wl_kernel *kn = &l->kernels[k];
        unsigned g = kn->grid, b = kn->block;
        CUstream s = l->nstreams > 1 ? l->streams[k % l->nstreams] : l->stream;
        void **params = l->kernels[k].params;
        switch (run->cfg.launch) {
        case WL_LAUNCH_KERNEL:
            WL_CU(run, launch_kernel, l->fn, g, 1, 1, b, 1, 1, 0, s, params, NULL);
            break;
        case WL_LAUNCH_EX: {
            CUlaunchConfig c;
            memset(&c, 0, sizeof c);
            c.gridDimX = g;
            c.gridDimY = c.gridDimZ = 1;
            c.blockDimX = b;
            c.blockDimY = c.blockDimZ = 1;
            c.hStream = s;
            WL_CU(run, launch_kernel_ex, &c, l->fn, params, NULL);
            break;
        }
        case WL_LAUNCH_COOP:
            WL_CU(run, launch_cooperative_kernel, l->fn, g, 1, 1, b, 1, 1, 0, s, params);
            break;
        case WL_LAUNCH_GRAPH:
            break;
        }
    }
}

void wl_synchronize(struct wl_run *run)
{
    struct wl_launcher *l = &run->launcher;
    if (l->nstreams > 1) {
        for (unsigned i = 0; i < l->nstreams; i++)
            WL_CU(run, stream_synchronize, l->streams[i]);
    } else if (run->drv.ctx_synchronize_v2) {
        WL_CU(run, ctx_synchronize_v2, run->ctx);
    } else {
        WL_CU(run, ctx_synchronize);
    }
}

void wl_launch_teardown(struct wl_run *run)
{
    struct wl_launcher *l = &run->launcher;
    if (l->exec)
        WL_CU(run, graph_exec_destroy, l->exec);
    if (l->graph)
        WL_CU(run, graph_destroy, l->graph);
    for (unsigned i = 0; i < WL_MAX_STREAMS; i++) {
        if (l->streams[i] && run->drv.stream_destroy)
            WL_CU(run, stream_destroy, l->streams[i]);
        l->streams[i] = NULL;
    }
    for (unsigned i = 0; l->ahead_events && i < run->cfg.ahead; i++) {
        if (l->ahead_events[i] && run->drv.event_destroy)
            WL_CU(run, event_destroy, l->ahead_events[i]);
    }
    free(l->ahead_events);
    free(l->kernels);
    l->ahead_events = NULL;
    l->kernels = NULL;
    l->exec = NULL;
    l->graph = NULL;
    l->stream = NULL;
}
