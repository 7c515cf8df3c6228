/*
 * capture_api.c: beginning and ending capture sequences, and the thread's
 * capture mode (see capture.c for the model).
 */
#include <stdlib.h>
#include <string.h>

#include "capture.h"

static CUresult begin(CUstream s, int ptsz, CUgraph into, const CUgraphNode *deps,
                      const CUgraphEdgeData *edges, size_t ndeps, int mode)
{
    struct CUctx_st *ctx;
    struct CUstream_st *obj;
    CUresult r = sim_stream_resolve(s, &ctx, &obj);
    if (r != CUDA_SUCCESS)
        return r;
    if (mode < CU_STREAM_CAPTURE_MODE_GLOBAL || mode > CU_STREAM_CAPTURE_MODE_RELAXED ||
        (ndeps && !deps))
        return CUDA_ERROR_INVALID_VALUE;
    if (sim_stream_is_legacy(s, ptsz))
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (into) {
        if (!sim_handle_ok(into, SIM_K_GRAPH))
            return CUDA_ERROR_INVALID_VALUE;
        for (size_t i = 0; i < ndeps; i++)
            if (!sim_graph_has_node(into, deps[i]))
                return CUDA_ERROR_INVALID_VALUE;
        for (size_t i = 0; edges && i < ndeps; i++)
            if (edges[i].from_port || edges[i].to_port || edges[i].type)
                return CUDA_ERROR_NOT_SUPPORTED; /* edge annotations: not modelled */
    }
    struct sim_capture *c = calloc(1, sizeof *c);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    c->own_graph = into == NULL;
    if (!into && cuGraphCreate(&into, 0) != CUDA_SUCCESS) {
        free(c);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    cap_lock();
    obj = cap_stream(s, ptsz, ctx, obj, 1);
    if (!obj || obj->cap) {
        cap_unlock();
        if (c->own_graph)
            cuGraphDestroy(into);
        free(c);
        return obj ? CUDA_ERROR_ILLEGAL_STATE /* already capturing */ : CUDA_ERROR_OUT_OF_MEMORY;
    }
    c->id = ++g_sim.cap_next_id;
    c->mode = mode;
    c->status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    c->thread = pthread_self();
    c->ctx = ctx;
    c->origin = obj;
    c->graph = into;
    if (cap_join(c, obj, deps, ndeps) != 0) {
        cap_unlock();
        if (c->own_graph)
            cuGraphDestroy(into);
        free(c->streams);
        free(c);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    c->next = g_sim.captures;
    g_sim.captures = c;
    __atomic_add_fetch(&g_sim.cap_active, 1, __ATOMIC_RELAXED);
    cap_unlock();
    return CUDA_SUCCESS;
}

struct node_ix {
    CUgraphNode node;
    size_t i;
};

static int cmp_ix(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const struct node_ix *)a)->node;
    uintptr_t y = (uintptr_t)((const struct node_ix *)b)->node;
    return x < y ? -1 : x > y;
}

/* The capture's index of node n, or -1 (a node the graph had before the capture). */
static long find_ix(const struct node_ix *ix, size_t n, CUgraphNode node)
{
    struct node_ix key = {node, 0};
    const struct node_ix *hit = bsearch(&key, ix, n, sizeof *ix, cmp_ix);
    return hit ? (long)hit->i : -1;
}

/*
 * Joined: every node in a joined stream's dependency set is the origin's
 * dependency or one of their ancestors.  One search from the origin's set
 * marks the ancestors among the captured nodes; nodes the graph had before
 * the capture (cuStreamBeginCaptureToGraph) count as joined.
 */
static int unjoined(struct sim_capture *c)
{
    size_t n = c->nnodes, edges = c->origin->ndeps + 1;
    for (size_t i = 0; i < n; i++)
        edges += c->nodes[i].ndeps; /* each node is expanded once: edges bound the stack */
    struct node_ix *ix = malloc((n + 1) * sizeof *ix);
    char *seen = calloc(n + 1, 1);
    CUgraphNode *stack = malloc(edges * sizeof *stack);
    int bad = 0;
    if (!ix || !seen || !stack)
        goto out; /* cannot tell: do not fail a capture for it */
    for (size_t i = 0; i < n; i++)
        ix[i] = (struct node_ix){c->nodes[i].node, i};
    qsort(ix, n, sizeof *ix, cmp_ix);
    size_t top = 0;
    for (size_t i = 0; i < c->origin->ndeps; i++)
        stack[top++] = c->origin->deps[i];
    while (top) {
        long k = find_ix(ix, n, stack[--top]);
        if (k < 0 || seen[k])
            continue;
        seen[k] = 1;
        for (size_t d = 0; d < c->nodes[k].ndeps; d++)
            stack[top++] = c->nodes[k].deps[d];
    }
    for (size_t i = 0; i < c->nstreams && !bad; i++) {
        struct CUstream_st *s = c->streams[i];
        for (size_t d = 0; s != c->origin && d < s->ndeps && !bad; d++) {
            long k = find_ix(ix, n, s->deps[d]);
            bad = k >= 0 && !seen[k];
        }
    }
out:
    free(ix);
    free(seen);
    free(stack);
    return bad;
}

static CUresult end(CUstream s, int ptsz, CUgraph *phGraph)
{
    struct CUctx_st *ctx;
    struct CUstream_st *obj;
    CUresult r = sim_stream_resolve(s, &ctx, &obj);
    if (r != CUDA_SUCCESS)
        return r;
    if (!phGraph)
        return CUDA_ERROR_INVALID_VALUE;
    cap_lock();
    obj = cap_stream(s, ptsz, ctx, obj, 0);
    struct sim_capture *c = obj ? obj->cap : NULL;
    if (!c) {
        cap_unlock();
        return CUDA_ERROR_ILLEGAL_STATE; /* not capturing */
    }
    if (c->origin != obj) {
        cap_invalidate(c);
        cap_unlock();
        return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
    }
    if (c->mode != CU_STREAM_CAPTURE_MODE_RELAXED && !pthread_equal(c->thread, pthread_self())) {
        cap_unlock();
        return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    }
    if (c->status != CU_STREAM_CAPTURE_STATUS_ACTIVE)
        r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    else if (unjoined(c))
        r = CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
    CUgraph g = c->graph;
    cap_unlink(c);
    cap_unlock();
    if (r != CUDA_SUCCESS && c->own_graph)
        cuGraphDestroy(g);
    *phGraph = r == CUDA_SUCCESS ? g : NULL;
    free(c);
    return r;
}

CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
    return begin(hStream, 0, NULL, NULL, NULL, 0, (int)mode);
}

CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
    return begin(hStream, 1, NULL, NULL, NULL, 0, (int)mode);
}

CUresult cuStreamBeginCapture(CUstream hStream)
{
    return begin(hStream, 0, NULL, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_GLOBAL);
}

CUresult cuStreamBeginCapture_ptsz(CUstream hStream)
{
    return begin(hStream, 1, NULL, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_GLOBAL);
}

CUresult cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph,
                                     const CUgraphNode *dependencies,
                                     const CUgraphEdgeData *dependencyData,
                                     size_t numDependencies, CUstreamCaptureMode mode)
{
    if (!hGraph)
        return sim_check_init() ? sim_check_init() : CUDA_ERROR_INVALID_VALUE;
    return begin(hStream, 0, hGraph, dependencies, dependencyData, numDependencies, (int)mode);
}

CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph,
                                          const CUgraphNode *dependencies,
                                          const CUgraphEdgeData *dependencyData,
                                          size_t numDependencies, CUstreamCaptureMode mode)
{
    if (!hGraph)
        return sim_check_init() ? sim_check_init() : CUDA_ERROR_INVALID_VALUE;
    return begin(hStream, 1, hGraph, dependencies, dependencyData, numDependencies, (int)mode);
}

CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    return end(hStream, 0, phGraph);
}

CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
    return end(hStream, 1, phGraph);
}

CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!mode || (int)*mode < CU_STREAM_CAPTURE_MODE_GLOBAL ||
        (int)*mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    int old = g_sim_thread.capture_mode;
    g_sim_thread.capture_mode = (int)*mode;
    *mode = (CUstreamCaptureMode)old;
    return CUDA_SUCCESS;
}
