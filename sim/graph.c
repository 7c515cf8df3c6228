/*
 * graph.c: CUDA graphs of kernel nodes.  Nodes run in insertion order (the
 * device runs one kernel at a time, so dependencies cannot change timing);
 * a launch enqueues every kernel, so it takes the sum of their times.
 */
#include <stdlib.h>
#include <string.h>

#include "sim.h"

struct CUgraphNode_st {
    struct sim_obj obj;
    struct CUgraph_st *graph;
    CUDA_KERNEL_NODE_PARAMS_v2 p;
};

struct CUgraph_st {
    struct sim_obj obj;
    struct CUgraphNode_st **nodes;
    size_t n;
};

struct CUgraphExec_st {
    struct sim_obj obj;
    CUDA_KERNEL_NODE_PARAMS_v2 *k;
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
    if (!(sim_handle_ok(nodeParams->func, SIM_K_FUNC) || sim_handle_ok(nodeParams->func, SIM_K_KERNEL)) ||
        !nodeParams->gridDimX || !nodeParams->gridDimY || !nodeParams->gridDimZ ||
        !nodeParams->blockDimX || !nodeParams->blockDimY || !nodeParams->blockDimZ ||
        (nodeParams->kernelParams && nodeParams->extra))
        return CUDA_ERROR_INVALID_VALUE;
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
    n->p = *nodeParams;
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
    if (!nodeParams || !sim_handle_ok(hNode, SIM_K_NODE))
        return CUDA_ERROR_INVALID_VALUE;
    *nodeParams = hNode->p;
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
    *type = CU_GRAPH_NODE_TYPE_KERNEL;
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
        e->k[i] = g->nodes[i]->p;
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

CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_handle_ok(hGraphExec, SIM_K_EXEC))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < hGraphExec->n && r == CUDA_SUCCESS; i++) {
        const CUDA_KERNEL_NODE_PARAMS_v2 *k = &hGraphExec->k[i];
        r = sim_launch(k->func, k->gridDimX, k->gridDimY, k->gridDimZ, k->blockDimX, k->blockDimY,
                       k->blockDimZ, hStream, 0);
    }
    return r;
}

CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    return cuGraphLaunch(hGraphExec, hStream);
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
