/*
 * graph_edit.c: editing graphs and executable graphs after they are
 * built: edges (queries and removal), node parameters, events, enabling
 * and disabling nodes of an executable graph, its flags, and a DOT dump.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"

/* Copy up to *n of the m nodes out (edge data: default), or say how many. */
static void nodes_out(CUgraphNode *dst, CUgraphEdgeData *ed, size_t *n, CUgraphNode *src,
                      size_t m)
{
    if (!dst) {
        *n = m;
        return;
    }
    for (size_t i = 0; i < *n; i++) {
        dst[i] = i < m ? src[i] : NULL;
        if (ed)
            memset(&ed[i], 0, sizeof ed[i]);
    }
    if (*n > m)
        *n = m;
}

CUresult cuGraphNodeGetDependencies_v2(CUgraphNode hNode, CUgraphNode *dependencies,
                                       CUgraphEdgeData *edgeData, size_t *numDependencies)
{
    CUresult r = sim_graph_node_ok(hNode, -1);
    if (r != CUDA_SUCCESS || !numDependencies)
        return r ? r : CUDA_ERROR_INVALID_VALUE;
    nodes_out(dependencies, edgeData, numDependencies, hNode->deps, hNode->ndeps);
    return CUDA_SUCCESS;
}

CUresult cuGraphNodeGetDependencies(CUgraphNode hNode, CUgraphNode *dependencies,
                                    size_t *numDependencies)
{
    return cuGraphNodeGetDependencies_v2(hNode, dependencies, NULL, numDependencies);
}

CUresult cuGraphNodeGetDependentNodes_v2(CUgraphNode hNode, CUgraphNode *dependentNodes,
                                         CUgraphEdgeData *edgeData, size_t *numDependentNodes)
{
    CUresult r = sim_graph_node_ok(hNode, -1);
    if (r != CUDA_SUCCESS || !numDependentNodes)
        return r ? r : CUDA_ERROR_INVALID_VALUE;
    struct CUgraph_st *g = hNode->graph;
    CUgraphNode *v = malloc((g->n + 1) * sizeof *v);
    if (!v)
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t m = 0;
    for (size_t i = 0; i < g->n; i++)
        for (size_t j = 0; j < g->nodes[i]->ndeps; j++)
            if (g->nodes[i]->deps[j] == hNode) {
                v[m++] = g->nodes[i];
                break;
            }
    nodes_out(dependentNodes, edgeData, numDependentNodes, v, m);
    free(v);
    return CUDA_SUCCESS;
}

CUresult cuGraphNodeGetDependentNodes(CUgraphNode hNode, CUgraphNode *dependentNodes,
                                      size_t *numDependentNodes)
{
    return cuGraphNodeGetDependentNodes_v2(hNode, dependentNodes, NULL, numDependentNodes);
}

CUresult cuGraphRemoveDependencies_v2(CUgraph hGraph, const CUgraphNode *from,
                                      const CUgraphNode *to, const CUgraphEdgeData *edgeData,
                                      size_t numDependencies)
{
    (void)edgeData;
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_handle_ok(hGraph, SIM_K_GRAPH) || (numDependencies && (!from || !to)))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < numDependencies; i++) {
        if (!sim_handle_ok(to[i], SIM_K_NODE) || to[i]->graph != hGraph)
            return CUDA_ERROR_INVALID_VALUE;
        struct CUgraphNode_st *t = to[i];
        size_t k = 0;
        while (k < t->ndeps && t->deps[k] != from[i])
            k++;
        if (k == t->ndeps)
            return CUDA_ERROR_INVALID_VALUE; /* no such edge */
        memmove(&t->deps[k], &t->deps[k + 1], (t->ndeps - k - 1) * sizeof *t->deps);
        t->ndeps--;
    }
    return CUDA_SUCCESS;
}

CUresult cuGraphRemoveDependencies(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
                                   size_t numDependencies)
{
    return cuGraphRemoveDependencies_v2(hGraph, from, to, NULL, numDependencies);
}

CUresult cuGraphMemcpyNodeSetParams(CUgraphNode hNode, const CUDA_MEMCPY3D *nodeParams)
{
    CUresult r = sim_graph_node_ok(hNode, CU_GRAPH_NODE_TYPE_MEMCPY);
    if (r != CUDA_SUCCESS || !nodeParams)
        return r ? r : CUDA_ERROR_INVALID_VALUE;
    hNode->w.u.copy = *nodeParams;
    return CUDA_SUCCESS;
}

CUresult cuGraphMemsetNodeSetParams(CUgraphNode hNode, const CUDA_MEMSET_NODE_PARAMS *nodeParams)
{
    CUresult r = sim_graph_node_ok(hNode, CU_GRAPH_NODE_TYPE_MEMSET);
    if (r != CUDA_SUCCESS || !nodeParams)
        return r ? r : CUDA_ERROR_INVALID_VALUE;
    unsigned int e = nodeParams->elementSize;
    if ((e != 1 && e != 2 && e != 4) || !sim_mem_range_ok(nodeParams->dst, 1))
        return CUDA_ERROR_INVALID_VALUE;
    hNode->w.u.memset = *nodeParams;
    return CUDA_SUCCESS;
}

CUresult cuGraphHostNodeSetParams(CUgraphNode hNode, const CUDA_HOST_NODE_PARAMS *nodeParams)
{
    CUresult r = sim_graph_node_ok(hNode, CU_GRAPH_NODE_TYPE_HOST);
    if (r != CUDA_SUCCESS || !nodeParams || !nodeParams->fn)
        return r ? r : CUDA_ERROR_INVALID_VALUE;
    hNode->w.u.host = *nodeParams;
    return CUDA_SUCCESS;
}

static CUresult set_event(CUgraphNode n, CUevent e, int type)
{
    CUresult r = sim_graph_node_ok(n, type);
    if (r != CUDA_SUCCESS || !sim_handle_ok(e, SIM_K_EVENT))
        return r ? r : CUDA_ERROR_INVALID_VALUE;
    n->w.u.event = e;
    return CUDA_SUCCESS;
}

CUresult cuGraphEventRecordNodeSetEvent(CUgraphNode hNode, CUevent event)
{
    return set_event(hNode, event, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
}

CUresult cuGraphEventWaitNodeSetEvent(CUgraphNode hNode, CUevent event)
{
    return set_event(hNode, event, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
}

static CUresult exec_set_event(CUgraphExec e, CUgraphNode n, CUevent ev, int type)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_gstep *st = sim_graph_step_of(e, n, type);
    if (!st || !sim_handle_ok(ev, SIM_K_EVENT))
        return CUDA_ERROR_INVALID_VALUE;
    st->w.u.event = ev;
    return CUDA_SUCCESS;
}

CUresult cuGraphExecEventRecordNodeSetEvent(CUgraphExec hGraphExec, CUgraphNode hNode,
                                            CUevent event)
{
    return exec_set_event(hGraphExec, hNode, event, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
}

CUresult cuGraphExecEventWaitNodeSetEvent(CUgraphExec hGraphExec, CUgraphNode hNode,
                                          CUevent event)
{
    return exec_set_event(hGraphExec, hNode, event, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
}

CUresult cuGraphNodeSetEnabled(CUgraphExec hGraphExec, CUgraphNode hNode, unsigned int isEnabled)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_gstep *st = sim_graph_step_of(hGraphExec, hNode, -1);
    if (!st)
        return CUDA_ERROR_INVALID_VALUE;
    CUgraphNodeType t = st->w.type; /* the kinds the driver lets one disable */
    if (t != CU_GRAPH_NODE_TYPE_KERNEL && t != CU_GRAPH_NODE_TYPE_MEMCPY &&
        t != CU_GRAPH_NODE_TYPE_MEMSET)
        return CUDA_ERROR_INVALID_VALUE;
    st->disabled = !isEnabled;
    return CUDA_SUCCESS;
}

CUresult cuGraphNodeGetEnabled(CUgraphExec hGraphExec, CUgraphNode hNode, unsigned int *isEnabled)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_gstep *st = sim_graph_step_of(hGraphExec, hNode, -1);
    if (!st || !isEnabled)
        return CUDA_ERROR_INVALID_VALUE;
    *isEnabled = !st->disabled;
    return CUDA_SUCCESS;
}

CUresult cuGraphExecGetFlags(CUgraphExec hGraphExec, cuuint64_t *flags)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!flags || !sim_handle_ok(hGraphExec, SIM_K_EXEC))
        return CUDA_ERROR_INVALID_VALUE;
    *flags = hGraphExec->flags;
    return CUDA_SUCCESS;
}

static const char *kind_name(CUgraphNodeType t)
{
    static const char *n[] = {"kernel", "memcpy", "memset", "host", "graph", "empty",
                              "wait_event", "event_record", "ext_signal", "ext_wait",
                              "mem_alloc", "mem_free"};
    return (unsigned)t < sizeof n / sizeof n[0] ? n[t] : "node";
}

CUresult cuGraphDebugDotPrint(CUgraph hGraph, const char *path, unsigned int flags)
{
    (void)flags;
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!path || !sim_handle_ok(hGraph, SIM_K_GRAPH))
        return CUDA_ERROR_INVALID_VALUE;
    FILE *f = fopen(path, "w");
    if (!f)
        return CUDA_ERROR_OPERATING_SYSTEM;
    fprintf(f, "digraph tgs_sim_graph {\n");
    for (size_t i = 0; i < hGraph->n; i++) {
        const struct CUgraphNode_st *n = hGraph->nodes[i];
        fprintf(f, "  n%zu [label=\"%s", i, kind_name(n->w.type));
        if (n->w.type == CU_GRAPH_NODE_TYPE_KERNEL) {
            struct CUfunc_st *fn;
            if (sim_func_resolve(n->w.u.kernel.func, &fn) == CUDA_SUCCESS)
                fprintf(f, " %s", fn->name);
        }
        fprintf(f, "\"];\n");
        for (size_t j = 0; j < n->ndeps; j++)
            for (size_t k = 0; k < hGraph->n; k++)
                if (hGraph->nodes[k] == n->deps[j])
                    fprintf(f, "  n%zu -> n%zu;\n", k, i);
    }
    fprintf(f, "}\n");
    return fclose(f) == 0 ? CUDA_SUCCESS : CUDA_ERROR_OPERATING_SYSTEM;
}
