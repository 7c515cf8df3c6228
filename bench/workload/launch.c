/*
 * One iteration's kernels, by the launch path under test: each path is one
 * a shim must see (PyTorch on H100 uses cuLaunchKernelEx, CUDA graphs use
 * cuGraphLaunch, some libraries launch cooperatively).
 */
#include <stddef.h>
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
        p.gridDimX = run->geo.grid;
        p.gridDimY = p.gridDimZ = 1;
        p.blockDimX = run->geo.block;
        p.blockDimY = p.blockDimZ = 1;
        p.kernelParams = l->params;
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

void wl_launch_setup(struct wl_run *run)
{
    struct wl_launcher *l = &run->launcher;
    l->spin_ns = run->geo.spin_ns;
    l->params[0] = &l->spin_ns;
    l->stream = NULL;
    if (run->cfg.use_stream) {
        wl_need(run, (const void *)run->drv.stream_create_with_priority,
                "cuStreamCreateWithPriority");
        WL_CU(run, stream_create_with_priority, &l->stream, CU_STREAM_DEFAULT,
              run->cfg.priority);
    }
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

void wl_launch_iteration(struct wl_run *run)
{
    struct wl_launcher *l = &run->launcher;
    unsigned g = run->geo.grid, b = run->geo.block;

    if (run->cfg.launch == WL_LAUNCH_GRAPH) {
        WL_CU(run, graph_launch, l->exec, l->stream);
        return;
    }
    for (unsigned k = 0; k < run->cfg.kernels; k++) {
        switch (run->cfg.launch) {
        case WL_LAUNCH_KERNEL:
            WL_CU(run, launch_kernel, l->fn, g, 1, 1, b, 1, 1, 0, l->stream, l->params, NULL);
            break;
        case WL_LAUNCH_EX: {
            CUlaunchConfig c;
            memset(&c, 0, sizeof c);
            c.gridDimX = g;
            c.gridDimY = c.gridDimZ = 1;
            c.blockDimX = b;
            c.blockDimY = c.blockDimZ = 1;
            c.hStream = l->stream;
            WL_CU(run, launch_kernel_ex, &c, l->fn, l->params, NULL);
            break;
        }
        case WL_LAUNCH_COOP:
            WL_CU(run, launch_cooperative_kernel, l->fn, g, 1, 1, b, 1, 1, 0, l->stream,
                  l->params);
            break;
        case WL_LAUNCH_GRAPH:
            break;
        }
    }
}

void wl_synchronize(struct wl_run *run)
{
    if (run->drv.ctx_synchronize_v2)
        WL_CU(run, ctx_synchronize_v2, run->ctx);
    else
        WL_CU(run, ctx_synchronize);
}

void wl_launch_teardown(struct wl_run *run)
{
    struct wl_launcher *l = &run->launcher;
    if (l->exec)
        WL_CU(run, graph_exec_destroy, l->exec);
    if (l->graph)
        WL_CU(run, graph_destroy, l->graph);
    if (l->stream && run->drv.stream_destroy)
        WL_CU(run, stream_destroy, l->stream);
    l->exec = NULL;
    l->graph = NULL;
    l->stream = NULL;
}
