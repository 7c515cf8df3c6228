/*
 * libshim/oversub_watch.c: what an oversubscribed opportunistic job knows
 * about its managed memory, and the looks that keep it (docs/
 * oversubscription.md, "Prefetch back" and "Thrashing guard").  Never on the
 * launch fast path.
 *
 * The shim cannot ask the driver which pages are resident (no range or
 * pointer attribute says so), so it keeps its own belief per managed range:
 * a prefix `in` of bytes it prefetched while the device had room for them.
 * A look reads the device's free memory (the real cuMemGetInfo):
 *  - free fell under the margin since the last look: someone filled the
 *    device, and the driver may have moved our pages to the host: nothing is
 *    believed resident any more;
 *  - there is room (free over the margin): prefetch back, on a stream of the
 *    job's own, oldest range first, what fits (a bulk copy instead of the
 *    faults of the next kernels);
 *  - the device is full and bytes of ours are not back: the working set does
 *    not fit what is left on the GPU (a device with room is no thrashing: a
 *    kernel's faults then bring pages in without evicting): the job is put on
 *    hold (oversub_hold.c: its launches wait until the memory is back).
 * Looks happen on a successful synchronize (at most every TGS_OVERSUB_CHECK_MS,
 * with prefetch), in the watcher thread (every TGS_OVERSUB_WATCH_MS, no
 * prefetch: it only sets the hold), on a launch's slow path (no prefetch) and in a held
 * launch (oversub_hold.c).
 */
#include <stdlib.h>
#include <string.h>

#include "shim.h"

#define MARGIN_MIN (1ull << 20)
#define MARGIN_MAX (64ull << 20)
#define PAGE 4096ull
#define TGS_CU_STREAM_NON_BLOCKING 1u

static struct tgs_oversub *ov(void) { return &tgs_g.oversub; }

/* free memory under this means the device is full */
uint64_t tgs_oversub_margin(uint64_t total)
{
    uint64_t m = total / 256;
    return m < MARGIN_MIN ? MARGIN_MIN : m > MARGIN_MAX ? MARGIN_MAX : m;
}

/* In a forked child (lifecycle.c): no CUDA, and mu may have been held by a thread that is not
 * there. */
void tgs_oversub_reset(void)
{
    struct tgs_oversub *o = ov();
    pthread_mutex_init(&o->mu, NULL);
    free(o->r);
    o->r = NULL;
    o->n = o->cap = 0;
    __builtin_memset(o->d, 0, sizeof o->d);
    o->hold = 0;
    tgs_oversub_hold_reset(); /* no watcher thread in the child */
    pthread_mutex_init(&o->free_mu, NULL); /* deferred frees: the parent's events */
    free(o->pend);
    o->pend = NULL;
    o->npend = o->cappend = 0;
}

void tgs_oversub_track(uint64_t ptr, uint64_t bytes, int host)
{
    struct tgs_oversub *o = ov();
    CUdevice dev = 0;
    if (!tgs_g.real.cuCtxGetDevice || tgs_g.real.cuCtxGetDevice(&dev) != CUDA_SUCCESS)
        dev = 0;
    pthread_mutex_lock(&o->mu);
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 64;
        struct tgs_orange *r = realloc(o->r, cap * sizeof *r);
        if (!r) {
            pthread_mutex_unlock(&o->mu);
            tgs_log(TGS_LOG_WARN, "oversubscription: no memory to track a range; it is not "
                                  "prefetched back");
            return;
        }
        o->r = r;
        o->cap = cap;
    }
    o->r[o->n] = (struct tgs_orange){ .ptr = ptr, .bytes = bytes, .in = 0, .dev = (int)dev,
                                      .host = host };
    __atomic_store_n(&o->n, o->n + 1, __ATOMIC_RELAXED); /* read unlocked by the hooks */
    __atomic_store_n(&o->next_ns, 0, __ATOMIC_RELAXED); /* look at the next synchronize */
    CUcontext cur = NULL;
    if (tgs_g.real.cuCtxGetCurrent && tgs_g.real.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur) {
        o->wctx = cur; /* the watcher looks at the device of the last range */
        o->wdev = (int)dev;
    }
    tgs_oversub_watch_start_locked();
    pthread_mutex_unlock(&o->mu);
}

void tgs_oversub_forget(uint64_t ptr)
{
    struct tgs_oversub *o = ov();
    if (!__atomic_load_n(&o->n, __ATOMIC_RELAXED))
        return;
    pthread_mutex_lock(&o->mu);
    for (size_t i = 0; i < o->n; i++) {
        if (o->r[i].ptr != ptr)
            continue;
        memmove(&o->r[i], &o->r[i + 1], (o->n - i - 1) * sizeof *o->r);
        __atomic_store_n(&o->n, o->n - 1, __ATOMIC_RELAXED);
        break;
    }
    pthread_mutex_unlock(&o->mu);
}

/* Whether device dev has its entry in d[]: every device index is below TGS_MAX_DEVICES
 * (segment.h); one past it is said once and left alone (neither prefetched back nor
 * guarded). */
static int tracked(int dev)
{
    if (dev >= 0 && dev < TGS_MAX_DEVICES)
        return 1;
    if (dev >= 0 && !__atomic_exchange_n(&ov()->past_warned, 1, __ATOMIC_RELAXED))
        tgs_log(TGS_LOG_WARN, "oversubscription: device %d is past the %d devices the shim "
                              "tracks: its memory is neither prefetched back nor guarded",
                dev, TGS_MAX_DEVICES);
    return 0;
}

/* The current context's device and the job's own prefetch stream there (0), or -1. */
static int ensure_stream_locked(void)
{
    struct tgs_oversub *o = ov();
    CUcontext cur = NULL;
    CUdevice dev = 0;
    if (!tgs_g.real.cuCtxGetCurrent || tgs_g.real.cuCtxGetCurrent(&cur) != CUDA_SUCCESS ||
        !cur || !tgs_g.real.cuCtxGetDevice || tgs_g.real.cuCtxGetDevice(&dev) != CUDA_SUCCESS ||
        !tracked((int)dev))
        return -1;
    o->dev = (int)dev;
    if (o->d[dev].stream && o->d[dev].ctx == cur)
        return 0;
    CUstream s = NULL;
    if (!tgs_g.real.cuStreamCreate ||
        tgs_g.real.cuStreamCreate(&s, TGS_CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
        return -1;
    /* a stream of another context stays with it (destroying it needs that context) */
    o->d[dev].stream = s;
    o->d[dev].ctx = cur;
    return 0;
}

static CUresult prefetch(uint64_t p, uint64_t n)
{
    struct tgs_oversub *o = ov();
    if (tgs_g.real.cuMemPrefetchAsync)
        return tgs_g.real.cuMemPrefetchAsync(p, (size_t)n, o->dev, o->d[o->dev].stream);
    if (tgs_g.real.cuMemPrefetchAsync_v2) {
        CUmemLocation loc = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = o->dev };
        return tgs_g.real.cuMemPrefetchAsync_v2(p, (size_t)n, loc, 0, o->d[o->dev].stream);
    }
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* Prefetch, oldest range first, what fits in room; returns the bytes issued. */
static uint64_t bring_back_locked(uint64_t room)
{
    struct tgs_oversub *o = ov();
    uint64_t moved = 0;
    for (size_t i = 0; i < o->n && room >= PAGE; i++) {
        struct tgs_orange *r = &o->r[i];
        uint64_t n = r->bytes - r->in;
        if (!n || r->dev != o->dev || r->host)
            continue;
        if (n > room)
            n = room & ~(PAGE - 1);
        CUresult e = prefetch(r->ptr + r->in, n);
        if (e != CUDA_SUCCESS) {
            tgs_log(TGS_LOG_INFO, "oversubscription: prefetch of %llu bytes failed: %d",
                    (unsigned long long)n, (int)e);
            o->d[o->dev].stream = NULL; /* made again at the next look */
            break;
        }
        r->in += n;
        room -= n;
        moved += n;
    }
    return moved;
}

/* Ranges advised to the host because the job was past mem_quota when they were made get
 * the device back (advice unset, then prefetched like the others) once the job's memory
 * less its host ranges leaves room for them under mem_quota (frees, a raised quota): oldest
 * first.  Never the other way: lowering the quota does not move what is resident. */
static void promote_locked(void)
{
    struct tgs_oversub *o = ov();
    uint64_t host = 0, limit = 0, used = 0;
    for (size_t i = 0; i < o->n; i++)
        host += o->r[i].host ? o->r[i].bytes : 0;
    if (!host || !tgs_g.real.cuMemAdvise)
        return;
    uint64_t quota = TGS_RELAXED_LOAD(&tgs_g.ctl->mem_quota);
    tgs_mem_view(&limit, &used);
    uint64_t dev_side = used > host ? used - host : 0;
    for (size_t i = 0; i < o->n; i++) {
        struct tgs_orange *r = &o->r[i];
        if (!r->host)
            continue;
        if (quota != TGS_QUOTA_UNLIMITED && (dev_side + r->bytes < dev_side ||
                                             dev_side + r->bytes > quota))
            break;
        if (tgs_g.real.cuMemAdvise(r->ptr, (size_t)r->bytes,
                                   CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION, 0) != CUDA_SUCCESS)
            break;
        r->host = 0;
        r->in = 0;
        dev_side += r->bytes;
    }
}

/* What a look read from device dev (free f of total t) says about our ranges there: a fall
 * under the margin since the last look clears the belief; returns the bytes of ours not
 * believed resident (ranges that prefer the host not counted). */
uint64_t tgs_oversub_note_locked(int dev, uint64_t f, uint64_t t)
{
    struct tgs_oversub *o = ov();
    uint64_t m = tgs_oversub_margin(t), out = 0;
    if (!tracked(dev))
        return 0;
    if (f < m && (!o->d[dev].seen || o->d[dev].last_free >= m))
        for (size_t i = 0; i < o->n; i++) /* the device filled up: maybe evicted */
            if (o->r[i].dev == dev)
                o->r[i].in = 0;
    for (size_t i = 0; i < o->n; i++)
        if (o->r[i].dev == dev && !o->r[i].host)
            out += o->r[i].bytes - o->r[i].in;
    o->d[dev].last_free = f;
    o->d[dev].seen = 1;
    return out;
}

/* One look at the current context's device: prefetch back what fits.  Returns 1 when the
 * working set does not fit: the device is full and bytes of ours are not back; strict (a
 * held launch's resume test): bytes of ours are still not back after the prefetch.  *moved
 * (may be NULL): the bytes this look prefetched. */
int tgs_oversub_look_locked(int strict, uint64_t *moved)
{
    struct tgs_oversub *o = ov();
    size_t f = 0, t = 0;
    if (moved)
        *moved = 0;
    /* the current context's device: its free memory, its ranges (a job may use several) */
    if (ensure_stream_locked() != 0 || !tgs_g.real.cuMemGetInfo_v2 ||
        tgs_g.real.cuMemGetInfo_v2(&f, &t) != CUDA_SUCCESS)
        return 0;
    uint64_t m = tgs_oversub_margin(t);
    tgs_oversub_note_locked(o->dev, f, t);
    promote_locked();
    uint64_t out = 0, got = 0;
    for (size_t i = 0; i < o->n; i++)
        if (o->r[i].dev == o->dev && !o->r[i].host)
            out += o->r[i].bytes - o->r[i].in;
    if (out && f > m) {
        got = bring_back_locked(f - m);
        o->prefetched += got;
        out -= got;
    }
    o->d[o->dev].last_free = f - got; /* what we took ourselves is no sign of pressure */
    if (moved)
        *moved = got;
    return strict ? out != 0 : f < m && out != 0;
}

/* The prefetch stream of the current look's device (NULL: none). */
CUstream tgs_oversub_stream_locked(void)
{
    struct tgs_oversub *o = ov();
    return o->dev >= 0 && o->dev < TGS_MAX_DEVICES ? o->d[o->dev].stream : NULL;
}

void tgs_oversub_synced(void)
{
    struct tgs_oversub *o = ov();
    if (__atomic_load_n(&o->npend, __ATOMIC_RELAXED))
        tgs_oversub_reap(0); /* deferred frees whose stream work is done */
    if (!__atomic_load_n(&o->n, __ATOMIC_RELAXED) || tgs_capture_any() || !tgs_oversub_on())
        return;
    uint64_t now = tgs_now_ns();
    if (now < __atomic_load_n(&o->next_ns, __ATOMIC_RELAXED))
        return;
    if (pthread_mutex_trylock(&o->mu) != 0)
        return; /* another thread (or the watcher) looks */
    __atomic_store_n(&o->next_ns, now + tgs_g.opt.oversub_check_ns, __ATOMIC_RELAXED);
    /* the working set does not fit: the next launch waits (oversub_hold.c), which also
     * clears the hold once the memory is back */
    if (tgs_oversub_look_locked(0, NULL) && tgs_g.opt.oversub_pause_ns)
        tgs_oversub_set_hold_locked();
    pthread_mutex_unlock(&o->mu);
}
