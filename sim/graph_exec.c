/*
 * graph_exec.c: executable graphs.  Instantiation orders a graph's nodes
 * by their dependencies (insertion order among ready nodes) and inlines
 * child graphs.  A launch runs the steps in that order on its stream: the
 * device runs one kernel at a time, so the graph takes the sum of its
 * kernels' times; copies and memsets move bytes at once (as async copies
 * do here), host nodes run once the work before them is done, event nodes
 * record and wait as the stream calls do.  cuGraphExecUpdate takes a graph
 * of the same shape; kernel, memcpy, memset and host parameters can be
 * changed in the executable graph directly.
 */
#include <stdlib.h>
#include <string.h>

#include "graph.h"

#define GRAPH_EXEC_UPDATE_FAILURE ((CUresult)910)

struct steps {
    struct sim_gstep *v;
    size_t n, cap;
};

static int push(struct steps *s, const struct sim_gwork *w, struct CUgraphNode_st *src,
                struct CUgraphNode_st *parent)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        struct sim_gstep *v = realloc(s->v, cap * sizeof *v);
        if (!v)
            return -1;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n].w = *w;
    s->v[s->n].disabled = 0;
    s->v[s->n].parent = parent;
    s->v[s->n++].src = src;
    return 0;
}

/* Kahn's order; a cycle is CUDA_ERROR_INVALID_VALUE.  parent: the
 * top-level child-graph node being inlined (NULL at the top). */
static CUresult flatten(struct CUgraph_st *g, struct CUgraphNode_st *parent, struct steps *s,
                        int depth)
{
    if (depth > 64)
        return CUDA_ERROR_INVALID_VALUE;
    size_t n = g->n;
    char *done = calloc(n + 1, 1);
    if (!done)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = CUDA_SUCCESS;
    for (size_t emitted = 0; r == CUDA_SUCCESS && emitted < n;) {
        size_t before = emitted;
        for (size_t i = 0; r == CUDA_SUCCESS && i < n; i++) {
            struct CUgraphNode_st *nd = g->nodes[i];
            int ready = !done[i];
            for (size_t j = 0; ready && j < nd->ndeps; j++) {
                size_t k = 0;
                while (k < n && g->nodes[k] != nd->deps[j])
                    k++;
                ready = k < n && done[k];
            }
            if (!ready)
                continue;
            done[i] = 1;
            emitted++;
            if (nd->w.type == CU_GRAPH_NODE_TYPE_GRAPH)
                r = flatten(nd->w.u.child, depth ? parent : nd, s, depth + 1);
            else if (push(s, &nd->w, depth ? NULL : nd, parent))
                r = CUDA_ERROR_OUT_OF_MEMORY;
        }
        if (r == CUDA_SUCCESS && emitted == before)
            r = CUDA_ERROR_INVALID_VALUE; /* a dependency cycle */
    }
    free(done);
    return r;
}

CUresult sim_graph_steps(struct CUgraph_st *g, struct sim_gstep **out, size_t *n)
{
    struct steps s = {0};
    CUresult r = flatten(g, NULL, &s, 0);
    if (r != CUDA_SUCCESS) {
        free(s.v);
        return r;
    }
    *out = s.v;
    *n = s.n;
    return CUDA_SUCCESS;
}

static CUresult instantiate(CUgraphExec *out, CUgraph g, cuuint64_t flags)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!out || !sim_handle_ok(g, SIM_K_GRAPH))
        return CUDA_ERROR_INVALID_VALUE;
    struct CUgraphExec_st *e = calloc(1, sizeof *e);
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if ((r = sim_graph_steps(g, &e->steps, &e->n)) != CUDA_SUCCESS) {
        free(e);
        return r;
    }
    e->flags = flags;
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
    return instantiate(phGraphExec, hGraph, flags);
}

CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                               char *logBuffer, size_t bufferSize)
{
    if (phErrorNode)
        *phErrorNode = NULL;
    if (logBuffer && bufferSize)
        logBuffer[0] = 0;
    return instantiate(phGraphExec, hGraph, 0);
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

/* One step on stream s (ptsz: launched through cuGraphLaunch_ptsz).  A launch
 * into a capturing stream is captured step by step (a flattened child graph):
 * kernels, event records and waits through their capture-aware paths, copies,
 * memsets and host functions as nodes of their own; memory alloc/free nodes
 * run nothing (the graph that owns them keeps the memory). */
static CUresult run_step(const struct sim_gwork *w, CUstream s, int ptsz)
{
    const CUDA_KERNEL_NODE_PARAMS_v2 *k = &w->u.kernel;
    const CUDA_MEMSET_NODE_PARAMS *m = &w->u.memset;
    CUresult r;
    switch (w->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
        return sim_launch(k->func, k->gridDimX, k->gridDimY, k->gridDimZ, k->blockDimX,
                          k->blockDimY, k->blockDimZ, s, ptsz);
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
        return ptsz ? cuEventRecord_ptsz(w->u.event, s) : cuEventRecord(w->u.event, s);
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
        return ptsz ? cuStreamWaitEvent_ptsz(s, w->u.event, 0)
                    : cuStreamWaitEvent(s, w->u.event, 0);
    case CU_GRAPH_NODE_TYPE_MEMCPY:
    case CU_GRAPH_NODE_TYPE_MEMSET:
    case CU_GRAPH_NODE_TYPE_HOST:
        if (sim_capture_step(s, ptsz, w, &r))
            return r;
        break;
    default: /* empty, memory alloc and free: nothing to run */
        return CUDA_SUCCESS;
    }
    switch (w->type) {
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        return sim_copy3d(&w->u.copy);
    case CU_GRAPH_NODE_TYPE_MEMSET:
        return sim_fill(m->dst, m->pitch, m->value, m->width, m->height ? m->height : 1,
                        m->elementSize);
    default: /* a host function, once the work before it is done */
        if ((r = ptsz ? cuStreamSynchronize_ptsz(s) : sim_stream_sync(s)) == CUDA_SUCCESS)
            w->u.host.fn(w->u.host.userData);
        return r;
    }
}

static CUresult graph_launch(CUgraphExec hGraphExec, CUstream hStream, int ptsz)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_handle_ok(hGraphExec, SIM_K_EXEC))
        return CUDA_ERROR_INVALID_VALUE;
    struct CUctx_st *ctx;
    struct CUstream_st *obj;
    if ((r = sim_stream_resolve(hStream, &ctx, &obj)) != CUDA_SUCCESS)
        return r;
    for (size_t i = 0; i < hGraphExec->n && r == CUDA_SUCCESS; i++)
        if (!hGraphExec->steps[i].disabled)
            r = run_step(&hGraphExec->steps[i].w, hStream, ptsz);
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

CUresult cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_handle_ok(hGraphExec, SIM_K_EXEC))
        return CUDA_ERROR_INVALID_VALUE;
    struct CUctx_st *ctx;
    struct CUstream_st *obj;
    return sim_stream_resolve(hStream, &ctx, &obj);
}

CUresult cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    return cuGraphUpload(hGraphExec, hStream);
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
    free(hGraphExec->steps);
    free(hGraphExec);
    return CUDA_SUCCESS;
}

/* ---- changing an executable graph ---- */

/* The step node n became in e (type -1: any), or NULL. */
struct sim_gstep *sim_graph_step_of(CUgraphExec e, CUgraphNode n, int type)
{
    if (!sim_handle_ok(e, SIM_K_EXEC) || !sim_handle_ok(n, SIM_K_NODE))
        return NULL;
    for (size_t i = 0; i < e->n; i++)
        if (e->steps[i].src == n)
            return type < 0 || e->steps[i].w.type == (CUgraphNodeType)type ? &e->steps[i]
                                                                              : NULL;
    return NULL;
}

#define step_of sim_graph_step_of

/* The step of type `type` node n became in e, once the driver is initialised and
 * params (the new parameters, NULL when unusable) given; else NULL, *r the error. */
static struct sim_gstep *set_step(CUgraphExec e, CUgraphNode n, int type, const void *params,
                                  CUresult *r)
{
    *r = sim_check_init();
    if (*r != CUDA_SUCCESS)
        return NULL;
    struct sim_gstep *st = step_of(e, n, type);
    if (!st || !params)
        *r = CUDA_ERROR_INVALID_VALUE;
    return *r == CUDA_SUCCESS ? st : NULL;
}

CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec hGraphExec, CUgraphNode hNode,
                                           const CUDA_KERNEL_NODE_PARAMS_v2 *nodeParams)
{
    CUresult r;
    struct sim_gstep *st = set_step(hGraphExec, hNode, CU_GRAPH_NODE_TYPE_KERNEL, nodeParams, &r);
    if (!st)
        return r;
    /* check the parameters as the graph would, on a scratch copy */
    CUDA_KERNEL_NODE_PARAMS_v2 keep = hNode->w.u.kernel;
    r = cuGraphKernelNodeSetParams_v2(hNode, nodeParams);
    if (r == CUDA_SUCCESS)
        st->w.u.kernel = hNode->w.u.kernel;
    hNode->w.u.kernel = keep; /* the graph itself keeps its parameters */
    return r;
}

CUresult cuGraphExecKernelNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                        const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
    if (!nodeParams)
        return sim_check_init() ? sim_check_init() : CUDA_ERROR_INVALID_VALUE;
    CUDA_KERNEL_NODE_PARAMS_v2 p;
    memset(&p, 0, sizeof p);
    memcpy(&p, nodeParams, sizeof *nodeParams);
    return cuGraphExecKernelNodeSetParams_v2(hGraphExec, hNode, &p);
}

CUresult cuGraphExecMemcpyNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                        const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
    (void)ctx;
    CUresult r;
    struct sim_gstep *st = set_step(hGraphExec, hNode, CU_GRAPH_NODE_TYPE_MEMCPY, copyParams, &r);
    if (st)
        st->w.u.copy = *copyParams;
    return r;
}

CUresult cuGraphExecMemsetNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                        const CUDA_MEMSET_NODE_PARAMS *memsetParams, CUcontext ctx)
{
    (void)ctx;
    CUresult r;
    struct sim_gstep *st = set_step(hGraphExec, hNode, CU_GRAPH_NODE_TYPE_MEMSET, memsetParams, &r);
    if (st)
        st->w.u.memset = *memsetParams;
    return r;
}

CUresult cuGraphExecHostNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                      const CUDA_HOST_NODE_PARAMS *nodeParams)
{
    CUresult r;
    const void *ok = nodeParams && nodeParams->fn ? nodeParams : NULL;
    struct sim_gstep *st = set_step(hGraphExec, hNode, CU_GRAPH_NODE_TYPE_HOST, ok, &r);
    if (st)
        st->w.u.host = *nodeParams;
    return r;
}

CUresult cuGraphExecUpdate_v2(CUgraphExec hGraphExec, CUgraph hGraph,
                              CUgraphExecUpdateResultInfo *resultInfo)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!resultInfo || !sim_handle_ok(hGraphExec, SIM_K_EXEC) ||
        !sim_handle_ok(hGraph, SIM_K_GRAPH))
        return CUDA_ERROR_INVALID_VALUE;
    memset(resultInfo, 0, sizeof *resultInfo);
    struct sim_gstep *steps;
    size_t n;
    if ((r = sim_graph_steps(hGraph, &steps, &n)) != CUDA_SUCCESS)
        return r;
    CUgraphExecUpdateResult res = CU_GRAPH_EXEC_UPDATE_SUCCESS;
    if (n != hGraphExec->n)
        res = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    for (size_t i = 0; res == CU_GRAPH_EXEC_UPDATE_SUCCESS && i < n; i++) {
        if (steps[i].w.type != hGraphExec->steps[i].w.type) {
            res = CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
            resultInfo->errorNode = steps[i].src;
        }
    }
    resultInfo->result = res;
    if (res != CU_GRAPH_EXEC_UPDATE_SUCCESS) {
        free(steps);
        return GRAPH_EXEC_UPDATE_FAILURE;
    }
    for (size_t i = 0; i < n; i++) /* the nodes it was made from still name the steps */
        hGraphExec->steps[i].w = steps[i].w;
    free(steps);
    return CUDA_SUCCESS;
}

CUresult cuGraphExecUpdate(CUgraphExec hGraphExec, CUgraph hGraph, CUgraphNode *hErrorNode_out,
                           CUgraphExecUpdateResult *updateResult_out)
{
    CUgraphExecUpdateResultInfo info = {0};
    if (!hErrorNode_out || !updateResult_out)
        return sim_check_init() ? sim_check_init() : CUDA_ERROR_INVALID_VALUE;
    CUresult r = cuGraphExecUpdate_v2(hGraphExec, hGraph, &info);
    *hErrorNode_out = info.errorNode;
    *updateResult_out = info.result;
    return r;
}
