/*
 * capture_rules.c: what other calls may do while streams capture (see
 * capture.c): work into a capturing stream becomes a node, and illegal calls
 * get the real driver's error and invalidate the captures they touch.
 */
#include <stdlib.h>
#include <string.h>

#include "capture.h"

int sim_capture_take(CUstream s, int ptsz, struct CUctx_st *ctx, struct CUstream_st *obj,
                     const struct sim_gwork *w, CUresult *res)
{
    if (!sim_capture_any())
        return 0;
    int took = 1;
    cap_lock();
    obj = cap_stream(s, ptsz, ctx, obj, 0);
    struct sim_capture *c = obj ? obj->cap : NULL;
    if (c && c->status != CU_STREAM_CAPTURE_STATUS_ACTIVE) {
        *res = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else if (c) {
        CUgraphNode node = NULL;
        CUgraphNode *deps = obj->ndeps ? malloc(obj->ndeps * sizeof *deps) : NULL;
        *res = CUDA_ERROR_OUT_OF_MEMORY;
        if ((deps || !obj->ndeps) &&
            cap_grow((void **)&c->nodes, &c->nodes_cap, c->nnodes + 1, sizeof *c->nodes) == 0 &&
            sim_graph_add(c->graph, w, obj->deps, obj->ndeps, &node) == CUDA_SUCCESS) {
            if (obj->ndeps)
                memcpy(deps, obj->deps, obj->ndeps * sizeof *deps);
            c->nodes[c->nnodes++] = (struct cap_node){node, deps, obj->ndeps};
            deps = NULL;
            *res = cap_set_deps(obj, &node, 1, 0) == 0 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
        }
        free(deps);
        if (*res != CUDA_SUCCESS)
            cap_invalidate(c);
    } else if (sim_stream_is_legacy(s, ptsz) && cap_blocking(ctx)) {
        *res = cap_legacy_locked(ctx);
    } else {
        took = 0;
    }
    cap_unlock();
    return took;
}

int sim_capture_record(CUevent e, CUstream s, int ptsz, struct CUctx_st *ctx,
                       struct CUstream_st *obj, CUresult *res)
{
    if (!e->captured && !sim_capture_any())
        return 0;
    int took = 1;
    cap_lock();
    obj = cap_stream(s, ptsz, ctx, obj, 0);
    struct sim_capture *c = obj ? obj->cap : NULL;
    if (c && c->status != CU_STREAM_CAPTURE_STATUS_ACTIVE) {
        *res = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else if (c) {
        CUgraphNode *d = obj->ndeps ? malloc(obj->ndeps * sizeof *d) : NULL;
        if (obj->ndeps && !d) {
            *res = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            if (obj->ndeps)
                memcpy(d, obj->deps, obj->ndeps * sizeof *d);
            free(e->cap_deps);
            e->cap_deps = d;
            e->ncap_deps = obj->ndeps;
            e->cap_id = c->id;
            e->captured = 1;
            e->ctx = ctx;
            *res = CUDA_SUCCESS;
        }
    } else if (sim_stream_is_legacy(s, ptsz) && cap_blocking(ctx)) {
        *res = cap_legacy_locked(ctx);
    } else {
        e->captured = 0; /* recorded for real again: an ordinary event */
        took = 0;
    }
    cap_unlock();
    return took;
}

CUresult sim_capture_check_sync(CUstream s, int ptsz, struct CUctx_st *ctx,
                                struct CUstream_st *obj)
{
    if (!sim_capture_any())
        return CUDA_SUCCESS;
    CUresult r = CUDA_SUCCESS;
    cap_lock();
    obj = cap_stream(s, ptsz, ctx, obj, 0);
    if (obj && obj->cap) {
        cap_invalidate(obj->cap);
        r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    } else if (sim_stream_is_legacy(s, ptsz)) {
        r = cap_legacy_locked(ctx);
    }
    cap_unlock();
    return r;
}

CUresult sim_capture_check_event(CUevent e)
{
    if (!e->captured)
        return CUDA_SUCCESS;
    cap_lock();
    cap_invalidate(cap_find(e->cap_id));
    cap_unlock();
    return CUDA_ERROR_CAPTURED_EVENT;
}

CUresult sim_capture_check_ctx(struct CUctx_st *ctx)
{
    if (!sim_capture_any())
        return CUDA_SUCCESS;
    int hit = 0;
    cap_lock();
    for (struct sim_capture *c = g_sim.captures; c; c = c->next)
        if (c->ctx == ctx) {
            cap_invalidate(c);
            hit = 1;
        }
    cap_unlock();
    return hit ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

CUresult sim_capture_check_legacy(struct CUctx_st *ctx)
{
    if (!sim_capture_any())
        return CUDA_SUCCESS;
    cap_lock();
    CUresult r = cap_legacy_locked(ctx);
    cap_unlock();
    return r;
}

/*
 * cuThreadExchangeStreamCaptureMode's rule: a thread whose mode is not
 * RELAXED may not make potentially unsafe calls while it has a capture
 * sequence of its own not begun as RELAXED; in GLOBAL mode, nor while
 * another thread has a GLOBAL sequence.  Those sequences are invalidated.
 */
CUresult sim_capture_check_unsafe(void)
{
    if (!sim_capture_any())
        return CUDA_SUCCESS;
    int mode = g_sim_thread.capture_mode, hit = 0;
    if (mode == CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_SUCCESS;
    pthread_t me = pthread_self();
    cap_lock();
    for (struct sim_capture *c = g_sim.captures; c; c = c->next) {
        int mine = pthread_equal(c->thread, me);
        if ((mine && c->mode != CU_STREAM_CAPTURE_MODE_RELAXED) ||
            (!mine && mode == CU_STREAM_CAPTURE_MODE_GLOBAL &&
             c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL)) {
            cap_invalidate(c);
            hit = 1;
        }
    }
    cap_unlock();
    return hit ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}
