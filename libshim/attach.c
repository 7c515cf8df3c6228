/*
 * libshim/attach.c: attaching to the job (files.c maps its files) and owning a slot.
 *
 * Lazily on the first hooked call that needs it, a process maps the job's
 * control segment (TGS_CTL, read-only), the job segment (TGS_SEGMENT) and its
 * job's publish page (TGS_PUB), or with TGS_PARTS those of the part of its
 * device (parts.c), validates them and claims a free slot by
 * taking the slot's OFD lock (held for the life of the process; the kernel
 * drops it when we die); it then reclaims every other dead slot.  Any failure
 * leaves the process unattached: one stderr line, then pass-through (or the
 * static TGS_MEM_LIMIT).  A forked child drops the inherited slot and
 * attaches again on first use.
 */
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "shim.h"

void tgs_heartbeat(void)
{
    struct tgs_slot *s = tgs_slot();
    if (s)
        TGS_RELAXED_STORE(&s->heartbeat_ns, tgs_now_ns());
}

static void fill_slot(struct tgs_slot *s)
{
    s->pid = (int32_t)getpid();
    s->claimed_ns = tgs_now_ns();
    s->lanes_used = 0;
    memset(s->comm, 0, sizeof(s->comm));
    extern char *program_invocation_short_name;
    strncpy(s->comm, program_invocation_short_name, sizeof(s->comm) - 1);
    memset(s->lanes, 0, sizeof(s->lanes));
    s->inflight_work = s->oom_count = s->alloc_count = 0;
    s->dev_active = 0;
    s->heartbeat_ns = s->claimed_ns;
    __atomic_store_n(&s->state, TGS_SLOT_ACTIVE, __ATOMIC_RELEASE);
}

static uint64_t owner_id(uint32_t i, uint64_t generation)
{
    return ((uint64_t)(i + 1) << TGS_LEDGER_SLOT_SHIFT) | (generation & TGS_LEDGER_GEN_MASK);
}

/* Every other slot whose owner died (ACTIVE, lock free) goes back to the job:
 * the job's own processes reclaim (the controller never writes a tenant's file). */
static void reclaim_dead(struct tgs_seg_header *h, int fd, uint32_t mine)
{
    for (uint32_t j = 0; j < tgs_nslots(); j++) {
        struct tgs_slot *s = tgs_slot_at(h, j);
        if (j == mine || __atomic_load_n(&s->state, __ATOMIC_ACQUIRE) == TGS_SLOT_FREE)
            continue;
        if (tgs_ofd_lock(fd, TGS_SEG_LOCK_SLOT_BASE + (int)j, 0) != 0)
            continue; /* alive */
        if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != TGS_SLOT_FREE) {
            tgs_reclaim_slot_locked(s);
            tgs_log(TGS_LOG_INFO, "reclaimed the slot %u of a dead process", j);
        }
        tgs_ofd_unlock(fd, TGS_SEG_LOCK_SLOT_BASE + (int)j);
    }
}

/* Take the first slot whose lock is free: 0, or -1 when every slot is held. */
static int claim_slot(struct tgs_seg_header *h, int fd, const struct tgs_ctl_header *c)
{
    const struct tgs_ctl_slot *lines = (const struct tgs_ctl_slot *)(c + 1);
    for (uint32_t i = 0; i < tgs_nslots(); i++) {
        if (tgs_ofd_lock(fd, TGS_SEG_LOCK_SLOT_BASE + (int)i, 0) != 0)
            continue;
        struct tgs_slot *s = tgs_slot_at(h, i);
        /* our generation first: the dead owner may have died holding the ledger word
         * with its own id (this slot, the old generation), which must read as dead,
         * and never as ours */
        uint64_t gen = s->generation + 1;
        __atomic_store_n(&s->generation, gen, __ATOMIC_RELEASE);
        tgs_g.ledger_id = owner_id(i, gen);
        tgs_g.slot = s;
        tgs_g.slot_idx = (int)i;
        if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != TGS_SLOT_FREE)
            tgs_reclaim_slot_locked(s); /* its owner died */
        fill_slot(s);
        tgs_g.cline = &lines[i];
        tgs_g.epoch++;
        tgs_g.lanes_next = 0;
        reclaim_dead(h, fd, i);
        return 0;
    }
    return -1;
}

/* One try at the .seg: mapped, validated against the .ctl, a slot claimed.  0, or -1
 * with why and nothing left mapped. */
static int try_seg(const struct tgs_ctl_header *c, const char **why)
{
    size_t size = 0;
    int fd = -1;
    struct tgs_seg_header *h = tgs_map_seg(c, &fd, &size, why);
    if (!h)
        return -1;
    tgs_g.fd = fd;
    tgs_g.hdr = h;
    tgs_g.map_size = size;
    if (claim_slot(h, fd, c) == 0)
        return 0;
    *why = "every slot is held";
    munmap(h, size);
    close(fd);
    tgs_g.fd = -1;
    tgs_g.hdr = NULL;
    return -1;
}

/* The .ctl is the controller's (read-only to the tenant): without a valid one there is no
 * registered job here and the process passes through (fail safe).  With one, the job is
 * registered and only its tenant-writable .seg can stand in the way (a corrupt file, every
 * slot locked): wait a bounded time with back-off (a process of the job may exit, the
 * controller may be re-creating the files), then refuse (fail closed). */
static int attach(void)
{
    const char *path = tgs_g.opt.segment_path, *why = NULL;
    size_t csize = 0;
    const struct tgs_ctl_header *c = tgs_map_ctl(&csize);
    if (!c)
        return TGS_ATTACH_OFF;
    tgs_g.ctl = c;
    tgs_g.ctl_size = csize;
    tgs_g.pub = tgs_map_own_pub(c);
    uint64_t deadline = tgs_now_ns() + tgs_g.opt.slot_wait_ns, pause_ns = 1000000;
    for (;;) {
        if (try_seg(c, &why) == 0) {
            tgs_log(TGS_LOG_INFO, "attached to %s slot %d", path, tgs_g.slot_idx);
            tgs_policy_check();
            return TGS_ATTACH_OK;
        }
        uint64_t now = tgs_now_ns();
        if (now >= deadline)
            break;
        uint64_t left = deadline - now, ns = pause_ns < left ? pause_ns : left;
        struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };
        nanosleep(&ts, NULL);
        pause_ns = pause_ns * 2 < 50000000 ? pause_ns * 2 : 50000000;
    }
    tgs_log(TGS_LOG_ERROR, "segment %s of registered job '%.*s': %s; this process's CUDA "
            "launches and allocations are refused (a job never runs without its limits)",
            path, TGS_SEG_NAME_MAX, c->id.job_name, why);
    munmap((void *)c, csize);
    if (tgs_g.pub)
        munmap(tgs_g.pub, sizeof(*tgs_g.pub));
    tgs_g.ctl = NULL;
    tgs_g.pub = NULL;
    tgs_g.slot = NULL;
    tgs_g.slot_idx = -1;
    return TGS_ATTACH_REFUSED;
}

/* A refused allocation: the memory of processes that died since we attached
 * may be what is missing (the controller does not reclaim). */
void tgs_reclaim_dead(void)
{
    pthread_mutex_lock(&tgs_g.attach_mu);   /* one reclaimer per process: OFD locks are shared */
    if (__atomic_load_n(&tgs_g.attach_state, __ATOMIC_ACQUIRE) == TGS_ATTACH_OK && tgs_g.hdr &&
        tgs_g.slot_idx >= 0)
        reclaim_dead(tgs_g.hdr, tgs_g.fd, (uint32_t)tgs_g.slot_idx);
    pthread_mutex_unlock(&tgs_g.attach_mu);
}

void tgs_attach_slow(void)
{
    tgs_ensure_init();
    pthread_mutex_lock(&tgs_g.attach_mu);
    if (__atomic_load_n(&tgs_g.attach_state, __ATOMIC_ACQUIRE) == TGS_ATTACH_NONE) {
        /* a multi-device job: the part of this process's device (parts.c); no context
         * yet: stay unattached, the next hooked call asks again */
        int pick = tgs_g.opt.parts[0] && tgs_g.real.handle ? tgs_pick_part() : 0;
        if (pick > 0) {
            pthread_mutex_unlock(&tgs_g.attach_mu);
            return;
        }
        int st = pick == 0 && tgs_g.opt.segment_path[0] && tgs_g.real.handle
                 ? attach() : TGS_ATTACH_OFF;
        __atomic_store_n(&tgs_g.attach_state, st, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&tgs_g.attach_mu);
}

/* A thread's first launch takes a lane of its own; when they run out, the
 * last lane is shared (atomic adds). */
struct tgs_lane *tgs_lane_slow(struct tgs_slot *s)
{
    uint32_t n = __atomic_fetch_add(&tgs_g.lanes_next, 1, __ATOMIC_RELAXED);
    uint32_t i = n < TGS_SEG_LANES - 1 ? n : TGS_SEG_LANES - 1;
    tgs_tls.shared = (i == TGS_SEG_LANES - 1);
    uint32_t used = i + 1;
    if (TGS_RELAXED_LOAD(&s->lanes_used) < used)
        TGS_RELAXED_STORE(&s->lanes_used, used);
    tgs_tls.lane = &s->lanes[i];
    tgs_tls.epoch = tgs_g.epoch;
    return tgs_tls.lane;
}

/* In a forked child (lifecycle.c, after the other subsystems' resets): the inherited
 * descriptor shares the parent's open file description and therefore its slot lock: close
 * it, forget the slot and what was charged to it, attach anew later. */
void tgs_attach_forget(void)
{
    pthread_mutex_init(&tgs_g.attach_mu, NULL);
    pthread_mutex_init(&tgs_g.ledger_mu, NULL);
    pthread_mutex_init(&tgs_g.inflight_mu, NULL);
    pthread_mutex_init(&tgs_g.ptrs.mu, NULL);
    pthread_mutex_init(&tgs_g.graphs.mu, NULL);
    if (tgs_g.fd >= 0)
        close(tgs_g.fd);
    if (tgs_g.hdr)
        munmap(tgs_g.hdr, tgs_g.map_size);
    if (tgs_g.ctl)
        munmap((void *)tgs_g.ctl, tgs_g.ctl_size);
    if (tgs_g.pub)
        munmap(tgs_g.pub, sizeof(*tgs_g.pub));
    tgs_g.fd = -1;
    tgs_g.hdr = NULL;
    tgs_g.slot = NULL;
    tgs_g.ctl = NULL;
    tgs_g.cline = NULL;
    tgs_g.pub = NULL;
    tgs_g.ledger_id = 0;
    tgs_g.policy_warned = 0;
    tgs_g.slot_idx = -1;
    tgs_g.epoch++;
    tgs_g.local_used = 0;
    tgs_g.dev_active = 0;
    tgs_g.launched_work = tgs_g.retired_work = 0;
    tgs_g.ev_head = tgs_g.ev_tail = 0;
    tgs_ptrmap_reset(&tgs_g.ptrs);
    tgs_tls.lane = NULL;
    __atomic_store_n(&tgs_g.attach_state, TGS_ATTACH_NONE, __ATOMIC_RELEASE);
}

/* Clean exit: our memory goes back to the job and the slot is freed.  The
 * mapping stays (another thread may still be running). */
void tgs_detach(void)
{
    if (__atomic_load_n(&tgs_g.attach_state, __ATOMIC_ACQUIRE) != TGS_ATTACH_OK)
        return;
    pthread_mutex_lock(&tgs_g.attach_mu);
    struct tgs_slot *s = tgs_g.slot;
    if (s && tgs_g.fd >= 0) {
        tgs_gate_idle();
        tgs_reclaim_slot_locked(s);
        tgs_ofd_unlock(tgs_g.fd, TGS_SEG_LOCK_SLOT_BASE + tgs_g.slot_idx);
    }
    __atomic_store_n(&tgs_g.attach_state, TGS_ATTACH_OFF, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&tgs_g.attach_mu);
}
