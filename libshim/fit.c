/*
 * libshim/fit.c: the FIT gate (TGS_GATE_WAIT | TGS_GATE_FIT, opportunistic
 * jobs).  An opportunistic kernel still running when production launches
 * delays production (a time-sliced GPU does not preempt it at once), so a
 * launch goes only when it and what this process still has queued will be
 * done before production is predicted to return:
 *
 *     production idle  and  max(q_until, now) + fixed + est x work
 *                             <= min over production jobs (idle_since_ns + gap_pred_ns)
 *
 * (production idle: no production pub of the device is busy; the gap ends
 * when the first production job is predicted back, so one production job's
 * figures can only shorten the gap others leave; peers.c reads them).
 *
 * A launch's GPU time is predicted as fixed + est x work: est (ns of GPU time
 * per work unit) and fixed (what every launch costs, whatever its size: learned
 * from samples under LONG_SAMPLE_NS, an average) come from this process's own
 * kernels:
 * every 8th gated launch (every one while there is no estimate) is bracketed
 * by a timed event pair on its stream; the end event is queried at later
 * launches and synchronizes, never waited for.  A sample is "clean" when
 * production stayed idle from its launch to the moment it was read (busy_seq
 * unchanged); only clean samples move the estimate (up at once, down by 1/8:
 * it must err long), except that the first sample of all is taken
 * provisionally.  The host time from recording the start event to the launch
 * returning is taken off a sample (on an idle stream the start event fires
 * before the kernel is launched); a sample whose host delay is large is not
 * believed.  q_until models our own queue: each launch adds est x work
 * after max(q_until, now); a full synchronize empties it.
 *
 * Waiting (sleeps of GATE_STEP_NS, never spins), bounded by gate_max_wait_us:
 *   - first half: go as soon as the launch fits (or production has no gap
 *     history: plain WAIT; or the gap has lasted twice the longest one in the
 *     ring, and nothing of ours is queued: one kernel at a time);
 *   - second half: a launch that never fits goes at the start of a gap (a
 *     fresh one, or one that outlasted the history), where it delays
 *     production least, and at the start of a fresh gap only while the
 *     overrun budget covers its predicted overrun (the time it will still run
 *     after production is predicted back): the budget grows by OVERRUN_FRAC
 *     of wall time (production's allowance, the policy's 3 % target), up to
 *     OVERRUN_CAP_NS (a full budget lets any one launch go), and every launch
 *     that does not fit (this rule, the starvation bound) spends its
 *     predicted overrun (TGS_FIT_BUDGET=0: no budget).  The allowance is
 *     shared: OVERRUN_FRAC / the opportunistic jobs listed on the device;
 *   - past gate_max_wait_us a launch goes as soon as the budget covers its
 *     predicted overrun (all of it while production is busy; a merely full
 *     budget lets it go only at the start of a gap, as above), and anyway at
 *     the starvation bound, gate_max_wait_us + est x work / the allowance:
 *     by then the budget has regained a whole kernel's worth, so the bound
 *     only fires when the estimate grew meanwhile (or after HARD_MAX_NS).
 *     Kernels that never fit a gap thus cost production at most its
 *     allowance, and still go at a rate of one per (overrun / allowance).
 *     TGS_FIT_BUDGET=gap (start of gap only): the budget governs only the
 *     start-of-gap rule; at gate_max_wait_us a launch goes anyway.
 *   - trickle (either half), where recent gaps end at random (some twice as long as the
 *     predicted one: an inference server's requests): past the predicted end, launches go
 *     while our queue stays under TRICKLE_MAX_NS, so production, when it returns, waits at
 *     most that; the budget pays what the queue really ran past production's return.
 * With several opportunistic jobs the controller gives each process a gap
 * mask (slot.gap_mask): in the first half it only opens gaps it owns, or
 * gaps whose owner left them unclaimed (gap_mine).
 * Everything here is on the throttled slow path; a lost event or a missing
 * device segment degrades to plain WAIT / no gating, never to an error.
 * Sequence numbers ("busy_seq") are the device's gap sequence,
 * tgs_prod_seq(): the sum of the production pubs' busy_seq.
 */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "shim.h"

#define GATE_STEP_NS tgs_fit_step_ns()    /* the .ctl's fit_step_ns (policy.c) */
#define FRESH_NS (2 * GATE_STEP_NS)  /* a gap younger than this is "at its start" */
#define SAMPLE_EVERY 8
#define EST_DOWN 0.125               /* weight of a lower clean sample */
#define HOST_DELAY_MAX_NS 20000.0    /* a sample's host delay always tolerated ... */
#define HOST_DELAY_FRAC 0.05         /* ... or up to this share of what it measured */
#define LONG_SAMPLE_NS 20000.0       /* shorter samples measure the per-launch cost */
#define FIXED_MAX_NS 10000.0         /* the most a launch is believed to cost beyond its work */
#define OVERRUN_FRAC tgs_interference()  /* ns of delay to production allowed per ns: the .ctl's */
#define OVERRUN_CAP_NS 20000000.0    /* the most the budget saves up */
#define HARD_MAX_NS 10000000000ull   /* the starvation bound is never later than this */
#define TRICKLE_MAX_NS 400000.0      /* the deepest queue a trickle keeps (below) */
#define TRICKLE_SPREAD 2             /* gaps this much longer than predicted: random ends */
#define TRICKLE_HOLD 3               /* a trickle waits this many of the shortest gaps (below) */

/* The GPU time a launch of `work` units is predicted to take: the per-launch cost plus the
 * cost per unit (0 while there is no estimate). */
static double run_ns(uint64_t work)
{
    struct tgs_fit *f = &tgs_g.fit;
    return f->est == 0.0 ? 0.0 : f->fixed_ns + f->est * (double)work;
}

/* This process's share of production's allowance: the device's opportunistic jobs split it. */
static double allowance(void)
{
    int n = tgs_opp_jobs();
    return OVERRUN_FRAC / (n > 1 ? n : 1);
}

/* The budget, accrued up to now; caller holds mu. */
static double budget_locked(uint64_t now)
{
    struct tgs_fit *f = &tgs_g.fit;
    if (!f->overrun_t)
        f->overrun_budget = OVERRUN_CAP_NS;
    else if (now > f->overrun_t)
        f->overrun_budget += (double)(now - f->overrun_t) * allowance();
    if (f->overrun_budget > OVERRUN_CAP_NS)
        f->overrun_budget = OVERRUN_CAP_NS;
    f->overrun_t = now;
    return f->overrun_budget;
}

/* How long a launch going now would still run after production is predicted back (all of
 * it while production is busy; 0 without an estimate or a gap history); caller holds mu. */
static double overrun_ns(uint64_t now, uint64_t work)
{
    struct tgs_fit *f = &tgs_g.fit;
    if (f->est == 0.0)
        return 0.0;
    double run = run_ns(work);
    if (tgs_prod_busy())
        return run;
    uint64_t idle = 0, gap_end = tgs_prod_gap_end(now, &idle);
    if (!gap_end || (now > idle && now - idle > 2 * tgs_prod_gap_max()))
        return 0.0;                 /* no history, or a gap that outlasted it: a pause */
    uint64_t base = f->q_until_ns > now ? f->q_until_ns : now;
    double over = (double)base + run - (double)gap_end;
    return over > 0.0 ? (over < run ? over : run) : 0.0;
}

/* Does the budget pay for a launch going now?  A full budget lets any one launch go (a
 * kernel longer than the cap could never go otherwise); caller holds mu. */
static bool covered(uint64_t now, uint64_t work)
{
    double b = budget_locked(now);
    return b >= overrun_ns(now, work) || b >= OVERRUN_CAP_NS;
}

/* The starvation bound of one launch: gate_max_wait_us, and with the budget governing it
 * (the default) as long again as the budget needs to regain this kernel; caller holds mu. */
static uint64_t bound_ns(uint64_t max_ns, uint64_t work)
{
    if (tgs_g.opt.fit_budget != TGS_FIT_BUDGET_BOUND || tgs_g.fit.est == 0.0)
        return max_ns;
    double extra = run_ns(work) / allowance();
    uint64_t hard = extra >= (double)HARD_MAX_NS ? HARD_MAX_NS : max_ns + (uint64_t)extra;
    if (hard > HARD_MAX_NS)
        hard = HARD_MAX_NS;
    return hard > max_ns ? hard : max_ns;
}

/* What the last sample measured, if it is complete; caller holds mu. */
static void poll_locked(void)
{
    struct tgs_fit *f = &tgs_g.fit;
    if (f->pending != 2)
        return;
    int mode = tgs_capture_relax(); /* our own events: legal during a capture (capture.c) */
    CUresult q = tgs_g.real.cuEventQuery(f->ev_end);
    if (q == CUDA_ERROR_NOT_READY) {
        tgs_capture_restore(mode);
        return;
    }
    f->pending = 0;
    float ms = 0.0f;
    tgs_pfn_cuEventElapsedTime el = tgs_g.real.cuEventElapsedTime_v2
                                        ? tgs_g.real.cuEventElapsedTime_v2
                                        : tgs_g.real.cuEventElapsedTime;
    CUresult e = q == CUDA_SUCCESS && el ? el(&ms, f->ev_start, f->ev_end) : CUDA_ERROR_UNKNOWN;
    tgs_capture_restore(mode);
    if (e != CUDA_SUCCESS || !(ms > 0.0f) || !f->pending_work)
        return;
    /* The start event fires as soon as the stream reaches it, and on an idle stream that
     * is before the kernel is even launched; the end event, if recorded after the kernel
     * ended, fires when recorded: host time (a preempted thread, the driver's own locks)
     * from before the first record to after the second can be in the elapsed time.  A
     * sample whose host span was long is not believed, not even the first: it measures the
     * host (a thread at nice 19 preempted while production warms up, a function's code loaded
     * at its first launch), and a first estimate 150 times too long stayed, since only a clean
     * sample replaces it and a launch predicted that long rarely goes.  Without an estimate
     * the next launch samples again.  A prompt one has its host time up to the launch taken
     * off. */
    double took = (double)ms * 1e6, span = (double)f->pending_span_ns;
    if (span > HOST_DELAY_MAX_NS && span > HOST_DELAY_FRAC * took)
        return;
    double delay = (double)f->pending_delay_ns;
    if (took - delay <= 0.0)
        return;
    double t = took - delay;
    int clean = f->clean && tgs_prod_seq() == f->pending_seq;
    if (t < LONG_SAMPLE_NS) {
        /* a launch this short is mostly the per-launch cost every kernel pays, whatever its
         * size: it moves that, not the cost per unit (a 32-thread kernel's 5 us would
         * otherwise make every large kernel look 100 times as long as it is) */
        if (clean)
            f->fixed_ns += EST_DOWN * ((t < FIXED_MAX_NS ? t : FIXED_MAX_NS) - f->fixed_ns);
        return; /* without an estimate launches go one sample at a time (judge) */
    }
    double s = (t - f->fixed_ns) / (double)f->pending_work;
    tgs_log(TGS_LOG_DEBUG, "fit sample: %llu units took %.0f ns (host %.0f of %.0f, per launch "
            "%.0f): %.3f ns/unit", (unsigned long long)f->pending_work, took, delay, span,
            f->fixed_ns, s);
    if (f->est == 0.0 || (f->provisional && clean)) {
        f->est = s;
        f->provisional = !clean;
    } else if (clean) {
        f->est = s > f->est ? s : f->est + EST_DOWN * (s - f->est);
    }
}

static bool events_ready(void)
{
    struct tgs_fit *f = &tgs_g.fit;
    if (f->off)
        return false;
    if (f->ev_start && f->ev_end)
        return true;
    if (!tgs_g.real.cuEventCreate || !tgs_g.real.cuEventRecord || !tgs_g.real.cuEventQuery ||
        (!tgs_g.real.cuEventElapsedTime_v2 && !tgs_g.real.cuEventElapsedTime) ||
        (!f->ev_start && tgs_g.real.cuEventCreate(&f->ev_start, CU_EVENT_DEFAULT) != CUDA_SUCCESS) ||
        (!f->ev_end && tgs_g.real.cuEventCreate(&f->ev_end, CU_EVENT_DEFAULT) != CUDA_SUCCESS)) {
        f->off = 1;
        tgs_log(TGS_LOG_WARN, "cannot create timing events: FIT gating acts as WAIT");
        return false;
    }
    return true;
}

/* Trickle: in a gap whose predicted end has passed (or that no launch of ours fits), our
 * queue is kept at most TRICKLE_MAX_NS deep, in launches of at most that.  When production
 * returns first it waits at most that long: what a gap that ends at random (an inference
 * server's next request) can cost it is bounded per return, and the budget pays what it
 * really cost: when production is next seen busy, the queue predicted to run after it came
 * back (trickle_settle).  A launch goes only while the budget holds the whole queue, so the
 * budget never owes more than one queue. */
static bool trickle_ok(uint64_t now, uint64_t work, uint64_t idle, uint64_t gap_end)
{
    struct tgs_fit *f = &tgs_g.fit;
    if (tgs_g.opt.fit_budget != TGS_FIT_BUDGET_BOUND || f->est == 0.0)
        return false;
    /* only where gaps end at random: a recent gap twice as long as the second shortest (the
     * shortest may be an outlier).  Where they are regular (a training step), production is due
     * back when the prediction ends, and what is queued past it only delays production. */
    uint64_t shortest = gap_end > idle ? tgs_prod_gaps_spread(TRICKLE_SPREAD) : 0;
    if (!shortest)
        return false;
    /* a server with requests waiting sends the next as soon as it has the last reply: a
     * gap of host time only, the shortest in its ring (T5: most of 25-325 us, idle gaps
     * mostly longer).  A trickle there delays every waiting request, so it waits until the
     * gap has outlasted TRICKLE_HOLD of the shortest gaps (at most TRICKLE_MAX_NS, what a
     * trickle costs production anyway): by then the server is idle, not between requests. */
    uint64_t hold = shortest < (uint64_t)TRICKLE_MAX_NS / TRICKLE_HOLD
                        ? TRICKLE_HOLD * shortest : (uint64_t)TRICKLE_MAX_NS;
    if (now < idle + hold)
        return false;
    uint64_t base = f->q_until_ns > now ? f->q_until_ns : now;
    double deep = (double)(base - now) + run_ns(work);
    return deep <= TRICKLE_MAX_NS && budget_locked(now) >= deep;
}

/* The trickled queue: free if it ended in its gap, else what was predicted to run after
 * production's return is spent; caller holds mu. */
static void trickle_settle(uint64_t now)
{
    struct tgs_fit *f = &tgs_g.fit;
    if (!f->trickle_end_ns)
        return;
    if (tgs_prod_seq() == f->trickle_seq) {
        if (now >= f->trickle_end_ns)
            f->trickle_end_ns = 0;  /* done inside the gap */
        return;
    }
    uint64_t back = f->trickle_idle_ns + tgs_prod_gap_last();
    if (f->trickle_end_ns > back) {
        budget_locked(now);
        f->overrun_budget -= (double)(f->trickle_end_ns - back);
    }
    f->trickle_end_ns = 0;
}

/* Why a launch went (TGS_FIT_TRACE's reason column). */
enum verdict {
    WAIT_MORE = 0,
    GO_FIT,         /* 'F' first half: it fits the predicted gap */
    GO_NOHIST,      /* 'N' no gap history: plain WAIT */
    GO_FIRST,       /* 'P' the first sample (no estimate yet) */
    GO_OUTLASTED,   /* 'O' a gap that outlasted the history, nothing of ours queued */
    GO_FRESH,       /* 'S' second half: start of a gap, the budget covers it */
    GO_LATE,        /* 'L' second half: an outlasted gap */
    GO_BUDGET,      /* 'B' past max wait, the budget covers it */
    GO_BOUND,       /* 'X' the starvation bound */
    GO_TRICKLE,     /* 'T' a short queue, paid for when it cost (trickle_ok) */
};
static const char VERDICT_CH[] = "-FNPOSLBXT";

/* Weighted sharing of the gaps among opportunistic jobs (ctl line gap_mask):
 * a gap belongs to the processes whose mask has bit (gap sequence) % 64;
 * others may use it once its owner has let TGS_GAP_CLAIM_GRACE_NS pass
 * unclaimed.  The claim is read from the OWNER's pub only (the owner job is
 * found by the device segment's gap masks): a lying job controls only its
 * own gaps. */
static bool gap_mine(uint64_t age)
{
    uint64_t mask = tgs_g.cline ? TGS_RELAXED_LOAD(&tgs_g.cline->gap_mask) : 0;
    if (!mask)
        return true;
    uint64_t g = tgs_prod_seq();
    if ((mask >> (g % 64)) & 1)
        return true;
    int owned = 0;
    uint64_t claim = tgs_gap_owner_claim(g, &owned);
    return age >= TGS_GAP_CLAIM_GRACE_NS && (!owned || claim != g + 1);
}

/* May the launch go now?  second: in the second half of the wait; *idle_out: the start of
 * the gap judged.  Caller holds mu (est, q_until, the pending sample). */
static enum verdict judge(uint64_t now, uint64_t work, int second, uint64_t *idle_out)
{
    struct tgs_fit *f = &tgs_g.fit;
    if (tgs_prod_busy())
        return WAIT_MORE;
    uint64_t idle = 0;
    uint64_t gap_end = tgs_prod_gap_end(now, &idle);
    *idle_out = idle;
    if (!gap_end)
        return GO_NOHIST;                            /* no history: plain WAIT */
    uint64_t age = now > idle ? now - idle : 0;
    int outlasted = age > 2 * tgs_prod_gap_max();
    if (second) {
        if (outlasted)
            return GO_LATE;
        if (age > FRESH_NS)
            return trickle_ok(now, work, idle, gap_end) ? GO_TRICKLE : WAIT_MORE;
        if (!tgs_g.opt.fit_budget)
            return GO_FRESH;
        return covered(now, work) ? GO_FRESH : trickle_ok(now, work, idle, gap_end) ? GO_TRICKLE : WAIT_MORE;
    }
    if (!gap_mine(age))
        return WAIT_MORE;
    if (f->est == 0.0)                               /* first sample still running */
        return f->pending ? WAIT_MORE : GO_FIRST;
    uint64_t base = f->q_until_ns > now ? f->q_until_ns : now;
    if (outlasted)
        return base == now ? GO_OUTLASTED : WAIT_MORE;
    double end = (double)base + run_ns(work);
    if (end <= (double)gap_end)
        return GO_FIT;
    return trickle_ok(now, work, idle, gap_end) ? GO_TRICKLE : WAIT_MORE;
}

/* Charge the launch to our queue and maybe start a sample; caller holds mu. */
static int commit(uint64_t now, uint64_t work, CUstream stream)
{
    struct tgs_fit *f = &tgs_g.fit;
    uint64_t base = f->q_until_ns > now ? f->q_until_ns : now;
    f->q_until_ns = base + (uint64_t)run_ns(work);
    f->launches++;
    if (f->pending || !work ||
        (f->est != 0.0 && !f->provisional && f->launches % SAMPLE_EVERY))
        return 0;
    /* the stream is not capturing (captured launches are never gated), but a
     * capture elsewhere must not be invalidated by our calls (capture.c) */
    int mode = tgs_capture_relax();
    uint64_t before = tgs_now_ns();
    int ok = events_ready() && tgs_g.real.cuEventRecord(f->ev_start, stream) == CUDA_SUCCESS;
    tgs_capture_restore(mode);
    if (!ok)
        return 0;
    f->pending_rec_ns = before;
    f->pending = 1;
    f->pending_work = work;
    f->pending_seq = tgs_prod_seq();
    f->clean = !tgs_prod_busy();
    return 1;
}

/* TGS_FIT_TRACE: one line per gated launch, for measuring where production's gaps go
 * (bench/fit_accounting.py): when it went, the gap it went into and what FIT predicted.
 * Columns: now_ns waited_ns reason seq prod_busy idle_since_ns gap_end_ns est_ns_per_unit
 * work queue_end_ns budget_ns last_gap_ns pid (several processes may share one file; the pid
 * matches the simulator's kernel trace, bench/wait_accounting.py).  Caller holds mu. */
static void trace_locked(uint64_t now, uint64_t start, enum verdict v, uint64_t work)
{
    struct tgs_fit *f = &tgs_g.fit;
    if (!f->trace_tried) {
        f->trace_tried = 1;
        f->trace_fd = open(tgs_g.opt.fit_trace, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    }
    if (f->trace_fd < 0)
        return;
    uint64_t idle = 0, gap_end = tgs_prod_gap_end(now, &idle);
    uint64_t base = f->q_until_ns > now ? f->q_until_ns : now;
    dprintf(f->trace_fd, "%llu %llu %c %llu %d %llu %llu %.4f %llu %llu %.0f %llu %d\n",
            (unsigned long long)now, (unsigned long long)(now - start), VERDICT_CH[v],
            (unsigned long long)tgs_prod_seq(), (int)tgs_prod_busy(), (unsigned long long)idle,
            (unsigned long long)gap_end, f->est, (unsigned long long)work,
            (unsigned long long)(base + (uint64_t)run_ns(work)), f->overrun_budget,
            (unsigned long long)tgs_prod_gap_last(), (int)getpid());
}

int tgs_fit_gate(const struct tgs_ctl_header *h, uint64_t work, CUstream stream)
{
    if (!tgs_gate_on())
        return 0;
    struct tgs_fit *f = &tgs_g.fit;
    __atomic_store_n(&f->used, 1, __ATOMIC_RELAXED);
    uint64_t max_ns = (uint64_t)TGS_RELAXED_LOAD(&h->gate_max_wait_us) * 1000ull;
    uint64_t start = tgs_now_ns(), now = start;
    pthread_mutex_lock(&f->mu);
    enum verdict v;
    uint64_t hard = max_ns, trickle_idle = 0; /* the gap's start, as judge saw it */
    for (;;) {
        poll_locked();
        trickle_settle(now);
        uint64_t waited = now - start;
        hard = bound_ns(max_ns, work);
        if (waited >= hard) {
            v = GO_BOUND;
            break;
        }
        if ((v = judge(now, work, waited >= max_ns / 2, &trickle_idle)) != WAIT_MORE)
            break;
        /* past the max wait: whenever the budget pays for it (a merely full budget only
         * at the start of a gap, above, where the launch overruns least) */
        if (waited >= max_ns && tgs_g.opt.fit_budget == TGS_FIT_BUDGET_BOUND &&
            budget_locked(now) >= overrun_ns(now, work)) {
            v = GO_BUDGET;
            break;
        }
        pthread_mutex_unlock(&f->mu);
        uint64_t left = hard - waited;
        tgs_gate_sleep(left < GATE_STEP_NS ? left : GATE_STEP_NS);
        now = tgs_now_ns();
        pthread_mutex_lock(&f->mu);
    }
    if (v == GO_TRICKLE) {               /* paid when production is back (trickle_settle) */
        uint64_t base = f->q_until_ns > now ? f->q_until_ns : now;
        f->trickle_end_ns = base + (uint64_t)run_ns(work);
        f->trickle_seq = tgs_prod_seq();
        f->trickle_idle_ns = trickle_idle;
    } else if (tgs_g.opt.fit_budget) {   /* what this launch will cost production, if anything */
        budget_locked(now);
        f->overrun_budget -= overrun_ns(now, work);
    }
    if (tgs_g.pub && !tgs_prod_busy())   /* launching into a gap: claim it, in our own pub */
        __atomic_store_n(&tgs_g.pub->gap_claim, tgs_prod_seq() + 1, __ATOMIC_RELEASE);
    if (TGS_UNLIKELY(tgs_g.opt.fit_trace[0]))
        trace_locked(now, start, v, work);
    int sampled = commit(now, work, stream);
    pthread_mutex_unlock(&f->mu);
    if (now != start && tgs_g.slot)
        TGS_RELAXED_STORE(&tgs_g.slot->heartbeat_ns, now);
    return sampled;
}

void tgs_fit_after(int sampled, CUresult r, CUstream stream)
{
    struct tgs_fit *f = &tgs_g.fit;
    if (!sampled)
        return;
    pthread_mutex_lock(&f->mu);
    if (f->pending == 1) {
        f->pending_delay_ns = tgs_now_ns() - f->pending_rec_ns;
        /* never into a capture: the stream may have begun one since the gate */
        int mode = tgs_capture_relax();
        f->pending = r == CUDA_SUCCESS && !tgs_capturing(stream, 0) &&
                     tgs_g.real.cuEventRecord(f->ev_end, stream) == CUDA_SUCCESS ? 2 : 0;
        tgs_capture_restore(mode);
        f->pending_span_ns = tgs_now_ns() - f->pending_rec_ns;
    }
    pthread_mutex_unlock(&f->mu);
}

void tgs_fit_synced(int all)
{
    struct tgs_fit *f = &tgs_g.fit;
    if (!__atomic_load_n(&f->used, __ATOMIC_RELAXED))
        return;
    pthread_mutex_lock(&f->mu);
    poll_locked();
    if (all)
        f->q_until_ns = 0;
    pthread_mutex_unlock(&f->mu);
}

void tgs_fit_reset(void)
{
    /* the parent's events belong to its context: a child starts from scratch */
    struct tgs_fit *f = &tgs_g.fit;
    pthread_mutex_init(&f->mu, NULL);
    f->used = f->off = f->pending = f->provisional = 0;
    f->ev_start = f->ev_end = NULL;
    f->launches = f->q_until_ns = f->overrun_t = 0;
    f->trickle_end_ns = f->trickle_seq = f->trickle_idle_ns = 0;
    f->overrun_budget = 0.0;
    f->est = f->fixed_ns = 0.0;
    f->trace_tried = 0; /* the parent's descriptor is inherited: reopened, same file */
}
