/*
 * libshim/sync_hooks.c: synchronize/query hooks and production-activity
 * gating through the publish pages (segment.h, TGS_GATE_*).
 *
 * PUBLISH: a production process counts itself in its OWN job's pub->busy
 * from its first launch after being idle until a synchronize (or a
 * successful query of its last launched work) returns.  At the job-wide
 * transitions only (the add that finds 0, the CAS that leaves 0) it also
 * keeps the gap history that FIT (fit.c) predicts from: idle_since_ns,
 * busy_seq, gap_ns[], gap_pred_ns; after 1 -> 0 it bumps idle_futex and
 * calls FUTEX_WAKE unconditionally (no waiter count: a count other tenants
 * write would let them steer production's syscalls).
 * WAIT: an opportunistic launch sleeps in ~75 us steps while a production
 * job of the device is busy (peers.c reads their pubs read-only), at most
 * gate_max_wait_us, then goes.  Without a valid device segment gating is off
 * (one stderr line).
 */
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shim.h"

#define GATE_STEP_NS tgs_wait_step_ns()  /* the .ctl's wait_step_ns (policy.c) */
#define GAP_ABSURD_NS 10000000000ull /* a longer "gap" is a pause, not a pattern */
#define GAP_MARGIN_NS 50000ull       /* + 1/50: host wake-up jitter on both sides */

bool tgs_gate_on(void)
{
    if (tgs_peers_refresh())
        return true;
    if (!__atomic_exchange_n(&tgs_g.gate_warned, 1, __ATOMIC_RELAXED))
        tgs_log(TGS_LOG_WARN, "gating requested but the device segment (device-<idx>.seg next to "
                              "the job segment, or TGS_DEVICE_SEG) is missing or invalid: "
                              "gating is off");
    return false;
}

static uint64_t shortest(const uint64_t *ring, int atomic)
{
    uint64_t lo = UINT64_MAX;
    for (int k = 0; k < TGS_GAP_RING; k++) {
        uint64_t g = atomic ? __atomic_load_n(&ring[k], __ATOMIC_RELAXED) : ring[k];
        if (g && g < lo)
            lo = g;
    }
    return lo;
}

/* The prediction for a gap starting now, begun the way `kind` says: the shortest recent
 * gap of that kind (of any kind, from the pub's ring, while this process has fewer than
 * TGS_GAP_RING of it) less the margin; conservative: a gap shorter than any recent one is
 * what hurts production. */
static void gap_predict(struct tgs_pub *d, int kind)
{
    uint64_t lo = kind < TGS_GAP_KINDS ? shortest(tgs_g.gaps.ring[kind], 0) : UINT64_MAX;
    uint64_t all = shortest(d->gap_ns, 1);
    /* a kind seen fewer than TGS_GAP_RING times (the first gaps, a pause among them) is no
     * pattern yet: no longer than the shortest gap of any kind */
    if (lo == UINT64_MAX || (kind < TGS_GAP_KINDS && tgs_g.gaps.next[kind] < TGS_GAP_RING &&
                             all < lo))
        lo = all;
    if (lo == UINT64_MAX)
        return;                      /* no history: FIT acts as WAIT */
    uint64_t margin = lo / 50 + GAP_MARGIN_NS;
    __atomic_store_n(&d->gap_pred_ns, lo > margin ? lo - margin : 1, __ATOMIC_RELEASE);
}

/* Production went busy job-wide: the gap that just ended joins the pub's ring (and the
 * ring of its kind, when this process started it). */
static void gap_note(struct tgs_pub *d)
{
    uint64_t now = tgs_now_ns();
    uint64_t idle = __atomic_load_n(&d->idle_since_ns, __ATOMIC_ACQUIRE);
    uint64_t seq = __atomic_add_fetch(&d->busy_seq, 1, __ATOMIC_RELEASE);
    if (!idle || now <= idle || now - idle > GAP_ABSURD_NS)
        return;
    uint64_t i = __atomic_fetch_add(&d->gap_idx, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&d->gap_ns[i % TGS_GAP_RING], now - idle, __ATOMIC_RELAXED);
    struct tgs_gap_kinds *g = &tgs_g.gaps;
    if (g->seq == seq && g->kind < TGS_GAP_KINDS)
        g->ring[g->kind][g->next[g->kind]++ % TGS_GAP_RING] = now - idle;
    gap_predict(d, TGS_GAP_OTHER);   /* until the next gap says how it began */
}

/* The job just went idle: wake opportunistic shims waiting for it at once. */
static void wake_waiters(struct tgs_pub *d)
{
    __atomic_add_fetch(&d->idle_futex, 1, __ATOMIC_RELEASE);
    syscall(SYS_futex, &d->idle_futex, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Sleep up to ns, returning early when production goes idle.  Reading the
 * futex word before the busy count means a transition in between changes
 * the word, and FUTEX_WAIT then returns at once: no wake-up is lost.  The
 * word lies in another tenant's pub, mapped read-only: FUTEX_WAIT only
 * reads it. */
void tgs_gate_sleep(uint64_t ns)
{
    uint32_t seq = 0;
    const uint32_t *w = tgs_prod_futex(&seq);
    if (!w) {
        tgs_sleep_ns(ns);   /* already idle: waiting for another reason */
        return;
    }
    struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };
    uint64_t t0 = tgs_now_ns();
    syscall(SYS_futex, w, FUTEX_WAIT, seq, &ts, NULL, 0);
    /* Woken (or the word moved) while production still claims to be busy: that wake
     * did not end a busy phase.  Sleep out the step rather than loop at once: the word
     * is the other tenant's, and its wakes must not make us spin. */
    uint64_t spent = tgs_now_ns() - t0;
    if (spent < ns && tgs_prod_busy())
        tgs_sleep_ns(ns - spent);
}

void tgs_gate_wait(const struct tgs_ctl_header *h)
{
    if (!tgs_gate_on() || !tgs_prod_busy())
        return;
    uint64_t max_ns = (uint64_t)TGS_RELAXED_LOAD(&h->gate_max_wait_us) * 1000ull;
    uint64_t start = tgs_now_ns(), now = start;
    while (tgs_prod_busy() && now - start < max_ns) {
        uint64_t left = max_ns - (now - start);
        tgs_gate_sleep(left < GATE_STEP_NS ? left : GATE_STEP_NS);
        now = tgs_now_ns();
    }
    if (tgs_g.slot)
        TGS_RELAXED_STORE(&tgs_g.slot->heartbeat_ns, now);
}

/* A launch counts in drain.launching from here until the driver has it (tgs_launch_done):
 * before that its stream may still look empty to the drain helper, which was perhaps woken
 * by this very launch.  The add is a full barrier before the dev_active read below, and the
 * helper's exchange one before its read of the count (tgs_gate_idle_drained): either the
 * helper sees this launch in flight, or this launch sees the idle and publishes busy anew. */
void tgs_gate_publish_busy(struct tgs_slot *s, CUstream stream)
{
    __atomic_add_fetch(&tgs_g.drain.launching, 1, __ATOMIC_SEQ_CST);
    tgs_tls.launching = 1;
    if (TGS_RELAXED_LOAD(&tgs_g.dev_active)) {
        tgs_drain_note(stream, 0);
        return;
    }
    struct tgs_pub *d = tgs_g.pub;
    if (!d) {
        if (!__atomic_exchange_n(&tgs_g.gate_warned, 1, __ATOMIC_RELAXED))
            tgs_log(TGS_LOG_WARN, "gate PUBLISH without a valid publish page: not publishing");
        return;
    }
    int expect = 0;
    if (__atomic_compare_exchange_n(&tgs_g.dev_active, &expect, 1, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_RELAXED)) {
        TGS_RELAXED_STORE(&s->dev_active, 1);
        if (__atomic_fetch_add(&d->busy, 1, __ATOMIC_ACQ_REL) == 0)
            gap_note(d);
        tgs_drain_note(stream, 1);
    } else {
        tgs_drain_note(stream, 0);
    }
}

void tgs_launch_done(void)
{
    if (tgs_tls.launching) {
        tgs_tls.launching = 0;
        __atomic_sub_fetch(&tgs_g.drain.launching, 1, __ATOMIC_RELEASE);
    }
}

/* One busy count goes away (ours, or a dead process's): never below zero;
 * the 1 -> 0 change starts a gap (its prediction by how it began) and wakes the
 * waiters. */
static void drop_busy(struct tgs_pub *d, int kind, uint64_t since)
{
    uint64_t now = since ? since : tgs_now_ns();
    uint64_t v = __atomic_load_n(&d->busy, __ATOMIC_RELAXED);
    while (v > 0) {
        /* before the change: whoever sees 0 also sees this gap's start and prediction */
        if (v == 1) {
            gap_predict(d, kind);
            tgs_g.gaps.kind = kind;
            tgs_g.gaps.seq = __atomic_load_n(&d->busy_seq, __ATOMIC_ACQUIRE) + 1;
            __atomic_store_n(&d->idle_since_ns, now, __ATOMIC_RELEASE);
        }
        if (__atomic_compare_exchange_n(&d->busy, &v, v - 1, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
            if (v == 1)
                wake_waiters(d);
            break;
        }
    }
}

void tgs_pub_drop_busy(void)
{
    if (tgs_g.pub)
        drop_busy(tgs_g.pub, TGS_GAP_OTHER, 0);
}

void tgs_gate_idle(void)
{
    if (!TGS_RELAXED_LOAD(&tgs_g.dev_active))
        return;
    if (!__atomic_exchange_n(&tgs_g.dev_active, 0, __ATOMIC_ACQ_REL))
        return;
    if (tgs_g.slot)
        TGS_RELAXED_STORE(&tgs_g.slot->dev_active, 0);
    if (tgs_g.pub)
        drop_busy(tgs_g.pub, TGS_GAP_SYNC, 0);
}

/* The drain helper (drain.c) saw the tails of every stream launched on complete, and no
 * launch since launch_seq was seq0.  A launch that raced the check either went on the fast
 * path before dev_active fell (launch_seq moved), or is still on its way to the driver after
 * its slow path's publish (drain.launching): stay busy, keeping our count; or it took the
 * slow path after dev_active fell and counted itself again (then ours goes).  The gap begins
 * when the helper first saw the work drained (since_ns), not after its settle: so a gap's
 * length, and what FIT predicts from it, does not depend on the settle of the moment. */
int tgs_gate_idle_drained(uint64_t seq0, uint64_t since_ns)
{
    if (!__atomic_exchange_n(&tgs_g.dev_active, 0, __ATOMIC_ACQ_REL))
        return 0;
    if (__atomic_load_n(&tgs_g.launch_seq, __ATOMIC_ACQUIRE) != seq0 ||
        __atomic_load_n(&tgs_g.drain.launching, __ATOMIC_ACQUIRE)) {
        int expect = 0;
        if (__atomic_compare_exchange_n(&tgs_g.dev_active, &expect, 1, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED))
            return 0;
    } else if (tgs_g.slot) {
        TGS_RELAXED_STORE(&tgs_g.slot->dev_active, 0);
    }
    if (tgs_g.pub)
        drop_busy(tgs_g.pub, TGS_GAP_DRAIN, since_ns);
    return 1;
}

/* The drain helper found work on a stream after it published idle, with no launch since: a
 * fast-path launch raced its check.  Busy again, as that launch's slow path would have made
 * it (a new gap in the pub, so FIT samples taken meanwhile are not clean).  1 if this call
 * made it busy, 0 if a launch already had. */
int tgs_gate_busy_again(const CUstream *s, int k)
{
    struct tgs_pub *d = tgs_g.pub;
    int expect = 0;
    if (!d || !__atomic_compare_exchange_n(&tgs_g.dev_active, &expect, 1, 0, __ATOMIC_ACQ_REL,
                                           __ATOMIC_RELAXED))
        return 0;
    if (tgs_g.slot)
        TGS_RELAXED_STORE(&tgs_g.slot->dev_active, 1);
    if (__atomic_fetch_add(&d->busy, 1, __ATOMIC_ACQ_REL) == 0)
        gap_note(d);
    for (int i = 0; i < k; i++)
        tgs_drain_note(s[i], i == 0);
    return 1;
}

/* After a successful synchronize: nothing of ours is queued any more. */
static void all_done(void)
{
    tgs_gate_idle();
    tgs_fit_synced(1);
    if (tgs_g.slot) {
        tgs_inflight_retire_all();
        TGS_RELAXED_STORE(&tgs_g.slot->heartbeat_ns, tgs_now_ns());
        tgs_oversub_synced(); /* oversubscribed: prefetch back, thrashing guard */
    }
}

/* After one stream/event completed: everything if it was the last work we
 * launched, else just look at the recorded in-flight events. */
static void stream_done(CUstream s)
{
    if (s == __atomic_load_n(&tgs_g.last_stream, __ATOMIC_RELAXED))
        all_done();
    else if (tgs_g.slot) {
        tgs_inflight_poll();
        tgs_fit_synced(0);
        tgs_oversub_synced();
    }
}

#define SYNC_PROLOGUE(name) \
    TGS_HIT(name); \
    tgs_ensure_init(); \
    if (!tgs_g.real.name) \
        return tgs_g.real.handle ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_NOT_INITIALIZED

/* A hook that calls the real function of the same name and, when it
 * succeeded, tells `then` what completed. */
#define DONE_HOOK(name, params, args, then) \
    TGS_EXPORT CUresult name params \
    { \
        SYNC_PROLOGUE(name); \
        CUresult r = tgs_g.real.name args; \
        if (r == CUDA_SUCCESS) \
            then; \
        return r; \
    }

/* As DONE_HOOK for a call that blocks until the GPU has done the work: while it blocks,
 * the drain helper knows the host waits on the GPU (drain.c: such a gap is the
 * synchronize's, not a drain's). */
#define BLOCKING_HOOK(name, params, args, then) \
    TGS_EXPORT CUresult name params \
    { \
        SYNC_PROLOGUE(name); \
        __atomic_add_fetch(&tgs_g.drain.syncing, 1, __ATOMIC_RELEASE); \
        CUresult r = tgs_g.real.name args; \
        __atomic_sub_fetch(&tgs_g.drain.syncing, 1, __ATOMIC_RELEASE); \
        if (r == CUDA_SUCCESS) \
            then; \
        return r; \
    }

BLOCKING_HOOK(cuCtxSynchronize, (void), (), all_done())
BLOCKING_HOOK(cuCtxSynchronize_v2, (CUcontext ctx), (ctx), all_done())
BLOCKING_HOOK(cuStreamSynchronize, (CUstream hStream), (hStream), stream_done(hStream))
BLOCKING_HOOK(cuStreamSynchronize_ptsz, (CUstream hStream), (hStream),
              stream_done(hStream ? hStream : TGS_CU_STREAM_PER_THREAD))
DONE_HOOK(cuStreamQuery, (CUstream hStream), (hStream), stream_done(hStream))
DONE_HOOK(cuStreamQuery_ptsz, (CUstream hStream), (hStream),
          stream_done(hStream ? hStream : TGS_CU_STREAM_PER_THREAD))

/* An event covers our last launch if it was recorded after it. */
static void event_done(CUevent e)
{
    if (e && e == __atomic_load_n(&tgs_g.last_event, __ATOMIC_RELAXED) &&
        __atomic_load_n(&tgs_g.last_event_seq, __ATOMIC_RELAXED) ==
            __atomic_load_n(&tgs_g.launch_seq, __ATOMIC_RELAXED))
        all_done();
    else if (tgs_g.slot) {
        tgs_inflight_poll();
        tgs_fit_synced(0);
    }
}

BLOCKING_HOOK(cuEventSynchronize, (CUevent hEvent), (hEvent), event_done(hEvent))
DONE_HOOK(cuEventQuery, (CUevent hEvent), (hEvent), event_done(hEvent))

static void note_record(CUevent e)
{
    __atomic_store_n(&tgs_g.last_event_seq, __atomic_load_n(&tgs_g.launch_seq, __ATOMIC_RELAXED),
                     __ATOMIC_RELAXED);
    __atomic_store_n(&tgs_g.last_event, e, __ATOMIC_RELAXED);
}

/* An event recorded into a capture covers no work that runs: not noted. */
DONE_HOOK(cuEventRecord, (CUevent hEvent, CUstream hStream), (hEvent, hStream),
          if (!tgs_capturing(hStream, 0)) note_record(hEvent))
DONE_HOOK(cuEventRecord_ptsz, (CUevent hEvent, CUstream hStream), (hEvent, hStream),
          if (!tgs_capturing(hStream, 1)) note_record(hEvent))
