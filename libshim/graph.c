/*
 * libshim/graph.c: the work of a CUDA graph, counted at instantiation by
 * walking its nodes through the REAL driver functions, and remembered per
 * executable graph: threads (work units), thread blocks and kernel nodes.
 * Child-graph nodes are not descended into (the ABI subset has no
 * cuGraphChildGraphNodeGetGraph): their kernels are not charged.
 */
#include <stdlib.h>

#include "shim.h"

static void add_node(struct tgs_launch_count *c, unsigned gx, unsigned gy, unsigned gz,
                     unsigned bx, unsigned by, unsigned bz)
{
    uint64_t blocks = (uint64_t)gx * gy * gz;
    c->work += blocks * ((uint64_t)bx * by * bz);
    c->blocks += blocks;
    c->kernels++;
}

void tgs_graph_note(CUgraphExec exec, CUgraph graph)
{
    struct tgs_real *R = &tgs_g.real;
    if (!exec || !R->cuGraphGetNodes || !R->cuGraphNodeGetType)
        return;
    size_t n = 0;
    if (R->cuGraphGetNodes(graph, NULL, &n) != CUDA_SUCCESS)
        return;
    CUgraphNode *nodes = n ? calloc(n, sizeof(*nodes)) : NULL;
    if (n && (!nodes || R->cuGraphGetNodes(graph, nodes, &n) != CUDA_SUCCESS)) {
        free(nodes);
        return;
    }
    struct tgs_launch_count c = { 0, 0, 0 };
    for (size_t i = 0; i < n; i++) {
        CUgraphNodeType t;
        if (R->cuGraphNodeGetType(nodes[i], &t) != CUDA_SUCCESS || t != CU_GRAPH_NODE_TYPE_KERNEL)
            continue;
        if (R->cuGraphKernelNodeGetParams_v2) {
            CUDA_KERNEL_NODE_PARAMS_v2 p = { 0 };
            if (R->cuGraphKernelNodeGetParams_v2(nodes[i], &p) != CUDA_SUCCESS)
                continue;
            add_node(&c, p.gridDimX, p.gridDimY, p.gridDimZ, p.blockDimX, p.blockDimY,
                     p.blockDimZ);
        } else if (R->cuGraphKernelNodeGetParams) {
            CUDA_KERNEL_NODE_PARAMS_v1 p = { 0 };
            if (R->cuGraphKernelNodeGetParams(nodes[i], &p) != CUDA_SUCCESS)
                continue;
            add_node(&c, p.gridDimX, p.gridDimY, p.gridDimZ, p.blockDimX, p.blockDimY,
                     p.blockDimZ);
        }
    }
    free(nodes);
    tgs_graph_forget(exec);
    tgs_ptrmap_put(&tgs_g.graphs, TGS_KIND_GRAPH_WORK, (uintptr_t)exec, c.work);
    tgs_ptrmap_put(&tgs_g.graphs, TGS_KIND_GRAPH_BLOCKS, (uintptr_t)exec, c.blocks);
    tgs_ptrmap_put(&tgs_g.graphs, TGS_KIND_GRAPH_KERNELS, (uintptr_t)exec, c.kernels);
    tgs_log(TGS_LOG_DEBUG, "graph exec %p: %llu kernels, %llu blocks, %llu work units",
            (void *)exec, (unsigned long long)c.kernels, (unsigned long long)c.blocks,
            (unsigned long long)c.work);
}

int tgs_graph_work(CUgraphExec exec, struct tgs_launch_count *out)
{
    uintptr_t k = (uintptr_t)exec;
    if (tgs_ptrmap_get(&tgs_g.graphs, TGS_KIND_GRAPH_WORK, k, &out->work) &&
        tgs_ptrmap_get(&tgs_g.graphs, TGS_KIND_GRAPH_BLOCKS, k, &out->blocks) &&
        tgs_ptrmap_get(&tgs_g.graphs, TGS_KIND_GRAPH_KERNELS, k, &out->kernels))
        return 1;
    out->work = out->blocks = out->kernels = 0;
    return 0;
}

void tgs_graph_forget(CUgraphExec exec)
{
    uint64_t old;
    tgs_ptrmap_take(&tgs_g.graphs, TGS_KIND_GRAPH_WORK, (uintptr_t)exec, &old);
    tgs_ptrmap_take(&tgs_g.graphs, TGS_KIND_GRAPH_BLOCKS, (uintptr_t)exec, &old);
    tgs_ptrmap_take(&tgs_g.graphs, TGS_KIND_GRAPH_KERNELS, (uintptr_t)exec, &old);
}

#define INSTANTIATE_BODY(name, call) \
    do { \
        TGS_HIT(name); \
        tgs_ensure_init(); \
        if (!tgs_g.real.name) \
            return tgs_g.real.handle ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_NOT_INITIALIZED; \
        CUresult r_ = tgs_g.real.name call; \
        if (r_ == CUDA_SUCCESS && phGraphExec) \
            tgs_graph_note(*phGraphExec, hGraph); \
        return r_; \
    } while (0)

TGS_EXPORT CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph,
                                       CUgraphNode *phErrorNode, char *logBuffer,
                                       size_t bufferSize)
{
    INSTANTIATE_BODY(cuGraphInstantiate,
                     (phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize));
}

TGS_EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph,
                                          CUgraphNode *phErrorNode, char *logBuffer,
                                          size_t bufferSize)
{
    INSTANTIATE_BODY(cuGraphInstantiate_v2,
                     (phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize));
}

TGS_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                unsigned long long flags)
{
    INSTANTIATE_BODY(cuGraphInstantiateWithFlags, (phGraphExec, hGraph, flags));
}

TGS_EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                 CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    INSTANTIATE_BODY(cuGraphInstantiateWithParams, (phGraphExec, hGraph, instantiateParams));
}

TGS_EXPORT CUresult cuGraphInstantiateWithParams_ptsz(
    CUgraphExec *phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    INSTANTIATE_BODY(cuGraphInstantiateWithParams_ptsz, (phGraphExec, hGraph, instantiateParams));
}

TGS_EXPORT CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    TGS_HIT(cuGraphExecDestroy);
    tgs_ensure_init();
    if (!tgs_g.real.cuGraphExecDestroy)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = tgs_g.real.cuGraphExecDestroy(hGraphExec);
    if (r == CUDA_SUCCESS)
        tgs_graph_forget(hGraphExec);
    return r;
}
