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

/* Is every node of s's dependency set an ancestor of (or in) the origin's? */
static int ancestor_of_origin(struct sim_capture *c, CUgraphNode n, char *seen)
{
    CUgraphNode *stack = malloc((c->nnodes + c->origin->ndeps + 1) * sizeof *stack);
    if (!stack)
        return 1; /* cannot tell: do not fail a capture for it */
    size_t top = 0;
    int found = 0;
    memset(seen, 0, c->nnodes);
    for (size_t i = 0; i < c->origin->ndeps; i++)
        stack[top++] = c->origin->deps[i];
    while (top && !found) {
        CUgraphNode x = stack[--top];
        if (x == n) {
            found = 1;
            break;
        }
        for (size_t i = c->nnodes; i-- > 0;) {
            if (c->nodes[i].node != x)
                continue;
            if (!seen[i]) {
                seen[i] = 1;
                for (size_t k = 0; k < c->nodes[i].ndeps; k++)
                    stack[top++] = c->nodes[i].deps[k];
            }
            break;
        }
    }
    free(stack);
    return found;
}

static int unjoined(struct sim_capture *c)
{
    char *seen = malloc(c->nnodes + 1);
    if (!seen)
        return 0;
    int bad = 0;
    for (size_t i = 0; i < c->nstreams && !bad; i++) {
        struct CUstream_st *s = c->streams[i];
        for (size_t k = 0; s != c->origin && k < s->ndeps && !bad; k++)
            bad = !ancestor_of_origin(c, s->deps[k], seen);
    }
    free(seen);
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
