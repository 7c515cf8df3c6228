/*
 * libshim/tokens.c: compute tokens (GCRA) and the in-flight cap.
 *
 * GCRA keeps one word, the theoretical arrival time (tat), in process-private
 * memory, updated by CAS.  A launch of w work units at rate R costs
 * T = w/R seconds; it conforms when tat <= now + tau (tau = burst/R, the
 * bucket depth), and then moves tat to max(tat, now) + T.  So a kernel larger
 * than the burst still goes when no debt is pending, and the long-run rate is
 * R.  A non-conforming launch sleeps in chunks of at most 2 ms, re-reading
 * the controller's rate each time: a changed rate rescales the pending debt
 * at once.  Rate 0 pauses the process until the rate is raised.
 */
#include "shim.h"

#define CHUNK_NS 2000000ull
#define DEFAULT_TAU_NS 20000000ull /* burst 0: 20 ms worth of the rate */
#define INFLIGHT_POLL_NS 100000ull

static uint64_t work_ns(uint64_t work, uint64_t rate)
{
    unsigned __int128 v = (unsigned __int128)work * 1000000000ull / rate;
    return v > (UINT64_MAX >> 2) ? (UINT64_MAX >> 2) : (uint64_t)v;
}

static void lane_add(uint64_t *field_base, uint64_t v)
{
    if (tgs_tls.shared)
        __atomic_fetch_add(field_base, v, __ATOMIC_RELAXED);
    else
        TGS_RELAXED_STORE(field_base, TGS_RELAXED_LOAD(field_base) + v);
}

void tgs_throttle(struct tgs_slot *s, struct tgs_lane *lane, uint64_t rate, uint64_t work)
{
    uint64_t start = 0, now = 0;
    while (rate != TGS_RATE_UNLIMITED) {
        now = tgs_now_ns();
        if (rate == 0) {
            if (!start)
                start = now;
            TGS_RELAXED_STORE(&s->heartbeat_ns, now);
            tgs_sleep_ns(CHUNK_NS);
            rate = TGS_RELAXED_LOAD(&tgs_g.cline->rate);
            continue;
        }
        uint64_t tat = __atomic_load_n(&tgs_g.tat_ns, __ATOMIC_RELAXED);
        uint64_t old_rate = __atomic_load_n(&tgs_g.tat_rate, __ATOMIC_RELAXED);
        if (old_rate != rate) {
            /* the debt was priced at the old rate: reprice it at the new one */
            uint64_t nt = tat;
            if (tat > now && old_rate && old_rate != TGS_RATE_UNLIMITED)
                nt = now + (uint64_t)((unsigned __int128)(tat - now) * old_rate / rate);
            if (__atomic_compare_exchange_n(&tgs_g.tat_ns, &tat, nt, 0, __ATOMIC_RELAXED,
                                            __ATOMIC_RELAXED))
                __atomic_store_n(&tgs_g.tat_rate, rate, __ATOMIC_RELAXED);
            continue;
        }
        uint64_t burst = TGS_RELAXED_LOAD(&tgs_g.cline->burst);
        uint64_t tau = burst ? work_ns(burst, rate) : DEFAULT_TAU_NS;
        if (tat <= now + tau) {
            uint64_t base = tat > now ? tat : now;
            if (__atomic_compare_exchange_n(&tgs_g.tat_ns, &tat, base + work_ns(work, rate), 0,
                                            __ATOMIC_RELAXED, __ATOMIC_RELAXED))
                break;
            continue;
        }
        uint64_t wait = tat - tau - now;
        if (!start)
            start = now;
        TGS_RELAXED_STORE(&s->heartbeat_ns, now);
        tgs_sleep_ns(wait < CHUNK_NS ? wait : CHUNK_NS);
        rate = TGS_RELAXED_LOAD(&tgs_g.cline->rate);
    }
    if (start) {
        lane_add(&lane->throttled, 1);
        lane_add(&lane->throttled_ns, tgs_now_ns() - start);
    }
}

/*
 * In-flight work: launched minus known complete.  Completion is learned from
 * CUevents recorded after capped launches (every 8th, or whenever half the
 * cap is in flight) and from synchronize calls, which retire everything.
 */
static void publish_inflight(void)
{
    struct tgs_slot *s = tgs_g.slot;
    uint64_t l = __atomic_load_n(&tgs_g.launched_work, __ATOMIC_RELAXED);
    uint64_t r = __atomic_load_n(&tgs_g.retired_work, __ATOMIC_RELAXED);
    if (s)
        TGS_RELAXED_STORE(&s->inflight_work, l > r ? l - r : 0);
}

static void retire_to(uint64_t mark)
{
    uint64_t cur = __atomic_load_n(&tgs_g.retired_work, __ATOMIC_RELAXED);
    while (cur < mark && !__atomic_compare_exchange_n(&tgs_g.retired_work, &cur, mark, 0,
                                                      __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

/* Query recorded events oldest first; caller holds inflight_mu. */
static void poll_locked(void)
{
    while (tgs_g.ev_tail != tgs_g.ev_head) {
        unsigned i = tgs_g.ev_tail % TGS_INFLIGHT_EVENTS;
        CUresult q = tgs_g.real.cuEventQuery(tgs_g.ev[i]);
        if (q == CUDA_ERROR_NOT_READY)
            break;
        /* success, or an error (context gone): either way nothing is pending there */
        retire_to(tgs_g.ev_mark[i]);
        tgs_g.ev_tail++;
    }
}

void tgs_inflight_poll(void)
{
    if (!tgs_g.real.cuEventQuery)
        return;
    int mode = tgs_capture_relax(); /* our own events: never a capture's */
    pthread_mutex_lock(&tgs_g.inflight_mu);
    poll_locked();
    pthread_mutex_unlock(&tgs_g.inflight_mu);
    tgs_capture_restore(mode);
    publish_inflight();
}

/* Never into a capturing stream: the event would be captured, not recorded
 * (and querying it later would invalidate the capture).  The stream may be
 * an old last_stream that has begun capturing since. */
static int record_event(CUstream stream)
{
    if (!tgs_g.real.cuEventCreate || !tgs_g.real.cuEventRecord || !tgs_g.real.cuEventQuery)
        return 0;
    if (tgs_capture_any() && tgs_capturing(stream, 0))
        return 0;
    int mode = tgs_capture_relax();
    pthread_mutex_lock(&tgs_g.inflight_mu);
    poll_locked();
    if (tgs_g.ev_head - tgs_g.ev_tail < TGS_INFLIGHT_EVENTS) {
        unsigned i = tgs_g.ev_head % TGS_INFLIGHT_EVENTS;
        if (!tgs_g.ev[i] && tgs_g.real.cuEventCreate(&tgs_g.ev[i], CU_EVENT_DISABLE_TIMING) !=
                                CUDA_SUCCESS) {
            tgs_g.ev[i] = NULL;
            if (!tgs_g.inflight_off)
                tgs_log(TGS_LOG_WARN, "cannot create events: the in-flight cap is off");
            tgs_g.inflight_off = 1;
        } else if (tgs_g.real.cuEventRecord(tgs_g.ev[i], stream) == CUDA_SUCCESS) {
            tgs_g.ev_mark[i] = __atomic_load_n(&tgs_g.launched_work, __ATOMIC_RELAXED);
            tgs_g.ev_head++;
        }
    }
    pthread_mutex_unlock(&tgs_g.inflight_mu);
    tgs_capture_restore(mode);
    return 1;
}

/* stream: the launch's (not capturing: captured launches never get here). */
void tgs_inflight_before(struct tgs_slot *s, uint64_t cap, uint64_t work, CUstream stream)
{
    uint64_t start = 0;
    while (cap && !tgs_g.inflight_off) {
        uint64_t l = __atomic_load_n(&tgs_g.launched_work, __ATOMIC_RELAXED);
        uint64_t r = __atomic_load_n(&tgs_g.retired_work, __ATOMIC_RELAXED);
        uint64_t inflight = l > r ? l - r : 0;
        if (inflight == 0 || inflight + work <= cap)
            break;
        tgs_inflight_poll();
        /* nothing recorded covers the backlog yet: behind our last launch, or,
         * if that stream has begun capturing since, on this launch's stream */
        if (tgs_g.ev_tail == tgs_g.ev_head &&
            !record_event(__atomic_load_n(&tgs_g.last_stream, __ATOMIC_RELAXED)))
            record_event(stream);
        uint64_t now = tgs_now_ns();
        if (!start)
            start = now;
        TGS_RELAXED_STORE(&s->heartbeat_ns, now);
        tgs_sleep_ns(INFLIGHT_POLL_NS);
        cap = TGS_RELAXED_LOAD(&tgs_g.cline->inflight_cap);
    }
    publish_inflight();
}

void tgs_inflight_after(struct tgs_slot *s, uint64_t cap, uint64_t work, CUstream stream)
{
    (void)s;
    uint64_t l = __atomic_add_fetch(&tgs_g.launched_work, work, __ATOMIC_RELAXED);
    uint64_t r = __atomic_load_n(&tgs_g.retired_work, __ATOMIC_RELAXED);
    uint64_t seq = __atomic_load_n(&tgs_g.launch_seq, __ATOMIC_RELAXED);
    if (!tgs_g.inflight_off && ((seq & 7) == 0 || (l - r) * 2 > cap))
        record_event(stream);
    publish_inflight();
}

void tgs_inflight_retire_all(void)
{
    retire_to(__atomic_load_n(&tgs_g.launched_work, __ATOMIC_RELAXED));
    publish_inflight();
}
