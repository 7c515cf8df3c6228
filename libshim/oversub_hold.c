/*
 * libshim/oversub_hold.c: the thrashing guard of an oversubscribed
 * opportunistic job (docs/oversubscription.md, "Thrashing guard").
 *
 * When production has taken the memory our working set needs (the device is
 * full and bytes of ours are not back: oversub_watch.c), every kernel of the
 * job would pay migrations and share the GPU with production for that long.
 * So the job is put on hold: `hold` is set, the launch fast path reads it (one
 * relaxed load) and takes the slow path, and there the launch waits, looking
 * every HOLD_STEP_NS: as soon as production has freed enough, it prefetches
 * our ranges back, waits for the prefetch to complete, clears the hold and
 * goes.  A wait is bounded by TGS_OVERSUB_PAUSE_MS: then this one launch goes
 * anyway (and pays its migration) and the next one waits again, so a job
 * whose memory never comes back runs one kernel per pause: slow, never
 * wedged.
 *
 * Who sets the hold: any look that finds the working set short, at once (a
 * synchronize's look, and the watcher's).  The watcher is one detached
 * thread per process, started at the first managed range; it sleeps on a
 * condition variable while the process has no managed range, else wakes every
 * TGS_OVERSUB_WATCH_MS, makes the last range's context current and reads
 * cuMemGetInfo: nothing else (no prefetch, no stream, no launch; it skips its
 * look while a job thread holds the lock or while the hold is set).  Exit:
 * tgs_oversub_stop asks it to stop and waits a bounded time; fork: the child
 * has no watcher, it is started again at its first range.
 */
#include <time.h>
#include <unistd.h>

#include "shim.h"

#define HOLD_STEP_NS 2000000ull      /* a held launch looks this often */
#define DRAIN_STEP_NS 1000000ull     /* ... and polls its prefetch this often */

static struct tgs_oversub *ov(void) { return &tgs_g.oversub; }

void tgs_oversub_set_hold_locked(void)
{
    struct tgs_oversub *o = ov();
    /* the guard protects production: with no production job on the device (the table
     * says so) the pressure is the job's own or other opportunistic jobs', and holding
     * would only stop this job (without a table we cannot tell: hold) */
    if (TGS_RELAXED_LOAD(&o->hold) || tgs_prod_present() == 0)
        return;
    o->holds++;
    TGS_RELAXED_STORE(&o->hold, 1);
    tgs_log(TGS_LOG_INFO, "oversubscription: the working set does not fit the GPU's free "
                          "memory; launches wait for it (thrashing guard, hold %llu)",
            (unsigned long long)o->holds);
}

/* The watcher's look (mu held): free memory of its context's device, no prefetch. */
static void watch_look_locked(CUcontext *mine)
{
    struct tgs_oversub *o = ov();
    size_t f = 0, t = 0;
    if (!o->n || !o->wctx || TGS_RELAXED_LOAD(&o->hold) || tgs_capture_any() ||
        !tgs_g.real.cuCtxSetCurrent || !tgs_g.real.cuMemGetInfo_v2)
        return;
    if (*mine != o->wctx) {
        if (tgs_g.real.cuCtxSetCurrent(o->wctx) != CUDA_SUCCESS)
            return;
        *mine = o->wctx;
    }
    if (tgs_g.real.cuMemGetInfo_v2(&f, &t) != CUDA_SUCCESS)
        return;
    uint64_t out = tgs_oversub_note_locked(o->wdev, f, t);
    if (f < tgs_oversub_margin(t) && out && tgs_g.opt.oversub_pause_ns && tgs_oversub_on())
        tgs_oversub_set_hold_locked();
}

static void *watch_main(void *arg)
{
    (void)arg;
    struct tgs_oversub *o = ov();
    CUcontext mine = NULL;
    pthread_mutex_lock(&o->mu);
    while (!o->wstop) {
        if (!o->n) {
            pthread_cond_wait(&o->wcv, &o->mu);
            continue;
        }
        pthread_mutex_unlock(&o->mu);
        tgs_sleep_ns(tgs_g.opt.oversub_watch_ns);
        pthread_mutex_lock(&o->mu);
        if (!o->wstop)
            watch_look_locked(&mine);
    }
    o->wstopped = 1;
    pthread_cond_broadcast(&o->wcv);
    pthread_mutex_unlock(&o->mu);
    return NULL;
}

void tgs_oversub_watch_start_locked(void)
{
    struct tgs_oversub *o = ov();
    int pid = (int)getpid();
    if (o->wpid == pid || !tgs_g.opt.oversub_watch_ns || !tgs_g.opt.oversub_pause_ns) {
        pthread_cond_broadcast(&o->wcv);
        return;
    }
    o->wstop = o->wstopped = 0;
    int r = tgs_spawn_helper(watch_main, "tgs-ovwatch");
    o->wpid = pid; /* on failure too: not retried at every range */
    if (r != 0) {
        o->wstopped = 1;
        tgs_log(TGS_LOG_WARN, "oversubscription watcher thread: %d; evictions are seen at "
                              "synchronize calls only", r);
        return;
    }
}

/* A launch on the slow path of a job with managed memory (not on hold): a look without
 * prefetch, so that an eviction since the watcher's last look holds this very launch. */
void tgs_oversub_launch_look(void)
{
    struct tgs_oversub *o = ov();
    size_t f = 0, t = 0;
    CUdevice dev = 0;
    if (!tgs_g.opt.oversub_pause_ns || tgs_capture_any() || !tgs_g.real.cuMemGetInfo_v2 ||
        !tgs_g.real.cuCtxGetDevice || pthread_mutex_trylock(&o->mu) != 0)
        return;
    if (tgs_g.real.cuCtxGetDevice(&dev) == CUDA_SUCCESS &&
        tgs_g.real.cuMemGetInfo_v2(&f, &t) == CUDA_SUCCESS &&
        tgs_oversub_note_locked((int)dev, f, t) && f < tgs_oversub_margin(t) &&
        tgs_oversub_on())
        tgs_oversub_set_hold_locked();
    pthread_mutex_unlock(&o->mu);
}

/* Wait (mu not held) until the prefetch stream is done, at most until deadline. */
static void wait_prefetch(CUstream s, uint64_t deadline)
{
    if (!s || !tgs_g.real.cuStreamQuery)
        return;
    while (tgs_g.real.cuStreamQuery(s) == CUDA_ERROR_NOT_READY && tgs_now_ns() < deadline)
        tgs_sleep_ns(DRAIN_STEP_NS);
}

void tgs_oversub_hold_wait(void)
{
    struct tgs_oversub *o = ov();
    uint64_t max = tgs_g.opt.oversub_pause_ns, t0 = tgs_now_ns(), now = t0, got = 0;
    if (tgs_capture_any() || !max) /* no prefetch may go meanwhile: do not hold */
        return;
    pthread_mutex_lock(&o->mu);
    for (;;) {
        uint64_t m = 0;
        int short_ = TGS_RELAXED_LOAD(&o->hold) ? tgs_oversub_look_locked(1, &m) : 0;
        got += m;
        if (!short_) {
            /* prefetch back first, then release: the kernels find their pages there */
            CUstream s = got ? tgs_oversub_stream_locked() : NULL;
            pthread_mutex_unlock(&o->mu);
            wait_prefetch(s, t0 + max);
            pthread_mutex_lock(&o->mu);
            if (TGS_RELAXED_LOAD(&o->hold)) {
                TGS_RELAXED_STORE(&o->hold, 0);
                tgs_log(TGS_LOG_INFO, "oversubscription: memory is back; launches resume "
                                      "after %llu ms", (unsigned long long)((tgs_now_ns() - t0) /
                                                                           1000000ull));
            }
            break;
        }
        if (now - t0 >= max) {
            tgs_log(TGS_LOG_INFO, "oversubscription: held %llu ms, memory not back: one "
                                  "launch goes", (unsigned long long)((now - t0) / 1000000ull));
            break; /* the hold stays: the next launch waits again */
        }
        pthread_mutex_unlock(&o->mu);
        uint64_t left = max - (now - t0);
        tgs_sleep_ns(left < HOLD_STEP_NS ? left : HOLD_STEP_NS);
        now = tgs_now_ns();
        if (tgs_g.slot)
            TGS_RELAXED_STORE(&tgs_g.slot->heartbeat_ns, now);
        pthread_mutex_lock(&o->mu);
    }
    o->held_ns += tgs_now_ns() - t0;
    pthread_mutex_unlock(&o->mu);
}

void tgs_oversub_hold_reset(void)
{
    struct tgs_oversub *o = ov();
    pthread_cond_init(&o->wcv, NULL);
    o->wpid = o->wstop = o->wstopped = 0;
    o->wctx = NULL;
    o->hold = 0;
}

void tgs_oversub_stop(void)
{
    struct tgs_oversub *o = ov();
    tgs_stop_helper(&o->mu, &o->wcv, &o->wpid, &o->wstop, &o->wstopped);
}
