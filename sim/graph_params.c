/*
 * graph_params.c: the generic node API of CUDA 12.2+ (cuGraphAddNode,
 * cuGraphNodeSetParams, cuGraphExecNodeSetParams), mapped onto the
 * per-kind calls of graph.c, graph_edit.c and graph_exec.c.  External
 * semaphore, batch memory-op and conditional nodes are NOT_SUPPORTED.
 */
#include <stdlib.h>
#include <string.h>

#include "graph.h"

static int zero_edges(const CUgraphEdgeData *e, size_t n)
{
    static const CUgraphEdgeData zero;
    for (size_t i = 0; e && i < n; i++)
        if (memcmp(&e[i], &zero, sizeof zero))
            return 0;
    return 1;
}

/* The v1 memset parameters are a prefix of v2's (which adds a context). */
static const CUDA_MEMSET_NODE_PARAMS *memset_v1(const CUDA_MEMSET_NODE_PARAMS_v2 *p)
{
    return (const CUDA_MEMSET_NODE_PARAMS *)(const void *)p;
}

CUresult cuGraphAddNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
                           const CUgraphNode *dependencies, const CUgraphEdgeData *dependencyData,
                           size_t numDependencies, CUgraphNodeParams *nodeParams)
{
    if (!nodeParams || !zero_edges(dependencyData, numDependencies))
        return sim_check_init() ? sim_check_init() : CUDA_ERROR_INVALID_VALUE;
    const CUgraphNode *d = dependencies;
    size_t n = numDependencies;
    CUgraphNodeParams *p = nodeParams;
    CUresult r;
    switch (p->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
        return cuGraphAddKernelNode_v2(phGraphNode, hGraph, d, n, &p->kernel);
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        return cuGraphAddMemcpyNode(phGraphNode, hGraph, d, n, &p->memcpy.copyParams,
                                    p->memcpy.copyCtx);
    case CU_GRAPH_NODE_TYPE_MEMSET:
        return cuGraphAddMemsetNode(phGraphNode, hGraph, d, n, memset_v1(&p->memset),
                                    p->memset.ctx);
    case CU_GRAPH_NODE_TYPE_HOST:
        return cuGraphAddHostNode(phGraphNode, hGraph, d, n, &p->host);
    case CU_GRAPH_NODE_TYPE_GRAPH:
        r = cuGraphAddChildGraphNode(phGraphNode, hGraph, d, n, p->graph.graph);
        if (r == CUDA_SUCCESS && p->graph.ownership == CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE)
            cuGraphDestroy(p->graph.graph); /* the node holds its own copy */
        return r;
    case CU_GRAPH_NODE_TYPE_EMPTY:
        return cuGraphAddEmptyNode(phGraphNode, hGraph, d, n);
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
        return cuGraphAddEventWaitNode(phGraphNode, hGraph, d, n, p->eventWait.event);
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
        return cuGraphAddEventRecordNode(phGraphNode, hGraph, d, n, p->eventRecord.event);
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
        return cuGraphAddMemAllocNode(phGraphNode, hGraph, d, n, &p->alloc);
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
        return cuGraphAddMemFreeNode(phGraphNode, hGraph, d, n, p->free.dptr);
    default:
        return sim_check_init() ? sim_check_init() : CUDA_ERROR_NOT_SUPPORTED;
    }
}

CUresult cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                        size_t numDependencies, CUgraphNodeParams *nodeParams)
{
    return cuGraphAddNode_v2(phGraphNode, hGraph, dependencies, NULL, numDependencies,
                             nodeParams);
}

CUresult cuGraphNodeSetParams(CUgraphNode hNode, CUgraphNodeParams *nodeParams)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!nodeParams || !sim_handle_ok(hNode, SIM_K_NODE) || hNode->w.type != nodeParams->type)
        return CUDA_ERROR_INVALID_VALUE;
    CUgraphNodeParams *p = nodeParams;
    switch (p->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
        return cuGraphKernelNodeSetParams_v2(hNode, &p->kernel);
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        return cuGraphMemcpyNodeSetParams(hNode, &p->memcpy.copyParams);
    case CU_GRAPH_NODE_TYPE_MEMSET:
        return cuGraphMemsetNodeSetParams(hNode, memset_v1(&p->memset));
    case CU_GRAPH_NODE_TYPE_HOST:
        return cuGraphHostNodeSetParams(hNode, &p->host);
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
        return cuGraphEventWaitNodeSetEvent(hNode, p->eventWait.event);
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
        return cuGraphEventRecordNodeSetEvent(hNode, p->eventRecord.event);
    case CU_GRAPH_NODE_TYPE_EMPTY:
        return CUDA_SUCCESS;
    default: /* child graphs, memory nodes: fixed once added */
        return CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult cuGraphExecChildGraphNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                            CUgraph childGraph)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_handle_ok(hGraphExec, SIM_K_EXEC) || !sim_handle_ok(hNode, SIM_K_NODE) ||
        hNode->w.type != CU_GRAPH_NODE_TYPE_GRAPH || !sim_handle_ok(childGraph, SIM_K_GRAPH))
        return CUDA_ERROR_INVALID_VALUE;
    /* The child's steps are inlined, marked with the node; the new child
     * must have the same shape, and its work replaces theirs in order. */
    struct sim_gstep *neu;
    size_t nneu, nold = 0, at = 0;
    if ((r = sim_graph_steps(childGraph, &neu, &nneu)) != CUDA_SUCCESS)
        return r;
    for (size_t i = hGraphExec->n; i-- > 0;)
        if (hGraphExec->steps[i].parent == hNode) {
            nold++;
            at = i;
        }
    r = nold && nold == nneu ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    for (size_t k = 0; r == CUDA_SUCCESS && k < nneu; k++)
        if (hGraphExec->steps[at + k].parent != hNode ||
            hGraphExec->steps[at + k].w.type != neu[k].w.type)
            r = CUDA_ERROR_INVALID_VALUE;
    for (size_t k = 0; r == CUDA_SUCCESS && k < nneu; k++)
        hGraphExec->steps[at + k].w = neu[k].w;
    free(neu);
    return r;
}

CUresult cuGraphExecNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                  CUgraphNodeParams *nodeParams)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    CUgraphNodeParams *p = nodeParams;
    switch (p->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
        return cuGraphExecKernelNodeSetParams_v2(hGraphExec, hNode, &p->kernel);
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        return cuGraphExecMemcpyNodeSetParams(hGraphExec, hNode, &p->memcpy.copyParams,
                                              p->memcpy.copyCtx);
    case CU_GRAPH_NODE_TYPE_MEMSET:
        return cuGraphExecMemsetNodeSetParams(hGraphExec, hNode, memset_v1(&p->memset),
                                              p->memset.ctx);
    case CU_GRAPH_NODE_TYPE_HOST:
        return cuGraphExecHostNodeSetParams(hGraphExec, hNode, &p->host);
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
        return cuGraphExecEventWaitNodeSetEvent(hGraphExec, hNode, p->eventWait.event);
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
        return cuGraphExecEventRecordNodeSetEvent(hGraphExec, hNode, p->eventRecord.event);
    case CU_GRAPH_NODE_TYPE_GRAPH:
        return cuGraphExecChildGraphNodeSetParams(hGraphExec, hNode, p->graph.graph);
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}
