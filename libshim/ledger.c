/*
 * libshim/ledger.c: memory admission against the job quota (segment.h's
 * ledger protocol) or, without a segment, against the static TGS_MEM_LIMIT.
 *
 * The ledger lock is a word in the .seg header, taken with one CAS and
 * released with one store: no syscall on the allocation path.  Threads of
 * this process share its owner id, so a process mutex is taken around it.
 * A waiter spins briefly, then sleeps in short steps; after
 * TGS_LEDGER_STEAL_NS it checks whether the holder is alive (its slot lock
 * held by someone, same generation) and steals the word from a dead one;
 * ledger_dirty then makes it recompute mem_used from the slots.
 */
#include <time.h>

#include "shim.h"

#define SPINS 200
#define SLEEP_NS 2000

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* The owner of the word is dead: a slot index out of range, a changed
 * generation, or nobody holds its slot lock.  Never our own id. */
static bool owner_dead(struct tgs_seg_header *h, uint64_t owner)
{
    if (owner == tgs_g.ledger_id)
        return false;
    uint64_t idx1 = owner >> TGS_LEDGER_SLOT_SHIFT;
    if (idx1 == 0 || idx1 > tgs_nslots())
        return true;
    struct tgs_slot *s = tgs_slot_at(h, (uint32_t)(idx1 - 1));
    if ((TGS_RELAXED_LOAD(&s->generation) & TGS_LEDGER_GEN_MASK) != (owner & TGS_LEDGER_GEN_MASK))
        return true;
    return !tgs_ofd_held(tgs_g.fd, TGS_SEG_LOCK_SLOT_BASE + (int)(idx1 - 1));
}

static void lock_word_slow(struct tgs_seg_header *h, uint64_t me)
{
    uint64_t start = 0, checked = 0;
    for (unsigned n = 0;; n++) {
        uint64_t cur = __atomic_load_n(&h->ledger_lock, __ATOMIC_RELAXED);
        if (cur == 0) {
            if (__atomic_compare_exchange_n(&h->ledger_lock, &cur, me, 0, __ATOMIC_ACQUIRE,
                                            __ATOMIC_RELAXED))
                return;
            continue;
        }
        if (n < SPINS) {
            cpu_relax();
            continue;
        }
        uint64_t now = tgs_now_ns();
        if (!start)
            start = checked = now;
        if (now - checked >= TGS_LEDGER_STEAL_NS) {
            checked = now;
            if (owner_dead(h, cur) &&
                __atomic_compare_exchange_n(&h->ledger_lock, &cur, me, 0, __ATOMIC_ACQUIRE,
                                            __ATOMIC_RELAXED)) {
                /* its update may be half done: recompute (ledger_dirty is set by the
                 * holder before any change; set it here too for an early death) */
                __atomic_store_n(&h->ledger_dirty, 1, __ATOMIC_RELAXED);
                tgs_log(TGS_LOG_INFO, "took over the ledger lock of a dead process");
                return;
            }
        }
        tgs_sleep_ns(SLEEP_NS);
    }
}

static void ledger_enter(struct tgs_seg_header *h)
{
    pthread_mutex_lock(&tgs_g.ledger_mu);
    uint64_t me = tgs_g.ledger_id, zero = 0;
    if (!__atomic_compare_exchange_n(&h->ledger_lock, &zero, me, 0, __ATOMIC_ACQUIRE,
                                     __ATOMIC_RELAXED))
        lock_word_slow(h, me);
    if (h->ledger_dirty) { /* the previous holder died mid-update */
        uint64_t sum = 0, pinned = 0;
        for (uint32_t i = 0; i < tgs_nslots(); i++) {
            sum += tgs_slot_at(h, i)->mem_used;
            pinned += tgs_slot_at(h, i)->pinned_used;
        }
        h->mem_used = sum;
        h->pinned_used = pinned;
    }
    h->ledger_dirty = 1;
}

static void ledger_exit(struct tgs_seg_header *h)
{
    h->ledger_dirty = 0;
    __atomic_store_n(&h->ledger_lock, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&tgs_g.ledger_mu);
}

/* Holding slot s's lock: return its memory to the job, free the slot. */
void tgs_reclaim_slot_locked(struct tgs_slot *s)
{
    struct tgs_seg_header *h = tgs_g.hdr;
    ledger_enter(h);
    h->mem_used = h->mem_used >= s->mem_used ? h->mem_used - s->mem_used : 0;
    s->mem_used = 0;
    h->pinned_used = h->pinned_used >= s->pinned_used ? h->pinned_used - s->pinned_used : 0;
    s->pinned_used = 0;
    for (int i = 0; i < TGS_SEG_LANES; i++) {
        h->retired_launches += TGS_RELAXED_LOAD(&s->lanes[i].launches);
        h->retired_work += TGS_RELAXED_LOAD(&s->lanes[i].work);
        h->retired_throttled_ns += TGS_RELAXED_LOAD(&s->lanes[i].throttled_ns);
        h->retired_blocks += TGS_RELAXED_LOAD(&s->lanes[i].blocks);
    }
    ledger_exit(h);
    if (s->dev_active)
        tgs_pub_drop_busy(); /* a process that died busy */
    s->heartbeat_ns = s->inflight_work = s->oom_count = s->alloc_count = 0;
    s->dev_active = 0;
    s->pid = 0;
    s->lanes_used = 0;
    __builtin_memset(s->lanes, 0, sizeof(s->lanes));
    __atomic_store_n(&s->state, TGS_SLOT_FREE, __ATOMIC_RELEASE);
}
static bool add_fits(uint64_t used, uint64_t n, uint64_t quota)
{
    return quota == TGS_QUOTA_UNLIMITED || (n <= quota && used <= quota - n);
}

/* One stderr line per process, at the first refusal (never one per call):
 * the program only sees CUDA_ERROR_OUT_OF_MEMORY, this says why. */
static void report_refusal(uint64_t bytes, uint64_t used, uint64_t quota)
{
    if (__atomic_exchange_n(&tgs_g.quota_reported, 1, __ATOMIC_RELAXED))
        return;
    /* no job segment: the static quota of tgs-run --standalone (or its fallback) */
    char who[80] = "standalone (TGS_MEM_LIMIT)";
    if (tgs_g.hdr)
        snprintf(who, sizeof who, "job '%.64s'", tgs_g.hdr->id.job_name);
    tgs_log(TGS_LOG_ERROR,
            "%s: the memory quota refused an allocation of %llu bytes (quota %llu, in use "
            "%llu); the program gets CUDA_ERROR_OUT_OF_MEMORY (said once per process)",
            who, (unsigned long long)bytes, (unsigned long long)quota,
            (unsigned long long)used);
}

/* Admit bytes for slot s; *used and *quota: what the ledger held when it decided. */
static int admit_locked(struct tgs_slot *s, uint64_t bytes, uint64_t *used, uint64_t *quota)
{
    struct tgs_seg_header *h = tgs_g.hdr;
    ledger_enter(h);
    *used = h->mem_used;
    *quota = tgs_oversub_limit();
    int ok = add_fits(*used, bytes, *quota);
    if (ok) {
        s->mem_used += bytes;
        h->mem_used += bytes;
        if (h->mem_used > h->mem_peak)
            h->mem_peak = h->mem_used;
    }
    ledger_exit(h);
    return ok;
}

int tgs_mem_admit(uint64_t bytes)
{
    struct tgs_slot *s = tgs_slot();
    if (s) {
        CUdevice other;
        if (TGS_UNLIKELY(tgs_g.opt.parts[0]) && tgs_other_device(&other))
            tgs_part_warn(other); /* charged to our part all the same (parts.c) */
        TGS_RELAXED_STORE(&s->heartbeat_ns, tgs_now_ns());
        uint64_t used, quota;
        int ok = admit_locked(s, bytes, &used, &quota);
        if (!ok) {
            /* over quota: first give back what dead processes of the job still hold
             * (slow path, rare: the caller is about to see an OOM) */
            tgs_reclaim_dead();
            ok = admit_locked(s, bytes, &used, &quota);
        }
        if (ok)
            TGS_RELAXED_STORE(&s->alloc_count, s->alloc_count + 1);
        else
            TGS_RELAXED_STORE(&s->oom_count, s->oom_count + 1);
        if (!ok)
            report_refusal(bytes, used, quota);
        return ok ? 0 : -1;
    }
    if (tgs_refused())
        return -1; /* said once, at attach */
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
        *quota = tgs_oversub_limit();
        *used = TGS_RELAXED_LOAD(&tgs_g.hdr->mem_used);
    } else if (tgs_refused()) {
        *quota = *used = 0;
    } else {
        *quota = tgs_g.opt.mem_limit;
        *used = TGS_RELAXED_LOAD(&tgs_g.local_used);
    }
    return *quota != TGS_QUOTA_UNLIMITED;
}

/* Page-locked host memory (pinned.c): the job's pinned_used against the .ctl's
 * host_pinned_max (0 = no limit), in the same ledger.  0 admitted, -1 refused.
 * Without a segment nothing is counted. */
int tgs_pinned_admit(uint64_t bytes)
{
    struct tgs_slot *s = tgs_slot();
    if (!s)
        return tgs_refused() ? -1 : 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        struct tgs_seg_header *h = tgs_g.hdr;
        uint64_t max = TGS_RELAXED_LOAD(&tgs_g.ctl->host_pinned_max);
        ledger_enter(h);
        int ok = !max || add_fits(h->pinned_used, bytes, max);
        if (ok) {
            s->pinned_used += bytes;
            h->pinned_used += bytes;
        }
        ledger_exit(h);
        if (ok)
            return 0;
        if (attempt == 0)
            tgs_reclaim_dead(); /* dead processes of the job may still hold some */
    }
    tgs_log(TGS_LOG_INFO, "page-locked host allocation of %llu bytes refused by the job's "
                          "host_pinned_max", (unsigned long long)bytes);
    return -1;
}

void tgs_pinned_release(uint64_t bytes)
{
    struct tgs_slot *s = tgs_slot();
    if (!s || !bytes)
        return;
    struct tgs_seg_header *h = tgs_g.hdr;
    ledger_enter(h);
    s->pinned_used -= bytes <= s->pinned_used ? bytes : s->pinned_used;
    h->pinned_used -= bytes <= h->pinned_used ? bytes : h->pinned_used;
    ledger_exit(h);
}
