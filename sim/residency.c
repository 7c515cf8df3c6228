/*
 * residency.c: where managed memory lives (device or host), shared by all
 * processes of the state file (struct sim_residency in sim_state.h).
 *
 * The model, per managed allocation: `resident` bytes of it are in device
 * memory and count in the device's usage beside mem_used; the rest is on
 * the host.  A new allocation is on the host (first touch populates it).
 *  - A device allocation that does not fit evicts resident managed bytes,
 *    least recently used first, of any process (ranges whose preferred
 *    location is that device last); it fails only when device memory minus
 *    device allocations is short (memory.c: sim_mem_account); the allocating
 *    call then waits for the write-back (evicted bytes / TGS_SIM_PCIE_GBPS).
 *  - A kernel touches every managed allocation of its process on its device
 *    (a simplification: the simulator does not know what a kernel reads); it
 *    pays non-resident bytes / TGS_SIM_PCIE_GBPS, after which what fits in
 *    the free device memory is resident; a range advised to prefer that
 *    device first evicts other processes' ranges that do not (TGS's
 *    production advice), paying their write-back too.  Ranges advised to
 *    prefer the host stay there and are paid for at every launch.
 *  - cuMemPrefetchAsync to the device makes resident what fits in free device
 *    memory (it evicts nobody); to the host, nothing is resident.  Either way
 *    the bytes it moved cost bytes / TGS_SIM_PCIE_GBPS of device time on the
 *    prefetch's stream (memcpy.c).
 *  - Host memory (TGS_SIM_HOST_MEM, default unlimited): hdr.host_used counts
 *    the managed bytes on the host (not resident) and page-locked host ranges
 *    (SIM_PINNED entries of the table: cuMemAllocHost, cuMemHostAlloc,
 *    cuMemHostRegister) of every process.  A managed or page-locked
 *    allocation past the limit fails with OUT_OF_MEMORY; an eviction moves
 *    only what the host can take (a device allocation whose eviction would
 *    need more fails before anything moves: no data is lost).
 * Locks: a range is guarded by its device's lock; a slot is claimed with a
 * compare-and-swap of in_use.
 */
#include "sim.h"

#define PAGE 4096ull

static struct sim_residency *res(void) { return &g_sim.st->res; }

/* Host memory left under TGS_SIM_HOST_MEM (racy read: callers re-check by CAS or clamp). */
uint64_t sim_res_host_room(void)
{
    uint64_t u = __atomic_load_n(&g_sim.st->hdr.host_used, __ATOMIC_RELAXED);
    return g_sim.host_limit > u ? g_sim.host_limit - u : 0;
}

/* Take bytes of host memory, all or nothing: 0 taken, -1 over the limit. */
static int host_take(uint64_t bytes)
{
    uint64_t *hu = &g_sim.st->hdr.host_used;
    uint64_t u = __atomic_load_n(hu, __ATOMIC_RELAXED);
    do {
        if (u + bytes < u || u + bytes > g_sim.host_limit)
            return -1;
    } while (!__atomic_compare_exchange_n(hu, &u, u + bytes, 1, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
    return 0;
}

static void host_give(uint64_t bytes)
{
    uint64_t *hu = &g_sim.st->hdr.host_used;
    uint64_t u = __atomic_load_n(hu, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(hu, &u, u >= bytes ? u - bytes : 0, 1, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED))
        ;
}

static uint64_t free_locked(int dev)
{
    struct sim_device *dv = &g_sim.st->dev[dev];
    uint64_t used = dv->mem_used + res()->resident[dev];
    return used < dv->mem_total ? dv->mem_total - used : 0;
}

/* Set m's resident bytes; a decrease moves only what the host can take.
 * Returns the bytes moved either way. */
static uint64_t set_resident_locked(struct sim_mrange *m, uint64_t bytes)
{
    struct sim_residency *rs = res();
    uint64_t d;
    if (bytes > m->resident) {
        d = bytes - m->resident;
        rs->migrated[m->dev] += d;
        rs->resident[m->dev] += d;
        host_give(d);
    } else {
        d = m->resident - bytes;
        uint64_t room = sim_res_host_room() & ~(PAGE - 1);
        if (d > room)
            d = room;
        if (!d || host_take(d) != 0)
            return 0;
        rs->evicted[m->dev] += d;
        rs->resident[m->dev] -= d <= rs->resident[m->dev] ? d : rs->resident[m->dev];
    }
    m->resident = bytes > m->resident ? bytes : m->resident - d;
    return d;
}

/* Grow m's residency by what fits in free device memory; returns bytes moved. */
static uint64_t fill_locked(struct sim_mrange *m)
{
    uint64_t want = m->size - m->resident;
    uint64_t room = free_locked(m->dev) & ~(PAGE - 1);
    uint64_t take = want < room ? want : room;
    if (take)
        set_resident_locked(m, m->resident + take);
    return take;
}

int sim_res_add(int dev, uint64_t base, uint64_t size, int pinned)
{
    struct sim_residency *rs = res();
    /* new managed memory is on the host (first touch); a dead process may hold some */
    if (host_take(size) != 0) {
        sim_reap_dead(1);
        if (host_take(size) != 0)
            return -1;
    }
    for (uint32_t i = 0; i < SIM_MAX_MRANGES; i++) {
        uint32_t zero = 0;
        if (!__atomic_compare_exchange_n(&rs->r[i].in_use, &zero, 1, 0, __ATOMIC_ACQ_REL,
                                         __ATOMIC_RELAXED))
            continue;
        sim_dev_lock(dev);
        struct sim_mrange *m = &rs->r[i];
        m->proc = g_sim.proc_slot;
        m->dev = dev;
        m->preferred = pinned ? SIM_PINNED : -2;
        m->base = base;
        m->size = size;
        m->resident = 0;
        m->last_use_ns = sim_now_ns();
        sim_dev_unlock(dev);
        /* only grows (a scan bound read without locks): atomic max */
        uint32_t h = __atomic_load_n(&rs->hwm, __ATOMIC_RELAXED);
        while (h < i + 1 && !__atomic_compare_exchange_n(&rs->hwm, &h, i + 1, 1,
                                                         __ATOMIC_RELEASE, __ATOMIC_RELAXED))
            ;
        __atomic_add_fetch(&g_sim.nmanaged[dev], 1, __ATOMIC_RELAXED);
        return (int)i + 1;
    }
    host_give(size);
    sim_log(TGS_LOG_WARN, "all %d managed residency slots are in use: allocation untracked",
            SIM_MAX_MRANGES);
    return 0;
}

static struct sim_mrange *slot(int mslot)
{
    if (mslot <= 0 || mslot > SIM_MAX_MRANGES)
        return NULL;
    struct sim_mrange *m = &res()->r[mslot - 1];
    return m->proc == g_sim.proc_slot ? m : NULL;
}

void sim_res_remove(int mslot)
{
    struct sim_mrange *m = slot(mslot);
    if (!m)
        return;
    int dev = m->dev;
    sim_dev_lock(dev);
    uint64_t r = m->resident;
    res()->resident[dev] -= r <= res()->resident[dev] ? r : res()->resident[dev];
    host_give(m->size - r);
    m->resident = 0;
    m->proc = -1;
    sim_dev_unlock(dev);
    __atomic_store_n(&m->in_use, 0, __ATOMIC_RELEASE);
    __atomic_sub_fetch(&g_sim.nmanaged[dev], 1, __ATOMIC_RELAXED);
}

uint64_t sim_res_prefetch(int mslot, int loc)
{
    struct sim_mrange *m = slot(mslot);
    if (!m || m->preferred == SIM_PINNED)
        return 0;
    uint64_t moved = 0;
    sim_dev_lock(m->dev);
    m->last_use_ns = sim_now_ns();
    if (loc == m->dev)
        moved = fill_locked(m);
    else if (loc == -1)
        moved = set_resident_locked(m, 0);
    sim_dev_unlock(m->dev);
    return moved;
}

void sim_res_advise_preferred(int mslot, int loc)
{
    struct sim_mrange *m = slot(mslot);
    if (!m || m->preferred == SIM_PINNED)
        return;
    sim_dev_lock(m->dev);
    m->preferred = loc;
    sim_dev_unlock(m->dev);
}

/* The eviction victim: resident, least recently used, preferring the
 * device last; for a kernel's fault (skip_proc >= 0): another process's
 * range that does not prefer the device, or none. */
static struct sim_mrange *victim_locked(int dev, int skip_proc)
{
    struct sim_residency *rs = res();
    struct sim_mrange *best = NULL;
    uint32_t hwm = __atomic_load_n(&rs->hwm, __ATOMIC_RELAXED);
    for (uint32_t i = 0; i < hwm && i < SIM_MAX_MRANGES; i++) {
        struct sim_mrange *m = &rs->r[i];
        if (!__atomic_load_n(&m->in_use, __ATOMIC_ACQUIRE) || m->dev != dev || !m->resident)
            continue;
        if (skip_proc >= 0 && (m->proc == skip_proc || m->preferred == dev))
            continue;
        if (!best || (m->preferred == dev) < (best->preferred == dev) ||
            ((m->preferred == dev) == (best->preferred == dev) &&
             m->last_use_ns < best->last_use_ns))
            best = m;
    }
    return best;
}

uint64_t sim_res_migration_ns(uint64_t bytes)
{
    double ns = (double)bytes / g_sim.pcie_gbps; /* bytes / (GB/s) = ns */
    return ns >= 1.8e19 ? (uint64_t)1.8e19 : (uint64_t)ns;
}

static uint64_t evict_locked(int dev, uint64_t need, uint64_t *moved, int skip_proc)
{
    while (need) {
        uint64_t room = free_locked(dev);
        if (room >= need)
            return 0;
        struct sim_mrange *m = victim_locked(dev, skip_proc);
        if (!m)
            return need - room;
        uint64_t take = ((need - room) + PAGE - 1) & ~(PAGE - 1);
        if (take > m->resident)
            take = m->resident;
        take = set_resident_locked(m, m->resident - take);
        if (!take) /* the host is full: nothing more can move */
            return need - room;
        *moved += take;
        sim_log(TGS_LOG_DEBUG, "evicted managed memory of process slot %d to the host",
                (int)m->proc);
    }
    return 0;
}

uint64_t sim_res_evict_locked(int dev, uint64_t need, uint64_t *moved)
{
    /* all or nothing: an eviction the host cannot take moves nothing */
    uint64_t room = free_locked(dev);
    if (need > room && (((need - room) + PAGE - 1) & ~(PAGE - 1)) > sim_res_host_room())
        return need - room;
    return evict_locked(dev, need, moved, -1);
}

void sim_res_drop_proc_locked(int proc, int dev)
{
    struct sim_residency *rs = res();
    uint32_t hwm = __atomic_load_n(&rs->hwm, __ATOMIC_RELAXED);
    for (uint32_t i = 0; i < hwm && i < SIM_MAX_MRANGES; i++) {
        struct sim_mrange *m = &rs->r[i];
        if (!__atomic_load_n(&m->in_use, __ATOMIC_ACQUIRE) || m->proc != proc || m->dev != dev)
            continue;
        rs->resident[dev] -= m->resident <= rs->resident[dev] ? m->resident : rs->resident[dev];
        host_give(m->size - m->resident);
        m->resident = 0;
        m->proc = -1;
        __atomic_store_n(&m->in_use, 0, __ATOMIC_RELEASE);
    }
    if (proc == g_sim.proc_slot)
        g_sim.nmanaged[dev] = 0;
}

uint64_t sim_res_kernel_ns(int dev)
{
    if (!__atomic_load_n(&g_sim.nmanaged[dev], __ATOMIC_RELAXED))
        return 0;
    struct sim_residency *rs = res();
    uint64_t now = sim_now_ns(), missing = 0, moved = 0;
    sim_dev_lock(dev);
    uint32_t hwm = __atomic_load_n(&rs->hwm, __ATOMIC_RELAXED);
    for (uint32_t i = 0; i < hwm && i < SIM_MAX_MRANGES; i++) {
        struct sim_mrange *m = &rs->r[i];
        if (!__atomic_load_n(&m->in_use, __ATOMIC_ACQUIRE) || m->proc != g_sim.proc_slot ||
            m->dev != dev || m->preferred == SIM_PINNED)
            continue;
        m->last_use_ns = now;
        missing += m->size - m->resident;
        if (m->preferred == dev) /* it wins over other processes' unpreferred pages */
            evict_locked(dev, m->size - m->resident, &moved, g_sim.proc_slot);
        if (m->preferred != -1)
            fill_locked(m);
    }
    sim_dev_unlock(dev);
    return sim_res_migration_ns(missing + moved);
}
