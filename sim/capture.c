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
 * every hook return after one relaxed load while nothing captures.  The
 * files: this one (sequences and their streams), capture_rules.c (what
 * other calls may do during a capture), capture_api.c (begin, end, modes),
 * capture_deps.c (queries, event joins, dependency edits).
 */
#include <stdlib.h>
#include <string.h>

#include "capture.h"

void cap_lock(void) { pthread_mutex_lock(&g_sim.cap_lock); }
void cap_unlock(void) { pthread_mutex_unlock(&g_sim.cap_lock); }

int cap_grow(void **arr, size_t *cap, size_t need, size_t elem)
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

struct sim_capture *cap_find(uint64_t id)
{
    for (struct sim_capture *c = g_sim.captures; c; c = c->next)
        if (c->id == id)
            return c;
    return NULL;
}

void cap_invalidate(struct sim_capture *c)
{
    if (c)
        c->status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
}

/* Replace (add = 0) or extend (add = 1) a stream's dependency set. */
int cap_set_deps(struct CUstream_st *s, const CUgraphNode *deps, size_t n, int add)
{
    size_t base = add ? s->ndeps : 0, old = s->deps_cap;
    if (cap_grow((void **)&s->deps, &s->deps_cap, base + n + 1, sizeof *s->deps) != 0)
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

int cap_join(struct sim_capture *c, struct CUstream_st *s, const CUgraphNode *deps, size_t n)
{
    if (cap_grow((void **)&c->streams, &c->streams_cap, c->nstreams + 1, sizeof *c->streams) != 0 ||
        cap_set_deps(s, deps, n, 0) != 0)
        return -1;
    c->streams[c->nstreams++] = s;
    s->cap = c;
    return 0;
}

/* A blocking stream of ctx in a capture: the legacy stream is unusable. */
struct sim_capture *cap_blocking(struct CUctx_st *ctx)
{
    for (struct sim_capture *c = g_sim.captures; c; c = c->next)
        for (size_t i = 0; c->ctx == ctx && i < c->nstreams; i++)
            if (!(c->streams[i]->flags & CU_STREAM_NON_BLOCKING))
                return c;
    return NULL;
}

CUresult cap_legacy_locked(struct CUctx_st *ctx)
{
    int hit = 0;
    for (struct sim_capture *c = g_sim.captures; c; c = c->next)
        for (size_t i = 0; c->ctx == ctx && i < c->nstreams; i++)
            if (!(c->streams[i]->flags & CU_STREAM_NON_BLOCKING)) {
                cap_invalidate(c);
                hit = 1;
                break;
            }
    return hit ? CUDA_ERROR_STREAM_CAPTURE_IMPLICIT : CUDA_SUCCESS;
}

void cap_leave(struct CUstream_st *s)
{
    s->cap = NULL;
    s->ndeps = 0;
}

void sim_capture_stream_gone(struct CUstream_st *obj)
{
    CUgraph drop = NULL;
    cap_lock();
    struct sim_capture *c = obj->cap;
    if (c) {
        cap_invalidate(c);
        for (size_t i = 0; i < c->nstreams; i++)
            if (c->streams[i] == obj)
                c->streams[i] = c->streams[--c->nstreams];
        if (c->origin == obj) {
            /* can never be ended now: the sequence ends here, its graph with it */
            cap_unlink(c);
            drop = c->own_graph ? c->graph : NULL;
            free(c);
        }
    }
    cap_unlock();
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
    cap_lock();
    for (struct sim_capture *c = g_sim.captures; c && !busy; c = c->next)
        busy = c->graph == g;
    cap_unlock();
    return busy;
}

void sim_capture_event_gone(struct CUevent_st *e)
{
    free(e->cap_deps);
    e->cap_deps = NULL;
}

void cap_unlink(struct sim_capture *c)
{
    for (struct sim_capture **pp = &g_sim.captures; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    for (size_t i = 0; i < c->nstreams; i++)
        cap_leave(c->streams[i]);
    for (size_t i = 0; i < c->nnodes; i++)
        free(c->nodes[i].deps);
    free(c->nodes);
    free(c->streams);
    __atomic_sub_fetch(&g_sim.cap_active, 1, __ATOMIC_RELAXED);
}

struct CUstream_st *cap_stream(CUstream s, int ptsz, struct CUctx_st *ctx,
                               struct CUstream_st *obj, int create)
{
    if (obj || sim_stream_is_legacy(s, ptsz))
        return obj;
    struct sim_thread *t = &g_sim_thread;
    int free_i = -1;
    for (int i = 0; i < SIM_PT_STREAMS; i++) {
        if (t->pt_stream[i] && t->pt_ctx[i] == ctx)
            return t->pt_stream[i];
        if (free_i < 0 && (!t->pt_stream[i] || (!t->pt_stream[i]->cap &&
                                                !sim_handle_ok(t->pt_ctx[i], SIM_K_CTX))))
            free_i = i;
    }
    if (!create || free_i < 0)
        return NULL;
    struct CUstream_st *p = t->pt_stream[free_i];
    if (!p && !(p = calloc(1, sizeof *p)))
        return NULL;
    free(p->deps);
    free(p->edges);
    memset(p, 0, sizeof *p); /* not a handle: programs never see it */
    p->ctx = ctx;            /* a blocking stream, as the per-thread default stream is */
    t->pt_stream[free_i] = p;
    t->pt_ctx[free_i] = ctx;
    return p;
}
