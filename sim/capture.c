/*
 * capture.c: stream capture, with the real driver's rules.
 *
 * A capture sequence starts on one stream (cuStreamBeginCapture*) and owns a
 * graph.  Work submitted to a stream of the sequence becomes a node of that
 * graph (kernel, memcpy, memset) depending on the stream's dependency set,
 * which it then replaces; nothing executes.  An event recorded in such a
 * stream remembers the stream's dependency set (a "captured event"); a
 * stream that waits on it joins the sequence (or, already in it, adds those
 * dependencies).  cuStreamEndCapture on the origin stream ends the sequence
 * and returns the graph, unless the sequence was invalidated or a joined
 * stream's work was never joined back into the origin stream.
 *
 * Illegal calls return the documented error and invalidate the sequences
 * they touch: synchronizing or querying a capturing stream, a captured event
 * or the context; using the legacy stream while a blocking stream of its
 * context captures (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT); "potentially unsafe"
 * calls (cuMemAlloc, cuMemFree ...) under the thread's capture mode; waits
 * that would cross or merge sequences.
 *
 * All state is process-local, under g_sim.cap_lock; g_sim.cap_active lets
 * every hook return after one relaxed load while nothing captures.
 */
#include <stdlib.h>
#include <string.h>

#include "sim.h"

struct cap_node {
    CUgraphNode node;
    CUgraphNode *deps;
    size_t ndeps;
};

struct sim_capture {
    uint64_t id;
    int mode;
    int status;                 /* CU_STREAM_CAPTURE_STATUS_ACTIVE or _INVALIDATED */
    pthread_t thread;           /* that began it */
    struct CUctx_st *ctx;
    struct CUstream_st *origin;
    CUgraph graph;
    int own_graph;              /* created at begin (destroyed if the capture fails) */
    struct CUstream_st **streams;
    size_t nstreams, streams_cap;
    struct cap_node *nodes;     /* the captured nodes and their dependencies */
    size_t nnodes, nodes_cap;
    struct sim_capture *next;
};

static void lock(void) { pthread_mutex_lock(&g_sim.cap_lock); }
static void unlock(void) { pthread_mutex_unlock(&g_sim.cap_lock); }

static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap * 2 : 8;
    while (n < need)
        n *= 2;
    void *p = realloc(*arr, n * elem);
    if (!p)
        return -1;
    *arr = p;
    *cap = n;
    return 0;
}

static struct sim_capture *find_id(uint64_t id)
{
    for (struct sim_capture *c = g_sim.captures; c; c = c->next)
        if (c->id == id)
            return c;
    return NULL;
}

static void invalidate(struct sim_capture *c)
{
    if (c)
        c->status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
}

/* Replace (add = 0) or extend (add = 1) a stream's dependency set. */
static int set_deps(struct CUstream_st *s, const CUgraphNode *deps, size_t n, int add)
{
    size_t base = add ? s->ndeps : 0, old = s->deps_cap;
    if (grow((void **)&s->deps, &s->deps_cap, base + n + 1, sizeof *s->deps) != 0)
        return -1;
    if (!s->edges || s->deps_cap != old) {
        void *e = realloc(s->edges, s->deps_cap * sizeof *s->edges);
        if (!e)
            return -1;
        s->edges = e;
    }
    size_t k = base;
    for (size_t i = 0; i < n; i++) {
        size_t j = 0;
        while (j < k && s->deps[j] != deps[i])
            j++;
        if (j == k)
            s->deps[k++] = deps[i];
    }
    s->ndeps = k;
    memset(s->edges, 0, k * sizeof *s->edges);
    return 0;
}

static int join(struct sim_capture *c, struct CUstream_st *s, const CUgraphNode *deps, size_t n)
{
    if (grow((void **)&c->streams, &c->streams_cap, c->nstreams + 1, sizeof *c->streams) != 0 ||
        set_deps(s, deps, n, 0) != 0)
        return -1;
    c->streams[c->nstreams++] = s;
    s->cap = c;
    return 0;
}

/* A blocking stream of ctx in a capture: the legacy stream is unusable. */
static struct sim_capture *blocking_capture(struct CUctx_st *ctx)
{
    for (struct sim_capture *c = g_sim.captures; c; c = c->next)
        for (size_t i = 0; c->ctx == ctx && i < c->nstreams; i++)
            if (!(c->streams[i]->flags & CU_STREAM_NON_BLOCKING))
                return c;
    return NULL;
}

static CUresult check_legacy_locked(struct CUctx_st *ctx)
{
    int hit = 0;
    for (struct sim_capture *c = g_sim.captures; c; c = c->next)
        for (size_t i = 0; c->ctx == ctx && i < c->nstreams; i++)
            if (!(c->streams[i]->flags & CU_STREAM_NON_BLOCKING)) {
                invalidate(c);
                hit = 1;
                break;
            }
    return hit ? CUDA_ERROR_STREAM_CAPTURE_IMPLICIT : CUDA_SUCCESS;
}

/* ---- the hooks the other files call ---- */

int sim_capture_take(CUstream s, int ptsz, struct CUctx_st *ctx, struct CUstream_st *obj,
                     const struct sim_graph_op *op, CUresult *res)
{
    if (!sim_capture_any())
        return 0;
    int took = 1;
    lock();
    struct sim_capture *c = obj ? obj->cap : NULL;
    if (c && c->status != CU_STREAM_CAPTURE_STATUS_ACTIVE) {
        *res = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else if (c) {
        CUgraphNode node = NULL;
        CUgraphNode *deps = obj->ndeps ? malloc(obj->ndeps * sizeof *deps) : NULL;
        *res = CUDA_ERROR_OUT_OF_MEMORY;
        if ((deps || !obj->ndeps) &&
            grow((void **)&c->nodes, &c->nodes_cap, c->nnodes + 1, sizeof *c->nodes) == 0 &&
            sim_graph_add(c->graph, op, obj->deps, obj->ndeps, &node) == CUDA_SUCCESS) {
            if (obj->ndeps)
                memcpy(deps, obj->deps, obj->ndeps * sizeof *deps);
            c->nodes[c->nnodes++] = (struct cap_node){node, deps, obj->ndeps};
            deps = NULL;
            *res = set_deps(obj, &node, 1, 0) == 0 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
        }
        free(deps);
        if (*res != CUDA_SUCCESS)
            invalidate(c);
    } else if (sim_stream_is_legacy(s, ptsz) && blocking_capture(ctx)) {
        *res = check_legacy_locked(ctx);
    } else {
        took = 0;
    }
    unlock();
    return took;
}

int sim_capture_record(CUevent e, CUstream s, int ptsz, struct CUctx_st *ctx,
                       struct CUstream_st *obj, CUresult *res)
{
    if (!e->captured && !sim_capture_any())
        return 0;
    int took = 1;
    lock();
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
    } else if (sim_stream_is_legacy(s, ptsz) && blocking_capture(ctx)) {
        *res = check_legacy_locked(ctx);
    } else {
        e->captured = 0; /* recorded for real again: an ordinary event */
        took = 0;
    }
    unlock();
    return took;
}

CUresult sim_capture_check_sync(CUstream s, int ptsz, struct CUctx_st *ctx,
                                struct CUstream_st *obj)
{
    if (!sim_capture_any())
        return CUDA_SUCCESS;
    CUresult r = CUDA_SUCCESS;
    lock();
    if (obj && obj->cap) {
        invalidate(obj->cap);
        r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    } else if (sim_stream_is_legacy(s, ptsz)) {
        r = check_legacy_locked(ctx);
    }
    unlock();
    return r;
}

CUresult sim_capture_check_event(CUevent e)
{
    if (!e->captured)
        return CUDA_SUCCESS;
    lock();
    invalidate(find_id(e->cap_id));
    unlock();
    return CUDA_ERROR_CAPTURED_EVENT;
}

CUresult sim_capture_check_ctx(struct CUctx_st *ctx)
{
    if (!sim_capture_any())
        return CUDA_SUCCESS;
    int hit = 0;
    lock();
    for (struct sim_capture *c = g_sim.captures; c; c = c->next)
        if (c->ctx == ctx) {
            invalidate(c);
            hit = 1;
        }
    unlock();
    return hit ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

CUresult sim_capture_check_legacy(struct CUctx_st *ctx)
{
    if (!sim_capture_any())
        return CUDA_SUCCESS;
    lock();
    CUresult r = check_legacy_locked(ctx);
    unlock();
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
    lock();
    for (struct sim_capture *c = g_sim.captures; c; c = c->next) {
        int mine = pthread_equal(c->thread, me);
        if ((mine && c->mode != CU_STREAM_CAPTURE_MODE_RELAXED) ||
            (!mine && mode == CU_STREAM_CAPTURE_MODE_GLOBAL &&
             c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL)) {
            invalidate(c);
            hit = 1;
        }
    }
    unlock();
    return hit ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

static void unlink_capture(struct sim_capture *c);

static void leave(struct CUstream_st *s)
{
    s->cap = NULL;
    s->ndeps = 0;
}

void sim_capture_stream_gone(struct CUstream_st *obj)
{
    CUgraph drop = NULL;
    lock();
    struct sim_capture *c = obj->cap;
    if (c) {
        invalidate(c);
        for (size_t i = 0; i < c->nstreams; i++)
            if (c->streams[i] == obj)
                c->streams[i] = c->streams[--c->nstreams];
        if (c->origin == obj) {
            /* can never be ended now: the sequence ends here, its graph with it */
            unlink_capture(c);
            drop = c->own_graph ? c->graph : NULL;
            free(c);
        }
    }
    unlock();
    if (drop)
        cuGraphDestroy(drop);
    free(obj->deps);
    free(obj->edges);
}

int sim_capture_graph_busy(CUgraph g)
{
    if (!sim_capture_any())
        return 0;
    int busy = 0;
    lock();
    for (struct sim_capture *c = g_sim.captures; c && !busy; c = c->next)
        busy = c->graph == g;
    unlock();
    return busy;
}

void sim_capture_event_gone(struct CUevent_st *e)
{
    free(e->cap_deps);
    e->cap_deps = NULL;
}

/* ---- sequences ---- */

static void unlink_capture(struct sim_capture *c)
{
    for (struct sim_capture **pp = &g_sim.captures; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    for (size_t i = 0; i < c->nstreams; i++)
        leave(c->streams[i]);
    for (size_t i = 0; i < c->nnodes; i++)
        free(c->nodes[i].deps);
    free(c->nodes);
    free(c->streams);
    __atomic_sub_fetch(&g_sim.cap_active, 1, __ATOMIC_RELAXED);
}

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
    if (!obj)
        return CUDA_ERROR_NOT_SUPPORTED; /* the per-thread default stream: not modelled */
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
    lock();
    if (obj->cap) {
        unlock();
        if (c->own_graph)
            cuGraphDestroy(into);
        free(c);
        return CUDA_ERROR_ILLEGAL_STATE; /* already capturing */
    }
    c->id = ++g_sim.cap_next_id;
    c->mode = mode;
    c->status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    c->thread = pthread_self();
    c->ctx = ctx;
    c->origin = obj;
    c->graph = into;
    if (join(c, obj, deps, ndeps) != 0) {
        unlock();
        free(c->streams);
        free(c);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    c->next = g_sim.captures;
    g_sim.captures = c;
    __atomic_add_fetch(&g_sim.cap_active, 1, __ATOMIC_RELAXED);
    unlock();
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

static CUresult end(CUstream s, CUgraph *phGraph)
{
    struct CUctx_st *ctx;
    struct CUstream_st *obj;
    CUresult r = sim_stream_resolve(s, &ctx, &obj);
    if (r != CUDA_SUCCESS)
        return r;
    if (!phGraph)
        return CUDA_ERROR_INVALID_VALUE;
    lock();
    struct sim_capture *c = obj ? obj->cap : NULL;
    if (!c) {
        unlock();
        return CUDA_ERROR_ILLEGAL_STATE; /* not capturing */
    }
    if (c->origin != obj) {
        invalidate(c);
        unlock();
        return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
    }
    if (c->mode != CU_STREAM_CAPTURE_MODE_RELAXED && !pthread_equal(c->thread, pthread_self())) {
        unlock();
        return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    }
    if (c->status != CU_STREAM_CAPTURE_STATUS_ACTIVE)
        r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    else if (unjoined(c))
        r = CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
    CUgraph g = c->graph;
    unlink_capture(c);
    unlock();
    if (r != CUDA_SUCCESS && c->own_graph)
        cuGraphDestroy(g);
    *phGraph = r == CUDA_SUCCESS ? g : NULL;
    free(c);
    return r;
}

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
    lock();
    struct sim_capture *c = obj ? obj->cap : NULL;
    if (!obj && sim_stream_is_legacy(s, ptsz) && blocking_capture(ctx)) {
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
    unlock();
    return r;
}

static CUresult wait_event(CUstream s, CUevent e, unsigned int flags, int ptsz)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_handle_ok(e, SIM_K_EVENT))
        return CUDA_ERROR_INVALID_HANDLE;
    struct CUctx_st *ctx;
    struct CUstream_st *obj;
    r = sim_stream_resolve(s, &ctx, &obj);
    if (r != CUDA_SUCCESS)
        return r;
    if (flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL)
        return CUDA_ERROR_INVALID_VALUE;
    lock();
    struct sim_capture *ec = e->captured ? find_id(e->cap_id) : NULL;
    struct sim_capture *sc = obj ? obj->cap : NULL;
    int legacy = sim_stream_is_legacy(s, ptsz);
    if (e->captured && !ec) {
        r = CUDA_ERROR_CAPTURED_EVENT; /* its capture has ended */
    } else if (ec) {
        if (legacy) {
            invalidate(ec);
            r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
        } else if (!obj) {
            r = CUDA_ERROR_NOT_SUPPORTED; /* the per-thread default stream: not modelled */
        } else if (ec->status != CU_STREAM_CAPTURE_STATUS_ACTIVE) {
            r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        } else if (!sc) {
            r = join(ec, obj, e->cap_deps, e->ncap_deps) == 0 ? CUDA_SUCCESS
                                                               : CUDA_ERROR_OUT_OF_MEMORY;
        } else if (sc == ec) {
            r = set_deps(obj, e->cap_deps, e->ncap_deps, 1) == 0 ? CUDA_SUCCESS
                                                                  : CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            invalidate(sc);
            invalidate(ec);
            r = CUDA_ERROR_STREAM_CAPTURE_MERGE;
        }
    } else if (sc) {
        if (sc->status != CU_STREAM_CAPTURE_STATUS_ACTIVE) {
            r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        } else if (flags & CU_EVENT_WAIT_EXTERNAL) {
            r = CUDA_ERROR_NOT_SUPPORTED; /* external event nodes: not modelled */
        } else if (e->recorded) {
            invalidate(sc);
            r = CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
        } /* never recorded: an empty set of work, nothing to wait for */
    } else if (flags & CU_EVENT_WAIT_EXTERNAL) {
        r = CUDA_ERROR_INVALID_VALUE; /* only valid during capture */
    } else if (legacy && blocking_capture(ctx)) {
        r = check_legacy_locked(ctx);
    } else if (obj && e->recorded && e->ctx == ctx) {
        /* one FIFO per context: the order holds already; a later synchronize
         * of this stream must also cover the event's work */
        if (e->seq > __atomic_load_n(&obj->last_seq, __ATOMIC_ACQUIRE))
            __atomic_store_n(&obj->last_seq, e->seq, __ATOMIC_RELEASE);
    } else if (e->recorded && e->ctx != ctx && sim_handle_ok(e->ctx, SIM_K_CTX)) {
        unlock();
        sim_wait_seq(e->ctx, e->seq); /* across contexts: the host waits (see the docs) */
        return CUDA_SUCCESS;
    }
    unlock();
    return r;
}

static CUresult update_deps(CUstream s, CUgraphNode *deps, const CUgraphEdgeData *edges,
                            size_t n, unsigned int flags)
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
    lock();
    struct sim_capture *c = obj ? obj->cap : NULL;
    if (!c)
        r = CUDA_ERROR_ILLEGAL_STATE; /* not capturing */
    else if (c->status != CU_STREAM_CAPTURE_STATUS_ACTIVE)
        r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    for (size_t i = 0; r == CUDA_SUCCESS && i < n; i++)
        if (!sim_graph_has_node(c->graph, deps[i]))
            r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS && set_deps(obj, deps, n, flags == CU_STREAM_ADD_CAPTURE_DEPENDENCIES))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    unlock();
    return r;
}

/* ---- entry points ---- */

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

CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph) { return end(hStream, phGraph); }
CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
    return end(hStream, phGraph);
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

CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    return wait_event(hStream, hEvent, Flags, 0);
}
CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    return wait_event(hStream, hEvent, Flags, 1);
}

CUresult cuStreamUpdateCaptureDependencies(CUstream hStream, CUgraphNode *dependencies,
                                           size_t numDependencies, unsigned int flags)
{
    return update_deps(hStream, dependencies, NULL, numDependencies, flags);
}
CUresult cuStreamUpdateCaptureDependencies_ptsz(CUstream hStream, CUgraphNode *dependencies,
                                                size_t numDependencies, unsigned int flags)
{
    return update_deps(hStream, dependencies, NULL, numDependencies, flags);
}
CUresult cuStreamUpdateCaptureDependencies_v2(CUstream hStream, CUgraphNode *dependencies,
                                              const CUgraphEdgeData *dependencyData,
                                              size_t numDependencies, unsigned int flags)
{
    return update_deps(hStream, dependencies, dependencyData, numDependencies, flags);
}
CUresult cuStreamUpdateCaptureDependencies_v2_ptsz(CUstream hStream, CUgraphNode *dependencies,
                                                   const CUgraphEdgeData *dependencyData,
                                                   size_t numDependencies, unsigned int flags)
{
    return update_deps(hStream, dependencies, dependencyData, numDependencies, flags);
}
