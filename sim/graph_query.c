/*
 * graph_query.c: reading and changing a graph's nodes: kernel parameters,
 * the per-kind getters, node types, the node, root and edge lists, and
 * added dependencies.
 */
#include <stdlib.h>
#include <string.h>

#include "graph.h"

CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS_v2 *nodeParams)
{
    CUresult r = sim_graph_node_ok(hNode, CU_GRAPH_NODE_TYPE_KERNEL);
    if (r != CUDA_SUCCESS || !nodeParams)
        return r ? r : CUDA_ERROR_INVALID_VALUE;
    *nodeParams = hNode->w.u.kernel;
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

CUresult cuGraphKernelNodeSetParams_v2(CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS_v2 *nodeParams)
{
    CUresult r = sim_graph_node_ok(hNode, CU_GRAPH_NODE_TYPE_KERNEL);
    if (r != CUDA_SUCCESS)
        return r;
    if (!nodeParams || !sim_graph_kernel_ok(nodeParams))
        return CUDA_ERROR_INVALID_VALUE;
    hNode->w.u.kernel = *nodeParams;
    sim_graph_kernel_norm(&hNode->w.u.kernel);
    return CUDA_SUCCESS;
}

CUresult cuGraphKernelNodeSetParams(CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
    if (!nodeParams)
        return sim_check_init() ? sim_check_init() : CUDA_ERROR_INVALID_VALUE;
    CUDA_KERNEL_NODE_PARAMS_v2 p;
    sim_graph_kernel_v2(nodeParams, &p);
    return cuGraphKernelNodeSetParams_v2(hNode, &p);
}

#define GETTER(name, type, T, field)                                                       \
    CUresult name(CUgraphNode hNode, T *out)                                               \
    {                                                                                      \
        CUresult r = sim_graph_node_ok(hNode, type);                                                 \
        if (r != CUDA_SUCCESS || !out)                                                     \
            return r ? r : CUDA_ERROR_INVALID_VALUE;                                       \
        *out = hNode->w.u.field;                                                           \
        return CUDA_SUCCESS;                                                               \
    }

GETTER(cuGraphMemcpyNodeGetParams, CU_GRAPH_NODE_TYPE_MEMCPY, CUDA_MEMCPY3D, copy)
GETTER(cuGraphMemsetNodeGetParams, CU_GRAPH_NODE_TYPE_MEMSET, CUDA_MEMSET_NODE_PARAMS, memset)
GETTER(cuGraphHostNodeGetParams, CU_GRAPH_NODE_TYPE_HOST, CUDA_HOST_NODE_PARAMS, host)
GETTER(cuGraphEventRecordNodeGetEvent, CU_GRAPH_NODE_TYPE_EVENT_RECORD, CUevent, event)
GETTER(cuGraphEventWaitNodeGetEvent, CU_GRAPH_NODE_TYPE_WAIT_EVENT, CUevent, event)
GETTER(cuGraphChildGraphNodeGetGraph, CU_GRAPH_NODE_TYPE_GRAPH, CUgraph, child)
GETTER(cuGraphMemAllocNodeGetParams, CU_GRAPH_NODE_TYPE_MEM_ALLOC, CUDA_MEM_ALLOC_NODE_PARAMS,
       alloc)
GETTER(cuGraphMemFreeNodeGetParams, CU_GRAPH_NODE_TYPE_MEM_FREE, CUdeviceptr, free_ptr)

CUresult cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)
{
    CUresult r = sim_graph_node_ok(hNode, -1);
    if (r != CUDA_SUCCESS || !type)
        return r ? r : CUDA_ERROR_INVALID_VALUE;
    *type = hNode->w.type;
    return CUDA_SUCCESS;
}

/* Copy up to *n of the m items out, or say how many there are. */
static void list_out(CUgraphNode *dst, size_t *n, CUgraphNode const *src, size_t m)
{
    if (!dst) {
        *n = m;
        return;
    }
    for (size_t i = 0; i < *n; i++)
        dst[i] = i < m ? src[i] : NULL;
    if (*n > m)
        *n = m;
}

CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
    CUresult r = sim_graph_ok(hGraph);
    if (r != CUDA_SUCCESS || !numNodes)
        return r ? r : CUDA_ERROR_INVALID_VALUE;
    list_out(nodes, numNodes, hGraph->nodes, hGraph->n);
    return CUDA_SUCCESS;
}

CUresult cuGraphGetRootNodes(CUgraph hGraph, CUgraphNode *rootNodes, size_t *numRootNodes)
{
    CUresult r = sim_graph_ok(hGraph);
    if (r != CUDA_SUCCESS || !numRootNodes)
        return r ? r : CUDA_ERROR_INVALID_VALUE;
    CUgraphNode *roots = malloc((hGraph->n + 1) * sizeof *roots);
    if (!roots)
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t m = 0;
    for (size_t i = 0; i < hGraph->n; i++)
        if (!hGraph->nodes[i]->ndeps)
            roots[m++] = hGraph->nodes[i];
    list_out(rootNodes, numRootNodes, roots, m);
    free(roots);
    return CUDA_SUCCESS;
}

CUresult cuGraphGetEdges_v2(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to,
                            CUgraphEdgeData *edgeData, size_t *numEdges)
{
    CUresult r = sim_graph_ok(hGraph);
    if (r != CUDA_SUCCESS || !numEdges || (!from) != (!to))
        return r ? r : CUDA_ERROR_INVALID_VALUE;
    size_t m = 0;
    for (size_t i = 0; i < hGraph->n; i++)
        for (size_t j = 0; j < hGraph->nodes[i]->ndeps; j++, m++)
            if (from && m < *numEdges) {
                from[m] = hGraph->nodes[i]->deps[j];
                to[m] = hGraph->nodes[i];
                if (edgeData)
                    memset(&edgeData[m], 0, sizeof *edgeData);
            }
    if (from && *numEdges > m)
        for (size_t k = m; k < *numEdges; k++)
            from[k] = to[k] = NULL;
    if (!from || *numEdges > m)
        *numEdges = m;
    return CUDA_SUCCESS;
}

CUresult cuGraphGetEdges(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to, size_t *numEdges)
{
    return cuGraphGetEdges_v2(hGraph, from, to, NULL, numEdges);
}

static int default_edge(const CUgraphEdgeData *e)
{
    static const CUgraphEdgeData zero;
    return !e || !memcmp(e, &zero, sizeof zero);
}

CUresult cuGraphAddDependencies_v2(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
                                   const CUgraphEdgeData *edgeData, size_t numDependencies)
{
    CUresult r = sim_graph_ok(hGraph);
    if (r != CUDA_SUCCESS)
        return r;
    if (numDependencies && (!from || !to))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < numDependencies; i++) {
        if (!sim_handle_ok(from[i], SIM_K_NODE) || !sim_handle_ok(to[i], SIM_K_NODE) ||
            from[i]->graph != hGraph || to[i]->graph != hGraph || from[i] == to[i] ||
            !default_edge(edgeData ? &edgeData[i] : NULL))
            return CUDA_ERROR_INVALID_VALUE;
        struct CUgraphNode_st *t = to[i];
        struct CUgraphNode_st **d = realloc(t->deps, (t->ndeps + 1) * sizeof *d);
        if (!d)
            return CUDA_ERROR_OUT_OF_MEMORY;
        t->deps = d;
        d[t->ndeps++] = from[i];
    }
    return CUDA_SUCCESS;
}

CUresult cuGraphAddDependencies(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
                                size_t numDependencies)
{
    return cuGraphAddDependencies_v2(hGraph, from, to, NULL, numDependencies);
}
