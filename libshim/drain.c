/*
 * libshim/drain.c: a production process is idle when its queued work has
 * drained on the GPU, not only when it synchronizes.
 *
 * A run-ahead job (launch K iterations ahead, wait on an older event,
 * synchronize every N) never synchronizes its last launch while it runs, so
 * the synchronize hooks alone count it busy although the GPU idles.  While
 * the process is counted busy, a helper thread of the shim records one
 * "tail" event (CU_EVENT_DISABLE_TIMING | CU_EVENT_BLOCKING_SYNC: waiting
 * never spins) on every stream launched on since it went busy, waits for
 * them (cuEventSynchronize), and if no launch happened since it read
 * launch_seq, the streams still query complete and stay so for the
 * settle time (adaptive, settle_learn; none where the busy period ends at its usual launch
 * count, usual_end), publishes the busy->idle transition exactly as a
 * synchronize would (sync_hooks.c: gap start, futex wake).  Otherwise it
 * records new tails and waits again.
 *
 * The launch fast path makes no driver call: it bumps launch_seq, and a
 * launch on a stream outside the set takes the slow path, which adds it
 * (tgs_drain_note).  The helper calls the real driver functions only (its
 * records are not the application's), never records into a capturing stream,
 * and runs in the RELAXED capture mode so its calls never invalidate a
 * capture.  Untrackable work (more than TGS_DRAIN_STREAMS streams, a
 * per-thread default stream, a record error) turns detection off until the
 * next idle: the synchronize hooks still apply.
 *
 * A slow-path launch counts as in flight from its publish until the driver
 * returns (tgs_gate_publish_busy): the first launch after an idle wakes the
 * helper, whose round could otherwise find the stream empty before the
 * kernel reaches it (measured on the simulator: 17 such false idles in one
 * T10 run, up to 0.8 ms each).  A fast-path launch cannot be counted so (it
 * tail-jumps to the driver: nothing runs after it): one that bumped
 * launch_seq before the helper's round began but reaches the driver only
 * after the round's checks runs while the process is counted idle until the
 * helper's watch sees its work on a stream (watch, below) or its next launch
 * counts the process busy again.
 *
 * Fork: the child has no helper thread; it is created again lazily.  Exit:
 * tgs_drain_stop asks the helper to stop and waits a bounded time.
 */
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shim.h"

#define DRAIN_RETRY_NS 1000000ull   /* a stream captures: look again after this */
/* Between two record rounds: 20 us, doubling up to 200 us while rounds keep finding new
 * launches (a host-bound launcher: the helper must not contend with it for the driver);
 * back to 20 us after an idle. */
#define DRAIN_MIN_ROUND_NS 20000ull
#define DRAIN_MAX_ROUND_NS 200000ull
/* The settle adapts: a launch-bound production process's GPU drains between two of its
 * launches in the middle of a step (the host busy in Python); published, such a gap ends
 * within a millisecond or so and, being the shortest of the recent drain gaps, makes the next
 * ones look as short (sync_hooks.c, gap_predict).  The helper keeps the lengths of the last
 * SETTLE_RING drains it saw (drained to the next launch), those it published and those the
 * settle held back (timed by watching launch_seq in growing slices while it waits), so the
 * ring moves with every drain and a warm-up's long pauses leave it after SETTLE_RING drains
 * whatever the settle hid meanwhile.  A drain under a third of a reference is a micro-gap: the
 * second longest drain in the ring or, if shorter, the length at which the longest drains hold
 * half the ring's idle time (one long gap, or a few on a loaded machine, the host held up for
 * milliseconds, must not make every regular gap look micro).  The settle is 3/2 of the longest
 * micro-gap in the ring (at least TGS_DRAIN_SETTLE_US, at most TGS_DRAIN_SETTLE_MAX_US): it
 * hides the micro-gaps while they keep coming, and falls back as soon as the ring holds
 * none, so it cannot stay above a step's real gaps (which, held back, would never have been
 * seen again).  A drain published while the host blocks in a synchronize is not one of
 * them: that gap lasts until the host has done what follows the synchronize (a run-ahead
 * loop reading its loss every 10 steps and logging it), so it is longer than the step's own
 * gaps, which it would make look micro (and then hide: S7's 2 ms gaps beside its 6 ms one
 * every 10 steps).  Each drain the settle holds back is a gap's start delayed: the price of
 * not publishing micro-gaps, paid by run-ahead jobs only (a synchronize publishes its gap at
 * once). */
#define SETTLE_RING 32
#define POLL_FOR_NS 100000000ull    /* TGS_DRAIN_POLL_US applies this long after an idle */
#define SETTLE_SLICE_NS 20000ull    /* the first slice of a settle's wait; then x 3/2 */
/* The settle is not needed where a busy period ends where it usually does: a training loop
 * launches the same kernels every step, so its step ends after the same number of launches
 * (launch_seq moves), and the drain that follows the step's last launch is its real gap, not a
 * micro-gap.  When PERIOD_AGREE of the last PERIOD_RING busy periods moved launch_seq by the
 * same count and the drain comes at that count, it is published at once.  The rule must not
 * feed itself: micro-gaps that escaped the settle (before it learned them, or on a loaded
 * machine) split each step into periods of a few launches that agree as well, and would then
 * all be published at once.  So a drain published at once that turns out to be a micro-gap
 * forgets the counts, and the rule waits for PERIOD_RING periods again, measured with the
 * settle that micro-gap has just raised. */
#define PERIOD_RING 8
#define PERIOD_AGREE 6
/* After an idle it published, the helper watches the streams while no launch comes: a
 * fast-path launch that bumped launch_seq before the round's snapshot but reached the driver
 * only after the round's checks (its thread preempted in between, or a slow driver call) shows
 * up as work on a stream with launch_seq unchanged, and the process is busy again.  Looks 20 us
 * after the idle, then every 3/2 as long, at most every WATCH_STEP_MAX_NS, for WATCH_NS. */
#define WATCH_FIRST_NS 20000ull
#define WATCH_STEP_MAX_NS 2000000ull
#define WATCH_NS 100000000ull

/* The ring's drains, longest first. */
static void sorted_desc(const uint64_t *ring, uint64_t *v)
{
    for (int i = 0; i < SETTLE_RING; i++) {     /* insertion sort, longest first */
        int j = i;
        for (; j > 0 && v[j - 1] < ring[i]; j--)
            v[j] = v[j - 1];
        v[j] = ring[i];
    }
}

/* A drain that lasted `lasted` joins the ring and the settle follows it; is it a micro-gap?
 * Caller holds mu. */
static int settle_note(struct tgs_drain *d, uint64_t lasted)
{
    uint64_t base = tgs_g.opt.drain_settle_ns, cap = tgs_g.opt.drain_settle_max_ns;
    uint64_t v[SETTLE_RING], total = 0, acc = 0, wm = 0, micro = 0;
    d->lasted[d->nlasted++ % SETTLE_RING] = lasted;
    sorted_desc(d->lasted, v);
    for (int i = 0; i < SETTLE_RING; i++)
        total += v[i];
    /* the weighted median, the length at which the longest drains hold half the ring's idle
     * time: a few drains made long by a loaded machine (the host or the helper held up for
     * milliseconds) hold less than the regular gaps together, so they do not move it; a
     * step's real gaps hold most of it */
    for (int i = 0; i < SETTLE_RING && !wm; i++) {
        acc += v[i];
        wm = 2 * acc >= total ? v[i] : 0;
    }
    /* the reference a micro-gap is short against: robust to one long drain (the second
     * longest) and to a few (the weighted median), whichever is shorter */
    uint64_t ref = wm < v[1] ? wm : v[1];
    for (int i = 0; i < SETTLE_RING && !micro; i++)
        micro = 3 * v[i] < ref ? v[i] : 0;     /* the longest micro-gap */
    uint64_t s = micro + micro / 2;
    d->settle_ns = s < cap ? s : cap;
    if (d->settle_ns < base)
        d->settle_ns = base;
    return 3 * lasted < ref;
}

/* A busy period begins: the drain published before it (if any) lasted until now. */
static void settle_learn(struct tgs_drain *d, uint64_t now)
{
    if (!d->drained_t || !tgs_g.opt.drain_settle_ns)
        return;
    uint64_t lasted = now - d->drained_t;
    d->drained_t = 0;
    if (d->drained_sync)
        return;     /* the host waited on the GPU: what follows is its own, not a drain's */
    d->nlasted_idle++;
    if (settle_note(d, lasted) && d->drained_early)
        d->ncounts = 0;     /* the usual end was a micro-gap's: count again */
}

/* Waits out the settle from `since` in growing slices: 0 if no launch came meanwhile, else
 * how long the drain lasted (to the slice that saw launch_seq move). */
static uint64_t settle_wait(uint64_t seq0, uint64_t since, uint64_t settle)
{
    for (uint64_t slice = SETTLE_SLICE_NS;; slice += slice / 2) {
        uint64_t now = tgs_now_ns();
        if (now - since >= settle)
            return 0;
        uint64_t left = settle - (now - since);
        tgs_sleep_ns(slice < left ? slice : left);
        if (__atomic_load_n(&tgs_g.launch_seq, __ATOMIC_ACQUIRE) != seq0)
            return tgs_now_ns() - since;
    }
}

/* Does a drain seen at launch_seq seq0 end this busy period where most recent ones ended?
 * Caller holds mu. */
static int usual_end(const struct tgs_drain *d, uint64_t seq0)
{
    if (!d->period_start || d->ncounts < PERIOD_RING)
        return 0;
    uint64_t n = seq0 + 1 - d->period_start;
    int agree = 0;
    for (int i = 0; i < PERIOD_RING; i++)
        agree += d->counts[i] == n;
    return agree >= PERIOD_AGREE;
}

/* A busy period begins (caller holds mu): the one before it moved launch_seq this much. */
static void period_begin(struct tgs_drain *d)
{
    uint64_t s = __atomic_load_n(&tgs_g.launch_seq, __ATOMIC_ACQUIRE) + 1;
    if (d->period_start)
        d->counts[d->ncounts++ % PERIOD_RING] = s - d->period_start;
    d->period_start = s;
}

/* The per-thread default stream cannot be named from another thread. */
static int untrackable(CUstream s)
{
    return s == TGS_CU_STREAM_PER_THREAD;
}

static int member(CUstream s)
{
    for (int i = 0; i < tgs_g.drain.n; i++)
        if (tgs_g.drain.streams[i] == s)
            return 1;
    return 0;
}

static void *drain_main(void *arg);

/* Caller holds mu. */
static void ensure_thread(void)
{
    struct tgs_drain *d = &tgs_g.drain;
    int pid = (int)getpid();
    if (d->pid == pid)
        return;
    d->stop = d->stopped = 0;
    int r = tgs_spawn_helper(drain_main, "tgs-drain");
    if (r != 0) {
        tgs_log(TGS_LOG_WARN, "drain helper thread: %d; production is seen idle at its "
                              "synchronize calls only", r);
        d->pid = pid;   /* do not retry at every transition */
        d->stopped = 1;
        TGS_RELAXED_STORE(&d->any, 1);
        return;
    }
    d->pid = pid;
}

/* The driver has what the helper needs (checked once: a driver without events never gets a
 * helper thread, and its transitions pay nothing for it). */
static int usable(void)
{
    return tgs_g.opt.drain && tgs_g.real.cuEventCreate && tgs_g.real.cuEventRecord &&
           tgs_g.real.cuEventSynchronize && tgs_g.real.cuStreamQuery &&
           tgs_g.real.cuCtxGetCurrent && tgs_g.real.cuCtxSetCurrent;
}

void tgs_drain_note(CUstream stream, int fresh)
{
    struct tgs_drain *d = &tgs_g.drain;
    if (fresh && !usable()) {
        TGS_RELAXED_STORE(&d->any, 1);
        return;
    }
    if (!fresh && tgs_drain_known(stream))
        return;
    pthread_mutex_lock(&d->mu);
    if (fresh) {
        period_begin(d);
        TGS_RELAXED_STORE(&d->n, 0);
        TGS_RELAXED_STORE(&d->any, 0);
        d->gen++;
        d->ctx = NULL;
        tgs_g.real.cuCtxGetCurrent(&d->ctx);
        ensure_thread();
        if (d->stopped)
            TGS_RELAXED_STORE(&d->any, 1);
    }
    if (!d->any && !member(stream)) {
        if (untrackable(stream) || d->n == TGS_DRAIN_STREAMS) {
            TGS_RELAXED_STORE(&d->any, 1);
        } else {
            TGS_RELAXED_STORE(&d->streams[d->n], stream);
            __atomic_store_n(&d->n, d->n + 1, __ATOMIC_RELEASE);
        }
    }
    /* before the launch: a helper round that snapshot the set without this stream sees
     * launch_seq move */
    __atomic_add_fetch(&tgs_g.launch_seq, 1, __ATOMIC_RELEASE);
    if (d->asleep)
        pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

/* The helper's events, one per stream slot, created in the context they were for. */
struct tails {
    CUcontext ctx;
    CUevent ev[TGS_DRAIN_STREAMS];
};

static void tails_drop(struct tails *t)
{
    for (int i = 0; i < TGS_DRAIN_STREAMS; i++) {
        if (t->ev[i] && tgs_g.real.cuEventDestroy_v2)
            tgs_g.real.cuEventDestroy_v2(t->ev[i]);
        t->ev[i] = NULL;
    }
}

/* One round: record a tail on each stream and wait for them all.  0: drained, 1: a stream
 * captures (try later), -1: the driver refused (give up until the next idle). */
static int round_wait(struct tails *t, CUcontext ctx, const CUstream *s, int k)
{
    if (ctx != t->ctx) {
        tails_drop(t);
        t->ctx = ctx;
    }
    if (ctx && tgs_g.real.cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        return -1;
    for (int i = 0; i < k; i++) {
        if (!t->ev[i] && tgs_g.real.cuEventCreate(&t->ev[i], CU_EVENT_DISABLE_TIMING |
                                                                CU_EVENT_BLOCKING_SYNC) !=
                             CUDA_SUCCESS) {
            t->ev[i] = NULL;
            return -1;
        }
    }
    /* While any capture is in progress a stream may join one (cuStreamWaitEvent) at any
     * time: no record then.  A begin waits for this round's records (capture.c). */
    pthread_mutex_lock(&tgs_g.drain.rec_mu);
    int r = tgs_capture_any() ? 1 : 0;
    for (int i = 0; i < k && !r; i++)
        if (tgs_g.real.cuEventRecord(t->ev[i], s[i]) != CUDA_SUCCESS)
            r = -1;
    pthread_mutex_unlock(&tgs_g.drain.rec_mu);
    if (r)
        return r;
    for (int i = 0; i < k; i++)
        if (tgs_g.real.cuEventSynchronize(t->ev[i]) != CUDA_SUCCESS)
            return -1;
    return 0;
}

/* Every stream is empty now (work queued after the tails included). */
static int streams_empty(const CUstream *s, int k)
{
    for (int i = 0; i < k; i++) {
        if (tgs_capturing(s[i], 0))
            return 0;
        if (tgs_g.real.cuStreamQuery(s[i]) != CUDA_SUCCESS)
            return 0;
    }
    return 1;
}

/* Waits on cv up to ns (a launch's drain_note wakes it).  Caller holds mu. */
static void nap(struct tgs_drain *d, uint64_t ns)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ns += (uint64_t)ts.tv_nsec;
    ts.tv_sec += (time_t)(ns / 1000000000ull);
    ts.tv_nsec = (long)(ns % 1000000000ull);
    d->asleep = 1;
    pthread_cond_timedwait(&d->cv, &d->mu, &ts);
    d->asleep = 0;
}

/* The watch after a published idle (WATCH_NS above).  Caller holds mu. */
static void watch(struct tgs_drain *d, uint64_t seq0, const CUstream *s, int k)
{
    uint64_t t0 = tgs_now_ns();
    for (uint64_t step = WATCH_FIRST_NS;; step += step / 2) {
        nap(d, step < WATCH_STEP_MAX_NS ? step : WATCH_STEP_MAX_NS);
        if (d->stop || __atomic_load_n(&tgs_g.launch_seq, __ATOMIC_ACQUIRE) != seq0 ||
            __atomic_load_n(&tgs_g.dev_active, __ATOMIC_ACQUIRE))
            return;     /* a launch since: it counted the process busy again itself */
        uint64_t period_start = d->period_start;
        pthread_mutex_unlock(&d->mu);
        int empty = streams_empty(s, k), again = !empty && tgs_gate_busy_again(s, k);
        pthread_mutex_lock(&d->mu);     /* (busy_again takes mu itself: tgs_drain_note) */
        if (again) {
            /* that idle was none: the busy period goes on, so neither the settle nor the
             * usual launch count learns from it */
            d->raced++;
            d->drained_t = 0;
            d->ncounts -= period_start && d->ncounts > 0;     /* period_begin's record */
            d->period_start = period_start;
        }
        if (!empty)
            return;
        if (tgs_now_ns() - t0 >= WATCH_NS)
            return;
    }
}

static int armed(const struct tgs_drain *d)
{
    return d->stop || (__atomic_load_n(&tgs_g.dev_active, __ATOMIC_ACQUIRE) && !d->any &&
                       d->n > 0);
}

static void *drain_main(void *arg)
{
    (void)arg;
    struct tgs_drain *d = &tgs_g.drain;
    struct tails t = { 0 };
    CUstream s[TGS_DRAIN_STREAMS];
    if (tgs_g.real.cuThreadExchangeStreamCaptureMode) {
        CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
        tgs_g.real.cuThreadExchangeStreamCaptureMode(&m);
    }
    uint64_t last_round = 0, spacing = DRAIN_MIN_ROUND_NS, last_gen = 0;
    pthread_mutex_lock(&d->mu);
    for (;;) {
        while (!armed(d)) {
            /* with TGS_DRAIN_POLL_US, soon after an idle, look every that often instead of
             * being woken by the launch that ends it: a launching thread that wakes the helper
             * draws it onto its own core (T2's production alone: 780-2,620 CPU migrations in
             * 6 s against 52-165 without the helper, 64-204 polling) */
            if (tgs_g.opt.drain_poll_ns && tgs_now_ns() - d->idle_t < POLL_FOR_NS) {
                pthread_mutex_unlock(&d->mu);
                tgs_sleep_ns(tgs_g.opt.drain_poll_ns);
                pthread_mutex_lock(&d->mu);
                continue;
            }
            d->asleep = 1;
            pthread_cond_wait(&d->cv, &d->mu);
            d->asleep = 0;
        }
        if (d->stop)
            break;
        uint64_t gen = d->gen;
        if (gen != last_gen) {              /* a new busy period */
            spacing = DRAIN_MIN_ROUND_NS;
            settle_learn(d, tgs_now_ns());
        }
        last_gen = gen;
        int k = d->n;
        CUcontext ctx = d->ctx;
        for (int i = 0; i < k; i++)
            s[i] = d->streams[i];
        uint64_t seq0 = __atomic_load_n(&tgs_g.launch_seq, __ATOMIC_ACQUIRE);
        int at_end = usual_end(d, seq0);
        pthread_mutex_unlock(&d->mu);

        uint64_t now = tgs_now_ns();
        if (now - last_round < spacing)
            tgs_sleep_ns(spacing - (now - last_round));
        last_round = tgs_now_ns();
        int r = round_wait(&t, ctx, s, k);
        d->rounds++;
        if (r == 1)
            tgs_sleep_ns(DRAIN_RETRY_NS);
        if (r < 0) {                        /* e.g. the context went: events made anew */
            tails_drop(&t);
            t.ctx = NULL;
        }
        int same = r == 0 && __atomic_load_n(&tgs_g.launch_seq, __ATOMIC_ACQUIRE) == seq0 &&
                   streams_empty(s, k);
        uint64_t drained_t = same ? tgs_now_ns() : 0, settle = d->settle_ns, held = 0;
        if (!settle)
            settle = d->settle_ns = tgs_g.opt.drain_settle_ns;
        if (same && settle && !at_end) {
            /* a gap shorter than this is the host between two launches: not published */
            held = settle_wait(seq0, drained_t, settle);
            same = !held && __atomic_load_n(&tgs_g.launch_seq, __ATOMIC_ACQUIRE) == seq0 &&
                   streams_empty(s, k);
        }

        pthread_mutex_lock(&d->mu);
        if (d->stop)
            break;
        if (r < 0 && gen == d->gen) {
            tgs_log(TGS_LOG_DEBUG, "drain: the driver refused a tail event; until the next "
                                   "idle, production is seen idle at its synchronize calls");
            TGS_RELAXED_STORE(&d->any, 1);
        }
        if (held && !__atomic_load_n(&d->syncing, __ATOMIC_ACQUIRE))
            settle_note(d, held);
        if (same && gen == d->gen && d->n == k && tgs_gate_idle_drained(seq0, drained_t)) {
            d->idles++;
            d->early += at_end ? 1 : 0;
            d->drained_early = at_end;
            d->drained_sync = __atomic_load_n(&d->syncing, __ATOMIC_ACQUIRE) > 0;
            d->drained_t = drained_t;
            d->idle_t = tgs_now_ns();
            spacing = DRAIN_MIN_ROUND_NS;
            watch(d, seq0, s, k);
            if (d->stop)
                break;
        } else if (r == 0 && spacing < DRAIN_MAX_ROUND_NS) {
            spacing *= 2;
        }
    }
    struct timespec cpu;
    if (!clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu))
        d->cpu_ns = (uint64_t)cpu.tv_sec * 1000000000ull + (uint64_t)cpu.tv_nsec;
    d->stopped = 1;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    tails_drop(&t);
    return NULL;
}

void tgs_drain_rec_lock(void)
{
    pthread_mutex_lock(&tgs_g.drain.rec_mu);
}

void tgs_drain_rec_unlock(void)
{
    pthread_mutex_unlock(&tgs_g.drain.rec_mu);
}

void tgs_drain_reset(void)
{
    struct tgs_drain *d = &tgs_g.drain;
    pthread_mutex_init(&d->mu, NULL);
    pthread_mutex_init(&d->rec_mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    d->n = 0;
    d->any = 0;
    d->pid = 0;
    d->stop = d->stopped = 0;
    d->ctx = NULL;
    d->idles = d->rounds = d->cpu_ns = d->idle_t = 0;
    d->asleep = 0;
    d->settle_ns = d->drained_t = 0;
    d->nlasted = d->nlasted_idle = 0;
    memset(d->lasted, 0, sizeof(d->lasted));
    d->period_start = d->early = 0;
    d->drained_early = d->drained_sync = 0;
    d->syncing = 0;
    d->ncounts = 0;
    memset(d->counts, 0, sizeof(d->counts));
}

void tgs_drain_stop(void)
{
    struct tgs_drain *d = &tgs_g.drain;
    tgs_stop_helper(&d->mu, &d->cv, &d->pid, &d->stop, &d->stopped);
    if (d->idles)
        tgs_log(TGS_LOG_DEBUG, "drain: %llu idles published, %llu at a busy period's usual "
                               "end without the settle", (unsigned long long)d->idles,
                (unsigned long long)d->early);
    if (d->raced)
        tgs_log(TGS_LOG_DEBUG, "drain: %llu idles taken back (a launch had raced the check)",
                (unsigned long long)d->raced);
    if (d->idles)
        tgs_log(TGS_LOG_DEBUG, "drain: the settle learned from %u drains, %u of them "
                               "published idles", (unsigned)d->nlasted,
                (unsigned)d->nlasted_idle);
    if (d->rounds)
        tgs_log(TGS_LOG_DEBUG, "drain: the helper made %llu rounds in %.1f ms of CPU",
                (unsigned long long)d->rounds, (double)d->cpu_ns / 1e6);
}
