/*
 * engine.c: the time-sliced device, as a lazily advanced discrete-event
 * simulation in the shared state file.
 *
 * Each context slot holds a FIFO of pending items (kernels with their
 * remaining device time, and zero-time event markers).  The device runs one
 * item at a time.  Whoever needs the state takes the device lock and
 * advances the simulation from t_last_ns to now, giving the device to the
 * contexts with pending work round-robin, one time slice each (preempting a
 * kernel at the slice boundary).  Every item is enqueued after an advance to
 * "now", so everything queued is runnable at t_last_ns.  Waiters predict
 * when their item completes, sleep (at most SLEEP_CHUNK at a time, since
 * other processes may add work), re-advance and check again.
 */
#include "sim.h"

#define SLEEP_CHUNK_NS 2000000ull
#define SLEEP_MIN_NS 20000ull
#define REAP_EVERY_NS 100000000ull

static int has_work(const struct sim_ctx *c, int dev)
{
    return c->in_use && c->dev == dev && c->head != c->tail;
}

static int pick_next(int dev, int cur)
{
    struct sim_state *st = g_sim.st;
    int start = cur < 0 ? 0 : cur + 1;
    for (int k = 0; k < SIM_MAX_CTXS; k++) {
        int c = (start + k) % SIM_MAX_CTXS;
        if (has_work(&st->ctx[c], dev))
            return c;
    }
    return -1;
}

/* Complete the head item of cx at time t, then any zero-time markers
 * directly behind it (an event recorded after a kernel fires with it). */
static void complete_head(int dev, struct sim_device *dv, struct sim_ctx *cx, uint64_t t)
{
    do {
        struct sim_item *it = &cx->items[cx->head % SIM_RING];
        if (it->marker) {
            struct sim_marker *m = &cx->markers[it->marker % SIM_MARKER_RING];
            m->t_ns = t;
            __atomic_store_n(&m->id, it->marker, __ATOMIC_RELEASE);
        } else {
            dv->kernels_done++;
            sim_trace_kernel_locked(dev, cx, it, t);
        }
        cx->last_done_ns = t;
        __atomic_store_n(&cx->head, cx->head + 1, __ATOMIC_RELEASE);
    } while (cx->head != cx->tail && cx->items[cx->head % SIM_RING].remaining_ns == 0);
}

void sim_advance_locked(int dev, uint64_t now)
{
    struct sim_state *st = g_sim.st;
    struct sim_device *dv = &st->dev[dev];
    uint64_t t = dv->t_last_ns;
    uint64_t slice = st->hdr.timeslice_ns;
    while (t < now) {
        int c = dv->cur_ctx;
        int busy = c >= 0 && c < SIM_MAX_CTXS && has_work(&st->ctx[c], dev);
        if (!busy || t >= dv->slice_end_ns) {
            int n = pick_next(dev, c);
            if (n < 0) {
                dv->cur_ctx = -1;
                break; /* idle until the next enqueue */
            }
            if (n != c && c >= 0)
                dv->switches++;
            dv->cur_ctx = c = n;
            dv->slice_end_ns = t + slice;
        }
        struct sim_ctx *cx = &st->ctx[c];
        struct sim_item *it = &cx->items[cx->head % SIM_RING];
        uint64_t run = it->remaining_ns;
        if (!it->start_ns)
            it->start_ns = t;
        if (run > dv->slice_end_ns - t)
            run = dv->slice_end_ns - t;
        if (run > now - t)
            run = now - t;
        it->remaining_ns -= run;
        cx->pending_ns -= run <= cx->pending_ns ? run : cx->pending_ns;
        t += run;
        cx->busy_ns += run;
        dv->busy_ns += run;
        if (cx->proc >= 0 && cx->proc < SIM_MAX_PROCS)
            st->proc[cx->proc].dev[dev].busy_ns += run;
        if (it->remaining_ns == 0)
            complete_head(dev, dv, cx, t);
    }
    if (now > dv->t_last_ns)
        __atomic_store_n(&dv->t_last_ns, now, __ATOMIC_RELEASE);
}

/* Every REAP_EVERY_NS one caller per device looks for dead processes. */
static void maybe_reap(int dev, uint64_t now)
{
    struct sim_device *dv = &g_sim.st->dev[dev];
    uint64_t last = __atomic_load_n(&dv->last_reap_ns, __ATOMIC_RELAXED);
    if (now - last < REAP_EVERY_NS)
        return;
    if (__atomic_compare_exchange_n(&dv->last_reap_ns, &last, now, 0, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED))
        sim_reap_dead(0);
}

/*
 * Predicted time from t_last_ns until item seq of slot completes, assuming
 * no new work arrives: replays the round-robin on the pending totals.
 */
static uint64_t predict_locked(int dev, int slot, uint64_t seq)
{
    struct sim_state *st = g_sim.st;
    struct sim_device *dv = &st->dev[dev];
    struct sim_ctx *me = &st->ctx[slot];
    uint64_t need = 0;
    if (seq >= me->tail) {
        need = me->pending_ns;
    } else {
        for (uint64_t s = me->head; s < seq; s++)
            need += me->items[s % SIM_RING].remaining_ns;
    }
    uint64_t rem[SIM_MAX_CTXS];
    int nbusy = 0;
    for (int c = 0; c < SIM_MAX_CTXS; c++) {
        rem[c] = has_work(&st->ctx[c], dev) ? st->ctx[c].pending_ns : 0;
        nbusy += rem[c] > 0;
    }
    if (need == 0 || nbusy <= 1)
        return need;
    uint64_t slice = st->hdr.timeslice_ns, t = 0;
    int cur = dv->cur_ctx;
    uint64_t left = cur >= 0 && dv->slice_end_ns > dv->t_last_ns ? dv->slice_end_ns - dv->t_last_ns
                                                                  : 0;
    for (int iter = 0; iter < 100000; iter++) {
        if (cur < 0 || rem[cur] == 0 || left == 0) {
            int k, start = cur < 0 ? 0 : cur + 1;
            for (k = 0; k < SIM_MAX_CTXS && !rem[(start + k) % SIM_MAX_CTXS]; k++) {
            }
            if (k == SIM_MAX_CTXS)
                break;
            cur = (start + k) % SIM_MAX_CTXS;
            left = slice;
        }
        uint64_t run = rem[cur] < left ? rem[cur] : left;
        if (cur == slot && run > need)
            run = need;
        t += run;
        rem[cur] -= run;
        left -= run;
        if (cur == slot && (need -= run) == 0)
            return t;
    }
    return t + need;
}

static void sleep_for(uint64_t now, uint64_t ns)
{
    if (ns > SLEEP_CHUNK_NS)
        ns = SLEEP_CHUNK_NS;
    if (ns < SLEEP_MIN_NS)
        ns = SLEEP_MIN_NS;
    sim_sleep_until(now + ns);
}

CUresult sim_enqueue(struct CUctx_st *ctx, uint64_t dur_ns, uint64_t marker, uint64_t *seq_out)
{
    int dev = ctx->dev;
    struct sim_ctx *cx = &g_sim.st->ctx[ctx->slot];
    for (;;) {
        uint64_t now = sim_now_ns();
        maybe_reap(dev, now);
        sim_dev_lock(dev);
        sim_advance_locked(dev, now);
        if (!cx->in_use) {
            sim_dev_unlock(dev);
            return CUDA_ERROR_CONTEXT_IS_DESTROYED;
        }
        uint64_t pending = cx->tail - cx->head;
        if (pending >= g_sim.queue_depth) {
            /* Too many launches in flight: block until the oldest completes. */
            uint64_t wait = predict_locked(dev, ctx->slot, cx->head + 1);
            sim_dev_unlock(dev);
            sleep_for(now, wait);
            continue;
        }
        struct sim_item *it = &cx->items[cx->tail % SIM_RING];
        it->remaining_ns = dur_ns;
        it->marker = marker;
        it->enq_ns = now;
        it->start_ns = 0;
        it->dur_ns = dur_ns;
        cx->pending_ns += dur_ns;
        __atomic_store_n(&cx->tail, cx->tail + 1, __ATOMIC_RELEASE);
        if (pending == 0 && dur_ns == 0)
            complete_head(dev, &g_sim.st->dev[dev], cx, now); /* nothing ahead: done now */
        *seq_out = cx->tail;
        sim_dev_unlock(dev);
        return CUDA_SUCCESS;
    }
}

int sim_seq_done(struct CUctx_st *ctx, uint64_t seq)
{
    struct sim_ctx *cx = &g_sim.st->ctx[ctx->slot];
    if (__atomic_load_n(&cx->head, __ATOMIC_ACQUIRE) >= seq)
        return 1;
    sim_dev_lock(ctx->dev);
    sim_advance_locked(ctx->dev, sim_now_ns());
    int done = cx->head >= seq || !cx->in_use;
    sim_dev_unlock(ctx->dev);
    return done;
}

void sim_wait_seq(struct CUctx_st *ctx, uint64_t seq)
{
    int dev = ctx->dev;
    struct sim_ctx *cx = &g_sim.st->ctx[ctx->slot];
    for (;;) {
        if (__atomic_load_n(&cx->head, __ATOMIC_ACQUIRE) >= seq)
            return;
        uint64_t now = sim_now_ns();
        maybe_reap(dev, now);
        sim_dev_lock(dev);
        sim_advance_locked(dev, now);
        if (cx->head >= seq || !cx->in_use) {
            sim_dev_unlock(dev);
            return;
        }
        uint64_t wait = predict_locked(dev, ctx->slot, seq);
        sim_dev_unlock(dev);
        sleep_for(now, wait);
    }
}

uint64_t sim_ctx_tail(struct CUctx_st *ctx)
{
    return __atomic_load_n(&g_sim.st->ctx[ctx->slot].tail, __ATOMIC_ACQUIRE);
}

int sim_ctx_slot_alloc(int dev)
{
    struct sim_state *st = g_sim.st;
    for (int c = 0; c < SIM_MAX_CTXS; c++) {
        uint32_t zero = 0;
        if (__atomic_compare_exchange_n(&st->ctx[c].in_use, &zero, 2, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
            sim_dev_lock(dev);
            struct sim_ctx *cx = &st->ctx[c];
            cx->proc = g_sim.proc_slot;
            cx->dev = dev;
            cx->gen++;
            cx->head = cx->tail = 0;
            cx->busy_ns = 0;
            cx->pending_ns = 0;
            cx->last_done_ns = 0;
            for (int m = 0; m < SIM_MARKER_RING; m++)
                cx->markers[m].id = 0;
            __atomic_store_n(&cx->in_use, 1, __ATOMIC_RELEASE);
            sim_dev_unlock(dev);
            return c;
        }
    }
    return -1;
}

void sim_ctx_slot_free(int slot)
{
    struct sim_ctx *cx = &g_sim.st->ctx[slot];
    int dev = cx->dev;
    sim_dev_lock(dev);
    cx->head = cx->tail;
    cx->pending_ns = 0;
    if (g_sim.st->dev[dev].cur_ctx == slot)
        g_sim.st->dev[dev].cur_ctx = -1;
    __atomic_store_n(&cx->in_use, 0, __ATOMIC_RELEASE);
    sim_dev_unlock(dev);
}

uint64_t sim_marker_time(int slot, uint32_t gen, uint64_t marker)
{
    struct sim_ctx *cx = &g_sim.st->ctx[slot];
    if (cx->gen != gen)
        return 0;
    struct sim_marker *m = &cx->markers[marker % SIM_MARKER_RING];
    if (__atomic_load_n(&m->id, __ATOMIC_ACQUIRE) != marker)
        return 0;
    return m->t_ns;
}
