/*
 * graph.c: building CUDA graphs: every node kind a framework records
 * (kernel, memcpy, memset, host, event record and wait, empty, child graph,
 * memory alloc and free), clones and destruction; graph_query.c reads and
 * edits nodes and edges.
 * graph_exec.c instantiates and runs them.  A memory-alloc node allocates
 * its device memory when it is added (so its address is known, as the API
 * promises) and keeps it until the graph is destroyed or it is freed.
 */
#include <stdlib.h>
#include <string.h>

#include "graph.h"

CUresult sim_graph_ok(CUgraph g)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    return sim_handle_ok(g, SIM_K_GRAPH) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult sim_graph_node_ok(CUgraphNode n, int type)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_handle_ok(n, SIM_K_NODE) || (type >= 0 && n->w.type != (CUgraphNodeType)type))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* Add a node of work w, depending on deps[0..nd). */
static CUresult add(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t nd,
                    const struct sim_gwork *w)
{
    CUresult r = sim_graph_ok(g);
    if (r != CUDA_SUCCESS)
        return r;
    if (!out || (nd && !deps))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < nd; i++)
        if (!sim_handle_ok(deps[i], SIM_K_NODE) || deps[i]->graph != g)
            return CUDA_ERROR_INVALID_VALUE;
    struct CUgraphNode_st *n = calloc(1, sizeof *n);
    struct CUgraphNode_st **arr = realloc(g->nodes, (g->n + 1) * sizeof *arr);
    if (arr)
        g->nodes = arr;
    if (!n || !arr || (nd && !(n->deps = malloc(nd * sizeof *n->deps)))) {
        free(n);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (nd)
        memcpy(n->deps, deps, nd * sizeof *deps);
    n->ndeps = nd;
    n->obj.kind = SIM_K_NODE;
    n->graph = g;
    n->w = *w;
    g->nodes[g->n++] = n;
    sim_handle_add(n);
    *out = n;
    return CUDA_SUCCESS;
}

int sim_graph_kernel_ok(const CUDA_KERNEL_NODE_PARAMS_v2 *p)
{
    return (sim_handle_ok(p->func, SIM_K_FUNC) || sim_handle_ok(p->func, SIM_K_KERNEL) ||
            (!p->func && sim_handle_ok(p->kern, SIM_K_KERNEL))) &&
           p->gridDimX && p->gridDimY && p->gridDimZ && p->blockDimX && p->blockDimY &&
           p->blockDimZ && !(p->kernelParams && p->extra);
}

void sim_graph_kernel_norm(CUDA_KERNEL_NODE_PARAMS_v2 *p)
{
    if (!p->func && p->kern)
        p->func = (CUfunction)(void *)p->kern; /* a CUkernel launches as its function */
}

CUresult cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
                                 const CUgraphNode *dependencies, size_t numDependencies,
                                 const CUDA_KERNEL_NODE_PARAMS_v2 *nodeParams)
{
    if (!nodeParams || !sim_graph_kernel_ok(nodeParams))
        return sim_check_init() ? sim_check_init() : CUDA_ERROR_INVALID_VALUE;
    struct sim_gwork w = {.type = CU_GRAPH_NODE_TYPE_KERNEL};
    w.u.kernel = *nodeParams;
    sim_graph_kernel_norm(&w.u.kernel);
    return add(phGraphNode, hGraph, dependencies, numDependencies, &w);
}

void sim_graph_kernel_v2(const CUDA_KERNEL_NODE_PARAMS_v1 *a, CUDA_KERNEL_NODE_PARAMS_v2 *b)
{
    memset(b, 0, sizeof *b);
    memcpy(b, a, sizeof *a); /* v2 extends v1 */
}

CUresult cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                              const CUgraphNode *dependencies, size_t numDependencies,
                              const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
    if (!nodeParams)
        return sim_check_init() ? sim_check_init() : CUDA_ERROR_INVALID_VALUE;
    CUDA_KERNEL_NODE_PARAMS_v2 p;
    sim_graph_kernel_v2(nodeParams, &p);
    return cuGraphAddKernelNode_v2(phGraphNode, hGraph, dependencies, numDependencies, &p);
}

CUresult cuGraphAddMemcpyNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                              const CUgraphNode *dependencies, size_t numDependencies,
                              const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
    (void)ctx;
    if (!copyParams)
        return sim_check_init() ? sim_check_init() : CUDA_ERROR_INVALID_VALUE;
    struct sim_gwork w = {.type = CU_GRAPH_NODE_TYPE_MEMCPY};
    w.u.copy = *copyParams;
    return add(phGraphNode, hGraph, dependencies, numDependencies, &w);
}

CUresult cuGraphAddMemsetNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                              const CUgraphNode *dependencies, size_t numDependencies,
                              const CUDA_MEMSET_NODE_PARAMS *memsetParams, CUcontext ctx)
{
    (void)ctx;
    const CUDA_MEMSET_NODE_PARAMS *m = memsetParams;
    if (!m || (m->elementSize != 1 && m->elementSize != 2 && m->elementSize != 4) ||
        !sim_mem_range_ok(m->dst, 1))
        return sim_check_init() ? sim_check_init() : CUDA_ERROR_INVALID_VALUE;
    struct sim_gwork w = {.type = CU_GRAPH_NODE_TYPE_MEMSET};
    w.u.memset = *m;
    return add(phGraphNode, hGraph, dependencies, numDependencies, &w);
}

CUresult cuGraphAddHostNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                            const CUgraphNode *dependencies, size_t numDependencies,
                            const CUDA_HOST_NODE_PARAMS *nodeParams)
{
    if (!nodeParams || !nodeParams->fn)
        return sim_check_init() ? sim_check_init() : CUDA_ERROR_INVALID_VALUE;
    struct sim_gwork w = {.type = CU_GRAPH_NODE_TYPE_HOST};
    w.u.host = *nodeParams;
    return add(phGraphNode, hGraph, dependencies, numDependencies, &w);
}

CUresult cuGraphAddEmptyNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                             const CUgraphNode *dependencies, size_t numDependencies)
{
    struct sim_gwork w = {.type = CU_GRAPH_NODE_TYPE_EMPTY};
    return add(phGraphNode, hGraph, dependencies, numDependencies, &w);
}

static CUresult add_event(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t nd,
                          CUevent e, CUgraphNodeType type)
{
    if (!sim_handle_ok(e, SIM_K_EVENT))
        return sim_check_init() ? sim_check_init() : CUDA_ERROR_INVALID_VALUE;
    struct sim_gwork w = {.type = type};
    w.u.event = e;
    return add(out, g, deps, nd, &w);
}

CUresult cuGraphAddEventRecordNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                   const CUgraphNode *dependencies, size_t numDependencies,
                                   CUevent event)
{
    return add_event(phGraphNode, hGraph, dependencies, numDependencies, event,
                     CU_GRAPH_NODE_TYPE_EVENT_RECORD);
}

CUresult cuGraphAddEventWaitNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                 const CUgraphNode *dependencies, size_t numDependencies,
                                 CUevent event)
{
    return add_event(phGraphNode, hGraph, dependencies, numDependencies, event,
                     CU_GRAPH_NODE_TYPE_WAIT_EVENT);
}

CUresult cuGraphAddChildGraphNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                  const CUgraphNode *dependencies, size_t numDependencies,
                                  CUgraph childGraph)
{
    CUresult r = sim_graph_ok(childGraph);
    if (r != CUDA_SUCCESS)
        return r;
    if (childGraph == hGraph)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_gwork w = {.type = CU_GRAPH_NODE_TYPE_GRAPH};
    if ((r = sim_graph_clone(childGraph, &w.u.child)) != CUDA_SUCCESS)
        return r;
    r = add(phGraphNode, hGraph, dependencies, numDependencies, &w);
    if (r != CUDA_SUCCESS)
        sim_graph_free(w.u.child);
    return r;
}

CUresult cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                const CUgraphNode *dependencies, size_t numDependencies,
                                CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
    CUresult r = sim_graph_ok(hGraph);
    if (r != CUDA_SUCCESS)
        return r;
    if (!nodeParams || !nodeParams->bytesize ||
        nodeParams->poolProps.allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        nodeParams->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_gwork w = {.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC};
    w.u.alloc = *nodeParams;
    if ((r = sim_mem_alloc(&w.u.alloc.dptr, nodeParams->bytesize, SIM_R_GRAPH, 0)))
        return r;
    r = add(phGraphNode, hGraph, dependencies, numDependencies, &w);
    if (r != CUDA_SUCCESS) {
        sim_mem_free(w.u.alloc.dptr, 1 << SIM_R_GRAPH);
        return r;
    }
    nodeParams->dptr = w.u.alloc.dptr;
    return CUDA_SUCCESS;
}

CUresult cuGraphAddMemFreeNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                               const CUgraphNode *dependencies, size_t numDependencies,
                               CUdeviceptr dptr)
{
    struct sim_region reg;
    if (sim_region_find(dptr, &reg) || reg.base != dptr || reg.kind != SIM_R_GRAPH)
        return sim_check_init() ? sim_check_init() : CUDA_ERROR_INVALID_VALUE;
    struct sim_gwork w = {.type = CU_GRAPH_NODE_TYPE_MEM_FREE};
    w.u.free_ptr = dptr;
    return add(phGraphNode, hGraph, dependencies, numDependencies, &w);
}

/* ---- lifetime ---- */

static void node_free(struct CUgraphNode_st *n)
{
    sim_handle_del(n);
    if (n->w.type == CU_GRAPH_NODE_TYPE_GRAPH)
        sim_graph_free(n->w.u.child);
    else if (n->w.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC)
        sim_mem_free(n->w.u.alloc.dptr, 1 << SIM_R_GRAPH); /* unless freed already */
    free(n->deps);
    n->obj.kind = 0;
    free(n);
}

CUresult cuGraphDestroyNode(CUgraphNode hNode)
{
    CUresult r = sim_graph_node_ok(hNode, -1);
    if (r != CUDA_SUCCESS)
        return r;
    struct CUgraph_st *g = hNode->graph;
    size_t k = 0;
    for (size_t i = 0; i < g->n; i++) {
        struct CUgraphNode_st *n = g->nodes[i];
        if (n == hNode)
            continue;
        size_t m = 0; /* drop the edges that touch it */
        for (size_t j = 0; j < n->ndeps; j++)
            if (n->deps[j] != hNode)
                n->deps[m++] = n->deps[j];
        n->ndeps = m;
        g->nodes[k++] = n;
    }
    g->n = k;
    node_free(hNode);
    return CUDA_SUCCESS;
}

void sim_graph_free(struct CUgraph_st *g)
{
    sim_handle_del(g);
    sim_graph_drop_refs(g);
    for (size_t i = 0; i < g->n; i++)
        node_free(g->nodes[i]);
    free(g->nodes);
    g->obj.kind = 0;
    free(g);
}

CUresult sim_graph_clone(struct CUgraph_st *g, struct CUgraph_st **out)
{
    CUgraph c = NULL;
    CUresult r = cuGraphCreate(&c, 0);
    for (size_t i = 0; r == CUDA_SUCCESS && i < g->n; i++) {
        const struct CUgraphNode_st *n = g->nodes[i];
        struct sim_gwork w = n->w;
        if (w.type == CU_GRAPH_NODE_TYPE_GRAPH)
            r = sim_graph_clone(n->w.u.child, &w.u.child);
        else if (w.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC)
            w.type = CU_GRAPH_NODE_TYPE_EMPTY; /* the original owns the memory */
        CUgraphNode *deps = malloc((n->ndeps + 1) * sizeof *deps);
        if (r == CUDA_SUCCESS && !deps)
            r = CUDA_ERROR_OUT_OF_MEMORY;
        for (size_t j = 0; r == CUDA_SUCCESS && j < n->ndeps; j++) {
            size_t k = 0; /* the dependency's position: nodes come in the same order */
            while (g->nodes[k] != n->deps[j])
                k++;
            deps[j] = c->nodes[k];
        }
        CUgraphNode made;
        if (r == CUDA_SUCCESS)
            r = add(&made, c, deps, n->ndeps, &w);
        free(deps);
    }
    if (r != CUDA_SUCCESS) {
        if (c)
            sim_graph_free(c);
        return r;
    }
    for (size_t i = 0; i < g->n; i++) { /* kernel node attributes come along */
        c->nodes[i]->kattrs_set = g->nodes[i]->kattrs_set;
        memcpy(c->nodes[i]->kattrs, g->nodes[i]->kattrs, sizeof c->nodes[i]->kattrs);
    }
    c->origin = g;
    *out = c;
    return CUDA_SUCCESS;
}

CUresult cuGraphClone(CUgraph *phGraphClone, CUgraph originalGraph)
{
    CUresult r = sim_graph_ok(originalGraph);
    if (r != CUDA_SUCCESS || !phGraphClone)
        return r ? r : CUDA_ERROR_INVALID_VALUE;
    return sim_graph_clone(originalGraph, phGraphClone);
}

/* Stream capture's way in (capture_rules.c): callers have validated g, deps and w. */
CUresult sim_graph_add(CUgraph g, const struct sim_gwork *w, const CUgraphNode *deps,
                       size_t ndeps, CUgraphNode *out)
{
    return add(out, g, deps, ndeps, w);
}

int sim_graph_has_node(CUgraph g, CUgraphNode n)
{
    return sim_handle_ok(n, SIM_K_NODE) && n->graph == g;
}

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

CUresult cuGraphDestroy(CUgraph hGraph)
{
    CUresult r = sim_graph_ok(hGraph);
    if (r != CUDA_SUCCESS)
        return r;
    if (sim_capture_graph_busy(hGraph))
        return CUDA_ERROR_ILLEGAL_STATE; /* not while a capture builds it */
    sim_graph_free(hGraph);
    return CUDA_SUCCESS;
}
