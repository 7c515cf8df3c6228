/*
 * event_times.c: a timing event's completion time outlives the engine's
 * marker ring.  The ring (SIM_MARKER_RING = SIM_RING slots per context)
 * remembers the times of the last markers completed; a context's recorded
 * timing events whose times are not cached yet wait in a list, oldest
 * first, and each new record caches the times of those already complete.
 * The item ring bounds what is pending, so a marker is always still in the
 * ring when the record SIM_RING markers later takes its time: a real driver
 * has no limit on events, and neither has the simulator.
 */
#include "sim.h"

_Static_assert(SIM_MARKER_RING >= SIM_RING, "a pending marker must outlive its ring slot");

static void unlink_locked(struct CUevent_st *e)
{
    struct CUctx_st *c = e->pend_ctx;
    if (!c)
        return;
    if (e->pend_prev)
        e->pend_prev->pend_next = e->pend_next;
    else
        c->pend_head = e->pend_next;
    if (e->pend_next)
        e->pend_next->pend_prev = e->pend_prev;
    else
        c->pend_tail = e->pend_prev;
    e->pend_prev = e->pend_next = NULL;
    e->pend_ctx = NULL;
}

/* Markers complete in order: stop at the first one still pending. */
static void harvest_locked(struct CUctx_st *c)
{
    struct CUevent_st *e;
    while ((e = c->pend_head)) {
        uint64_t t = sim_marker_time(e->slot, e->gen, e->marker);
        if (!t)
            break;
        e->t_ns = t;
        unlink_locked(e);
    }
}

void sim_event_times_recorded(struct CUevent_st *e)
{
    struct CUctx_st *c = e->ctx;
    /* the common case of a framework's allocator (a disable-timing event, which is never in
     * a list, and nothing waiting in the context) takes no lock; a list another thread is
     * filling meanwhile is harvested by that thread's own records */
    if ((e->flags & CU_EVENT_DISABLE_TIMING) && !__atomic_load_n(&c->pend_head, __ATOMIC_RELAXED))
        return;
    pthread_mutex_lock(&g_sim.lock);
    unlink_locked(e);
    harvest_locked(c);
    if (!(e->flags & CU_EVENT_DISABLE_TIMING)) {
        e->pend_ctx = c;
        e->pend_prev = c->pend_tail;
        if (c->pend_tail)
            c->pend_tail->pend_next = e;
        else
            c->pend_head = e;
        c->pend_tail = e;
    }
    pthread_mutex_unlock(&g_sim.lock);
}

void sim_event_times_forget(struct CUevent_st *e)
{
    pthread_mutex_lock(&g_sim.lock);
    unlink_locked(e);
    pthread_mutex_unlock(&g_sim.lock);
}

void sim_event_times_ctx_gone(struct CUctx_st *c)
{
    pthread_mutex_lock(&g_sim.lock);
    while (c->pend_head)
        unlink_locked(c->pend_head);
    pthread_mutex_unlock(&g_sim.lock);
}
