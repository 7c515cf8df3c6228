/*
 * capture_deps.c: a capture's dependency sets: querying them
 * (cuStreamIsCapturing, cuStreamGetCaptureInfo*), joining streams through
 * events (cuStreamWaitEvent's rules) and editing them (cuStreamUpdateCaptureDependencies*).
 */
#include "capture.h"

static CUresult info(CUstream s, int ptsz, CUstreamCaptureStatus *st, cuuint64_t *id,
                     CUgraph *graph, const CUgraphNode **deps, const CUgraphEdgeData **edges,
                     size_t *ndeps)
{
    struct CUctx_st *ctx;
    struct CUstream_st *obj;
    CUresult r = sim_stream_resolve(s, &ctx, &obj);
    if (r != CUDA_SUCCESS)
        return r;
    if (!st || (edges && !deps))
        return CUDA_ERROR_INVALID_VALUE;
    *st = CU_STREAM_CAPTURE_STATUS_NONE;
    if (!sim_capture_any())
        return CUDA_SUCCESS;
    cap_lock();
    obj = cap_stream(s, ptsz, ctx, obj, 0);
    struct sim_capture *c = obj ? obj->cap : NULL;
    if (!obj && sim_stream_is_legacy(s, ptsz) && cap_blocking(ctx)) {
        r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT; /* does not invalidate */
    } else if (c) {
        *st = (CUstreamCaptureStatus)c->status;
        if (c->status == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
            if (id)
                *id = c->id;
            if (graph)
                *graph = c->graph;
            if (deps)
                *deps = obj->deps;
            if (edges)
                *edges = obj->edges;
            if (ndeps)
                *ndeps = obj->ndeps;
        }
    }
    cap_unlock();
    return r;
}

/*
 * The capture rules of cuStreamWaitEvent (stream_wait.c calls this after its
 * argument checks): 1 when they decided the call (*res), 0 when it is an
 * ordinary wait.  Waiting on a captured event forks the waiting stream into
 * the capture (or joins the dependency sets); a capturing stream may not
 * wait on uncaptured work; the legacy stream may not wait on a capture.
 */
int sim_capture_wait(CUstream s, int ptsz, CUevent e, unsigned int flags, struct CUctx_st *ctx,
                     struct CUstream_st *obj, CUresult *res)
{
    if (!e->captured && !sim_capture_any()) {
        if (!(flags & CU_EVENT_WAIT_EXTERNAL))
            return 0;
        *res = CUDA_ERROR_INVALID_VALUE; /* only valid during capture */
        return 1;
    }
    CUresult r = CUDA_SUCCESS;
    int took = 1;
    cap_lock();
    struct sim_capture *ec = e->captured ? cap_find(e->cap_id) : NULL;
    obj = cap_stream(s, ptsz, ctx, obj, ec != NULL); /* joining makes the per-thread one */
    struct sim_capture *sc = obj ? obj->cap : NULL;
    int legacy = sim_stream_is_legacy(s, ptsz);
    if (e->captured && !ec) {
        r = CUDA_ERROR_CAPTURED_EVENT; /* its capture has ended */
    } else if (ec) {
        if (legacy) {
            cap_invalidate(ec);
            r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
        } else if (!obj) {
            r = CUDA_ERROR_OUT_OF_MEMORY;
        } else if (ec->status != CU_STREAM_CAPTURE_STATUS_ACTIVE) {
            /* an idle stream cannot join an invalidated capture */
            r = sc ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_ERROR_INVALID_VALUE;
        } else if (!sc) {
            r = cap_join(ec, obj, e->cap_deps, e->ncap_deps) == 0 ? CUDA_SUCCESS
                                                                  : CUDA_ERROR_OUT_OF_MEMORY;
        } else if (sc == ec) {
            r = cap_set_deps(obj, e->cap_deps, e->ncap_deps, 1) == 0 ? CUDA_SUCCESS
                                                                     : CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            cap_invalidate(sc);
            cap_invalidate(ec);
            r = CUDA_ERROR_STREAM_CAPTURE_MERGE;
        }
    } else if (sc) {
        if (sc->status != CU_STREAM_CAPTURE_STATUS_ACTIVE) {
            r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        } else if (flags & CU_EVENT_WAIT_EXTERNAL) {
            r = CUDA_ERROR_NOT_SUPPORTED; /* external event nodes: not modelled */
        } else if (e->recorded) {
            cap_invalidate(sc);
            r = CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
        } /* never recorded: an empty set of work, nothing to wait for */
    } else if (flags & CU_EVENT_WAIT_EXTERNAL) {
        r = CUDA_ERROR_INVALID_VALUE; /* only valid during capture */
    } else if (legacy && cap_blocking(ctx)) {
        r = cap_legacy_locked(ctx);
    } else {
        took = 0;
    }
    cap_unlock();
    *res = r;
    return took;
}

static CUresult update_deps(CUstream s, int ptsz, CUgraphNode *deps,
                            const CUgraphEdgeData *edges, size_t n, unsigned int flags)
{
    struct CUctx_st *ctx;
    struct CUstream_st *obj;
    CUresult r = sim_stream_resolve(s, &ctx, &obj);
    if (r != CUDA_SUCCESS)
        return r;
    if ((n && !deps) || flags > CU_STREAM_SET_CAPTURE_DEPENDENCIES)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; edges && i < n; i++)
        if (edges[i].from_port || edges[i].to_port || edges[i].type)
            return CUDA_ERROR_NOT_SUPPORTED; /* edge annotations: not modelled */
    cap_lock();
    obj = cap_stream(s, ptsz, ctx, obj, 0);
    struct sim_capture *c = obj ? obj->cap : NULL;
    if (!c)
        r = CUDA_ERROR_ILLEGAL_STATE; /* not capturing */
    else if (c->status != CU_STREAM_CAPTURE_STATUS_ACTIVE)
        r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    for (size_t i = 0; r == CUDA_SUCCESS && i < n; i++)
        if (!sim_graph_has_node(c->graph, deps[i]))
            r = CUDA_ERROR_INVALID_VALUE;
    int add = flags == CU_STREAM_ADD_CAPTURE_DEPENDENCIES;
    if (r == CUDA_SUCCESS && cap_set_deps(obj, deps, n, add) != 0)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    cap_unlock();
    return r;
}

CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    return info(hStream, 0, captureStatus, NULL, NULL, NULL, NULL, NULL);
}

CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    return info(hStream, 1, captureStatus, NULL, NULL, NULL, NULL, NULL);
}

CUresult cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                cuuint64_t *id_out)
{
    return info(hStream, 0, captureStatus_out, id_out, NULL, NULL, NULL, NULL);
}

CUresult cuStreamGetCaptureInfo_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                     cuuint64_t *id_out)
{
    return info(hStream, 1, captureStatus_out, id_out, NULL, NULL, NULL, NULL);
}

CUresult cuStreamGetCaptureInfo_v2(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                   cuuint64_t *id_out, CUgraph *graph_out,
                                   const CUgraphNode **dependencies_out,
                                   size_t *numDependencies_out)
{
    return info(hStream, 0, captureStatus_out, id_out, graph_out, dependencies_out, NULL,
                numDependencies_out);
}

CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream hStream,
                                        CUstreamCaptureStatus *captureStatus_out,
                                        cuuint64_t *id_out, CUgraph *graph_out,
                                        const CUgraphNode **dependencies_out,
                                        size_t *numDependencies_out)
{
    return info(hStream, 1, captureStatus_out, id_out, graph_out, dependencies_out, NULL,
                numDependencies_out);
}

CUresult cuStreamGetCaptureInfo_v3(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                   cuuint64_t *id_out, CUgraph *graph_out,
                                   const CUgraphNode **dependencies_out,
                                   const CUgraphEdgeData **edgeData_out,
                                   size_t *numDependencies_out)
{
    return info(hStream, 0, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out,
                numDependencies_out);
}

CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream hStream,
                                        CUstreamCaptureStatus *captureStatus_out,
                                        cuuint64_t *id_out, CUgraph *graph_out,
                                        const CUgraphNode **dependencies_out,
                                        const CUgraphEdgeData **edgeData_out,
                                        size_t *numDependencies_out)
{
    return info(hStream, 1, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out,
                numDependencies_out);
}

CUresult cuStreamUpdateCaptureDependencies(CUstream hStream, CUgraphNode *dependencies,
                                           size_t numDependencies, unsigned int flags)
{
    return update_deps(hStream, 0, dependencies, NULL, numDependencies, flags);
}

CUresult cuStreamUpdateCaptureDependencies_ptsz(CUstream hStream, CUgraphNode *dependencies,
                                                size_t numDependencies, unsigned int flags)
{
    return update_deps(hStream, 1, dependencies, NULL, numDependencies, flags);
}

CUresult cuStreamUpdateCaptureDependencies_v2(CUstream hStream, CUgraphNode *dependencies,
                                              const CUgraphEdgeData *dependencyData,
                                              size_t numDependencies, unsigned int flags)
{
    return update_deps(hStream, 0, dependencies, dependencyData, numDependencies, flags);
}

CUresult cuStreamUpdateCaptureDependencies_v2_ptsz(CUstream hStream, CUgraphNode *dependencies,
                                                   const CUgraphEdgeData *dependencyData,
                                                   size_t numDependencies, unsigned int flags)
{
    return update_deps(hStream, 1, dependencies, dependencyData, numDependencies, flags);
}
