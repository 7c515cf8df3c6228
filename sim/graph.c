/*
 * graph.c: CUDA graphs of kernel nodes (and the memcpy/memset nodes stream
 * capture makes).  Nodes run in insertion order (the device runs one kernel
 * at a time, so dependencies cannot change timing); a launch enqueues every
 * kernel, so it takes the sum of their times; copies and memsets are done at
 * once, as the simulator's asynchronous copies are.
 */
#include <stdlib.h>
#include <string.h>

#include "sim.h"

struct CUgraphNode_st {
    struct sim_obj obj;
    struct CUgraph_st *graph;
    struct sim_graph_op op;
};

struct CUgraph_st {
    struct sim_obj obj;
    struct CUgraphNode_st **nodes;
    size_t n;
};

struct CUgraphExec_st {
    struct sim_obj obj;
    struct sim_graph_op *k;
    size_t n;
};

CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!phGraph || flags)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUgraph_st *g = calloc(1, sizeof *g);
    if (!g)
        return CUDA_ERROR_OUT_OF_MEMORY;
    g->obj.kind = SIM_K_GRAPH;
    sim_handle_add(g);
    *phGraph = g;
    return CUDA_SUCCESS;
}

CUresult cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
                                 const CUgraphNode *dependencies, size_t numDependencies,
                                 const CUDA_KERNEL_NODE_PARAMS_v2 *nodeParams)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!phGraphNode || !nodeParams || (numDependencies && !dependencies))
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_handle_ok(hGraph, SIM_K_GRAPH))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < numDependencies; i++)
        if (!sim_handle_ok(dependencies[i], SIM_K_NODE) || dependencies[i]->graph != hGraph)
            return CUDA_ERROR_INVALID_VALUE;
    if (!sim_handle_ok(nodeParams->func, SIM_K_FUNC) ||
        !nodeParams->gridDimX || !nodeParams->gridDimY || !nodeParams->gridDimZ ||
        !nodeParams->blockDimX || !nodeParams->blockDimY || !nodeParams->blockDimZ ||
        (nodeParams->kernelParams && nodeParams->extra))
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_graph_op op = {.type = CU_GRAPH_NODE_TYPE_KERNEL, .k = *nodeParams};
    return sim_graph_add(hGraph, &op, dependencies, numDependencies, phGraphNode);
}

int sim_graph_has_node(CUgraph g, CUgraphNode n)
{
    return sim_handle_ok(n, SIM_K_NODE) && n->graph == g;
}

/* Callers have validated g, deps and op. */
CUresult sim_graph_add(CUgraph hGraph, const struct sim_graph_op *op, const CUgraphNode *deps,
                       size_t ndeps, CUgraphNode *phGraphNode)
{
    (void)deps; /* dependencies do not change the order nodes run in (see above) */
    (void)ndeps;
    struct CUgraphNode_st *n = calloc(1, sizeof *n);
    struct CUgraphNode_st **arr = realloc(hGraph->nodes, (hGraph->n + 1) * sizeof *arr);
    if (!n || !arr) {
        free(n);
        if (arr)
            hGraph->nodes = arr;
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    n->obj.kind = SIM_K_NODE;
    n->graph = hGraph;
    n->op = *op;
    hGraph->nodes = arr;
    arr[hGraph->n++] = n;
    sim_handle_add(n);
    *phGraphNode = n;
    return CUDA_SUCCESS;
}

CUresult cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                              const CUgraphNode *dependencies, size_t numDependencies,
                              const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
    if (!nodeParams)
        return sim_check_init() ? sim_check_init() : CUDA_ERROR_INVALID_VALUE;
    CUDA_KERNEL_NODE_PARAMS_v2 p;
    memset(&p, 0, sizeof p);
    memcpy(&p, nodeParams, sizeof *nodeParams); /* v2 extends v1 */
    return cuGraphAddKernelNode_v2(phGraphNode, hGraph, dependencies, numDependencies, &p);
}

CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS_v2 *nodeParams)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!nodeParams || !sim_handle_ok(hNode, SIM_K_NODE) ||
        hNode->op.type != CU_GRAPH_NODE_TYPE_KERNEL)
        return CUDA_ERROR_INVALID_VALUE;
    *nodeParams = hNode->op.k;
    return CUDA_SUCCESS;
}

CUresult cuGraphKernelNodeGetParams(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
    CUDA_KERNEL_NODE_PARAMS_v2 p;
    if (!nodeParams)
        return sim_check_init() ? sim_check_init() : CUDA_ERROR_INVALID_VALUE;
    CUresult r = cuGraphKernelNodeGetParams_v2(hNode, &p);
    if (r == CUDA_SUCCESS)
        memcpy(nodeParams, &p, sizeof *nodeParams);
    return r;
}

CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!numNodes || !sim_handle_ok(hGraph, SIM_K_GRAPH))
        return CUDA_ERROR_INVALID_VALUE;
    if (nodes) {
        for (size_t i = 0; i < *numNodes; i++)
            nodes[i] = i < hGraph->n ? hGraph->nodes[i] : NULL;
        if (*numNodes > hGraph->n)
            *numNodes = hGraph->n;
    } else {
        *numNodes = hGraph->n;
    }
    return CUDA_SUCCESS;
}

CUresult cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!type || !sim_handle_ok(hNode, SIM_K_NODE))
        return CUDA_ERROR_INVALID_VALUE;
    *type = (CUgraphNodeType)hNode->op.type;
    return CUDA_SUCCESS;
}

static CUresult instantiate(CUgraphExec *out, CUgraph g)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!out || !sim_handle_ok(g, SIM_K_GRAPH))
        return CUDA_ERROR_INVALID_VALUE;
    struct CUgraphExec_st *e = calloc(1, sizeof *e);
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    e->k = calloc(g->n ? g->n : 1, sizeof *e->k);
    if (!e->k) {
        free(e);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (size_t i = 0; i < g->n; i++)
        e->k[i] = g->nodes[i]->op;
    e->n = g->n;
    e->obj.kind = SIM_K_EXEC;
    sim_handle_add(e);
    *out = e;
    return CUDA_SUCCESS;
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                     unsigned long long flags)
{
    if (flags & ~0xfull)
        return sim_check_init() ? sim_check_init() : CUDA_ERROR_INVALID_VALUE;
    return instantiate(phGraphExec, hGraph);
}

CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                               char *logBuffer, size_t bufferSize)
{
    if (phErrorNode)
        *phErrorNode = NULL;
    if (logBuffer && bufferSize)
        logBuffer[0] = 0;
    return instantiate(phGraphExec, hGraph);
}

CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                            char *logBuffer, size_t bufferSize)
{
    return cuGraphInstantiate_v2(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                                      CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    if (!instantiateParams)
        return sim_check_init() ? sim_check_init() : CUDA_ERROR_INVALID_VALUE;
    CUresult r = cuGraphInstantiateWithFlags(phGraphExec, hGraph, instantiateParams->flags & 0xf);
    instantiateParams->hErrNode_out = NULL;
    instantiateParams->result_out =
        r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
    return r;
}

CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
                                           CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    return cuGraphInstantiateWithParams(phGraphExec, hGraph, instantiateParams);
}

void sim_graph_op_run_host(const struct sim_graph_op *op)
{
    if (op->type == CU_GRAPH_NODE_TYPE_MEMCPY) {
        memmove(op->dst, op->src, op->bytes);
    } else if (op->type == CU_GRAPH_NODE_TYPE_MEMSET && op->elem == 1) {
        memset(op->dst, (int)(op->value & 0xff), op->count);
    } else if (op->type == CU_GRAPH_NODE_TYPE_MEMSET) {
        uint32_t *p = op->dst;
        for (size_t i = 0; i < op->count; i++)
            p[i] = op->value;
    }
}

/* A launch into a capturing stream is captured node by node (a flattened
 * child graph): each node goes through the capture-aware paths. */
static CUresult graph_launch(CUgraphExec hGraphExec, CUstream hStream, int ptsz)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_handle_ok(hGraphExec, SIM_K_EXEC))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < hGraphExec->n && r == CUDA_SUCCESS; i++) {
        const struct sim_graph_op *op = &hGraphExec->k[i];
        if (op->type == CU_GRAPH_NODE_TYPE_KERNEL) {
            const CUDA_KERNEL_NODE_PARAMS_v2 *k = &op->k;
            r = sim_launch(k->func, k->gridDimX, k->gridDimY, k->gridDimZ, k->blockDimX,
                           k->blockDimY, k->blockDimZ, hStream, ptsz);
            continue;
        }
        struct CUctx_st *ctx;
        struct CUstream_st *obj;
        r = sim_stream_resolve(hStream, &ctx, &obj);
        if (r == CUDA_SUCCESS && !sim_capture_take(hStream, ptsz, ctx, obj, op, &r))
            sim_graph_op_run_host(op);
    }
    return r;
}

CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    return graph_launch(hGraphExec, hStream, 0);
}

CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    return graph_launch(hGraphExec, hStream, 1);
}

CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_handle_ok(hGraphExec, SIM_K_EXEC))
        return CUDA_ERROR_INVALID_VALUE;
    sim_handle_del(hGraphExec);
    hGraphExec->obj.kind = 0;
    free(hGraphExec->k);
    free(hGraphExec);
    return CUDA_SUCCESS;
}

CUresult cuGraphDestroy(CUgraph hGraph)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_handle_ok(hGraph, SIM_K_GRAPH))
        return CUDA_ERROR_INVALID_VALUE;
    if (sim_capture_graph_busy(hGraph))
        return CUDA_ERROR_ILLEGAL_STATE; /* not while a capture builds it */
    sim_handle_del(hGraph);
    for (size_t i = 0; i < hGraph->n; i++) {
        sim_handle_del(hGraph->nodes[i]);
        hGraph->nodes[i]->obj.kind = 0;
        free(hGraph->nodes[i]);
    }
    free(hGraph->nodes);
    hGraph->obj.kind = 0;
    free(hGraph);
    return CUDA_SUCCESS;
}
