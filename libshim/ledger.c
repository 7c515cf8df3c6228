/*
 * libshim/ledger.c: memory admission against the job quota (segment.h's
 * ledger protocol) or, without a segment, against the static TGS_MEM_LIMIT.
 *
 * The ledger lock is an OFD lock on the segment file, which does not exclude
 * other threads of this process (they share our open file description), so a
 * process mutex is taken around it.
 */
#include "shim.h"

static void ledger_enter(struct tgs_seg_header *h)
{
    pthread_mutex_lock(&tgs_g.ledger_mu);
    tgs_ofd_lock(tgs_g.fd, TGS_SEG_LOCK_LEDGER, 1);
    if (h->ledger_dirty) { /* the previous holder died mid-update */
        uint64_t sum = 0;
        for (uint32_t i = 0; i < h->nslots; i++) {
            const struct tgs_slot *s = (const struct tgs_slot *)((const char *)h + h->header_size +
                                                                 (size_t)i * h->slot_size);
            sum += s->mem_used;
        }
        h->mem_used = sum;
    }
    h->ledger_dirty = 1;
}

static void ledger_exit(struct tgs_seg_header *h)
{
    h->ledger_dirty = 0;
    tgs_ofd_unlock(tgs_g.fd, TGS_SEG_LOCK_LEDGER);
    pthread_mutex_unlock(&tgs_g.ledger_mu);
}

/* Holding slot s's lock: return its memory to the job, free the slot. */
void tgs_reclaim_slot_locked(struct tgs_slot *s)
{
    struct tgs_seg_header *h = tgs_g.hdr;
    ledger_enter(h);
    h->mem_used = h->mem_used >= s->mem_used ? h->mem_used - s->mem_used : 0;
    s->mem_used = 0;
    for (int i = 0; i < TGS_SEG_LANES; i++) {
        h->retired_launches += TGS_RELAXED_LOAD(&s->lanes[i].launches);
        h->retired_work += TGS_RELAXED_LOAD(&s->lanes[i].work);
        h->retired_throttled_ns += TGS_RELAXED_LOAD(&s->lanes[i].throttled_ns);
    }
    ledger_exit(h);
    if (s->dev_active && tgs_g.dev) {
        uint64_t v = __atomic_load_n(&tgs_g.dev->prod_active, __ATOMIC_RELAXED);
        while (v > 0 && !__atomic_compare_exchange_n(&tgs_g.dev->prod_active, &v, v - 1, 0,
                                                      __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
        }
    }
    s->heartbeat_ns = s->inflight_work = s->oom_count = s->alloc_count = 0;
    s->dev_active = 0;
    s->pid = 0;
    s->lanes_used = 0;
    __builtin_memset(s->lanes, 0, sizeof(s->lanes));
    __atomic_store_n(&s->state, TGS_SLOT_FREE, __ATOMIC_RELEASE);
}

static int add_fits(uint64_t used, uint64_t n, uint64_t quota)
{
    return quota == TGS_QUOTA_UNLIMITED || (n <= quota && used <= quota - n);
}

/* One stderr line per process, at the first refusal (never one per call):
 * the program only sees CUDA_ERROR_OUT_OF_MEMORY, this says why. */
static void report_refusal(uint64_t bytes, uint64_t used, uint64_t quota)
{
    if (__atomic_exchange_n(&tgs_g.quota_reported, 1, __ATOMIC_RELAXED))
        return;
    char job[65] = "TGS_MEM_LIMIT";
    if (tgs_g.hdr)
        snprintf(job, sizeof job, "%.64s", tgs_g.hdr->job_name);
    tgs_log(TGS_LOG_ERROR,
            "job '%s': the memory quota refused an allocation of %llu bytes (quota %llu, in use "
            "%llu); the program gets CUDA_ERROR_OUT_OF_MEMORY (said once per process)",
            job, (unsigned long long)bytes, (unsigned long long)quota,
            (unsigned long long)used);
}

int tgs_mem_admit(uint64_t bytes)
{
    struct tgs_slot *s = tgs_slot();
    if (s) {
        struct tgs_seg_header *h = tgs_g.hdr;
        TGS_RELAXED_STORE(&s->heartbeat_ns, tgs_now_ns());
        ledger_enter(h);
        uint64_t used = h->mem_used, quota = TGS_RELAXED_LOAD(&h->mem_quota);
        int ok = add_fits(used, bytes, quota);
        if (ok) {
            s->mem_used += bytes;
            h->mem_used += bytes;
            if (h->mem_used > h->mem_peak)
                h->mem_peak = h->mem_used;
        }
        ledger_exit(h);
        if (ok)
            TGS_RELAXED_STORE(&s->alloc_count, s->alloc_count + 1);
        else
            TGS_RELAXED_STORE(&s->oom_count, s->oom_count + 1);
        if (!ok)
            report_refusal(bytes, used, quota);
        return ok ? 0 : -1;
    }
    if (tgs_g.opt.mem_limit == TGS_QUOTA_UNLIMITED)
        return 0;
    pthread_mutex_lock(&tgs_g.ledger_mu);
    uint64_t used = tgs_g.local_used;
    int ok = add_fits(used, bytes, tgs_g.opt.mem_limit);
    if (ok)
        tgs_g.local_used += bytes;
    pthread_mutex_unlock(&tgs_g.ledger_mu);
    if (!ok)
        report_refusal(bytes, used, tgs_g.opt.mem_limit);
    return ok ? 0 : -1;
}

void tgs_mem_release(uint64_t bytes)
{
    if (!bytes)
        return;
    struct tgs_slot *s = tgs_slot();
    if (s) {
        struct tgs_seg_header *h = tgs_g.hdr;
        ledger_enter(h);
        uint64_t n = bytes <= s->mem_used ? bytes : s->mem_used;
        s->mem_used -= n;
        h->mem_used = h->mem_used >= n ? h->mem_used - n : 0;
        ledger_exit(h);
        return;
    }
    if (tgs_g.opt.mem_limit == TGS_QUOTA_UNLIMITED)
        return;
    pthread_mutex_lock(&tgs_g.ledger_mu);
    tgs_g.local_used = tgs_g.local_used >= bytes ? tgs_g.local_used - bytes : 0;
    pthread_mutex_unlock(&tgs_g.ledger_mu);
}

/* Settle a reservation to what the driver really allocated (pitch).  An
 * actual size above the reservation is charged even past the quota: the
 * memory exists, the ledger must say so. */
void tgs_mem_adjust(uint64_t reserved, uint64_t actual)
{
    if (actual <= reserved) {
        tgs_mem_release(reserved - actual);
        return;
    }
    uint64_t extra = actual - reserved;
    struct tgs_slot *s = tgs_slot();
    if (s) {
        struct tgs_seg_header *h = tgs_g.hdr;
        ledger_enter(h);
        s->mem_used += extra;
        h->mem_used += extra;
        if (h->mem_used > h->mem_peak)
            h->mem_peak = h->mem_used;
        ledger_exit(h);
    } else if (tgs_g.opt.mem_limit != TGS_QUOTA_UNLIMITED) {
        pthread_mutex_lock(&tgs_g.ledger_mu);
        tgs_g.local_used += extra;
        pthread_mutex_unlock(&tgs_g.ledger_mu);
    }
}

/* The quota and usage that cuMemGetInfo/cuDeviceTotalMem present. */
int tgs_mem_view(uint64_t *quota, uint64_t *used)
{
    struct tgs_slot *s = tgs_slot();
    if (s) {
        *quota = TGS_RELAXED_LOAD(&tgs_g.hdr->mem_quota);
        *used = TGS_RELAXED_LOAD(&tgs_g.hdr->mem_used);
    } else {
        *quota = tgs_g.opt.mem_limit;
        *used = TGS_RELAXED_LOAD(&tgs_g.local_used);
    }
    return *quota != TGS_QUOTA_UNLIMITED;
}
