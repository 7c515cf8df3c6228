/*
 * libshim/sync_hooks.c: synchronize/query hooks and production-activity
 * gating through the device segment (segment.h, TGS_GATE_*).
 *
 * PUBLISH: a production process counts itself in dev->prod_active from its
 * first launch after being idle until a synchronize (or a successful query of
 * its last launched work) returns.  At the device-wide transitions only (the
 * add that finds 0, the CAS that leaves 0) it also keeps the gap history that
 * FIT (fit.c) predicts from: idle_since_ns, busy_seq, gap_ns[], gap_pred_ns.
 * WAIT: an opportunistic launch sleeps in ~75 us steps while prod_active > 0,
 * at most gate_max_wait_us, then goes.  Without a valid device segment
 * gating is off (one stderr line).
 */
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shim.h"

#define GATE_STEP_NS 75000ull
#define GAP_ABSURD_NS 10000000000ull /* a longer "gap" is a pause, not a pattern */
#define GAP_MARGIN_NS 50000ull       /* + 1/50: host wake-up jitter on both sides */

struct tgs_dev_segment *tgs_gate_dev(void)
{
    if (tgs_g.dev)
        return tgs_g.dev;
    if (!__atomic_exchange_n(&tgs_g.gate_warned, 1, __ATOMIC_RELAXED))
        tgs_log(TGS_LOG_WARN, "gating requested but the device segment (device-<idx>.seg next to "
                              "the job segment) is missing or invalid: gating is off");
    return NULL;
}

static int have_dev(void)
{
    return tgs_gate_dev() != NULL;
}

/* Production went busy device-wide: the gap that just ended joins the ring and
 * the prediction becomes its minimum less the margin (conservative: a gap
 * shorter than any recent one is what hurts production). */
static void gap_note(struct tgs_dev_segment *d)
{
    uint64_t now = tgs_now_ns();
    uint64_t idle = __atomic_load_n(&d->idle_since_ns, __ATOMIC_ACQUIRE);
    __atomic_add_fetch(&d->busy_seq, 1, __ATOMIC_RELEASE);
    if (!idle || now <= idle || now - idle > GAP_ABSURD_NS)
        return;
    uint64_t i = __atomic_fetch_add(&d->gap_idx, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&d->gap_ns[i % TGS_GAP_RING], now - idle, __ATOMIC_RELAXED);
    uint64_t lo = UINT64_MAX;
    for (int k = 0; k < TGS_GAP_RING; k++) {
        uint64_t g = __atomic_load_n(&d->gap_ns[k], __ATOMIC_RELAXED);
        if (g && g < lo)
            lo = g;
    }
    uint64_t margin = lo / 50 + GAP_MARGIN_NS;
    __atomic_store_n(&d->gap_pred_ns, lo > margin ? lo - margin : 1, __ATOMIC_RELEASE);
}

/* The GPU just went idle for production: wake opportunistic shims waiting
 * for it at once (a syscall only when someone waits). */
static void wake_waiters(struct tgs_dev_segment *d)
{
    __atomic_add_fetch(&d->idle_futex, 1, __ATOMIC_RELEASE);
    if (__atomic_load_n(&d->waiters, __ATOMIC_ACQUIRE))
        syscall(SYS_futex, &d->idle_futex, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Sleep up to ns, returning early when production goes idle.  Reading the
 * futex word before prod_active means a transition in between changes the
 * word, and FUTEX_WAIT then returns at once: no wake-up is lost. */
void tgs_gate_sleep(struct tgs_dev_segment *d, uint64_t ns)
{
    uint32_t seq = __atomic_load_n(&d->idle_futex, __ATOMIC_ACQUIRE);
    if (!__atomic_load_n(&d->prod_active, __ATOMIC_ACQUIRE)) {
        tgs_sleep_ns(ns);   /* already idle: waiting for another reason */
        return;
    }
    struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };
    __atomic_add_fetch(&d->waiters, 1, __ATOMIC_ACQ_REL);
    syscall(SYS_futex, &d->idle_futex, FUTEX_WAIT, seq, &ts, NULL, 0);
    __atomic_sub_fetch(&d->waiters, 1, __ATOMIC_ACQ_REL);
}

void tgs_gate_wait(struct tgs_seg_header *h)
{
    if (!have_dev() || !TGS_RELAXED_LOAD(&tgs_g.dev->prod_active))
        return;
    uint64_t max_ns = (uint64_t)TGS_RELAXED_LOAD(&h->gate_max_wait_us) * 1000ull;
    uint64_t start = tgs_now_ns(), now = start;
    while (TGS_RELAXED_LOAD(&tgs_g.dev->prod_active) && now - start < max_ns) {
        uint64_t left = max_ns - (now - start);
        tgs_gate_sleep(tgs_g.dev, left < GATE_STEP_NS ? left : GATE_STEP_NS);
        now = tgs_now_ns();
    }
    if (tgs_g.slot)
        TGS_RELAXED_STORE(&tgs_g.slot->heartbeat_ns, now);
}

void tgs_gate_publish_busy(struct tgs_slot *s)
{
    if (TGS_RELAXED_LOAD(&tgs_g.dev_active) || !have_dev())
        return;
    int expect = 0;
    if (__atomic_compare_exchange_n(&tgs_g.dev_active, &expect, 1, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_RELAXED)) {
        if (__atomic_fetch_add(&tgs_g.dev->prod_active, 1, __ATOMIC_ACQ_REL) == 0)
            gap_note(tgs_g.dev);
        TGS_RELAXED_STORE(&s->dev_active, 1);
    }
}

void tgs_gate_idle(void)
{
    if (!TGS_RELAXED_LOAD(&tgs_g.dev_active))
        return;
    if (!__atomic_exchange_n(&tgs_g.dev_active, 0, __ATOMIC_ACQ_REL))
        return;
    if (tgs_g.slot)
        TGS_RELAXED_STORE(&tgs_g.slot->dev_active, 0);
    if (!tgs_g.dev)
        return;
    /* never below zero: the controller may have recomputed the count meanwhile */
    struct tgs_dev_segment *d = tgs_g.dev;
    uint64_t now = tgs_now_ns();
    uint64_t v = __atomic_load_n(&d->prod_active, __ATOMIC_RELAXED);
    while (v > 0) {
        /* before the change: whoever sees 0 also sees this gap's start */
        if (v == 1)
            __atomic_store_n(&d->idle_since_ns, now, __ATOMIC_RELEASE);
        if (__atomic_compare_exchange_n(&d->prod_active, &v, v - 1, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
            if (v == 1)
                wake_waiters(d);
            break;
        }
    }
}

/* After a successful synchronize: nothing of ours is queued any more. */
static void all_done(void)
{
    tgs_gate_idle();
    tgs_fit_synced(1);
    if (tgs_g.slot) {
        tgs_inflight_retire_all();
        TGS_RELAXED_STORE(&tgs_g.slot->heartbeat_ns, tgs_now_ns());
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

DONE_HOOK(cuCtxSynchronize, (void), (), all_done())
DONE_HOOK(cuCtxSynchronize_v2, (CUcontext ctx), (ctx), all_done())
DONE_HOOK(cuStreamSynchronize, (CUstream hStream), (hStream), stream_done(hStream))
DONE_HOOK(cuStreamSynchronize_ptsz, (CUstream hStream), (hStream), stream_done(hStream))
DONE_HOOK(cuStreamQuery, (CUstream hStream), (hStream), stream_done(hStream))
DONE_HOOK(cuStreamQuery_ptsz, (CUstream hStream), (hStream), stream_done(hStream))

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

DONE_HOOK(cuEventSynchronize, (CUevent hEvent), (hEvent), event_done(hEvent))
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
