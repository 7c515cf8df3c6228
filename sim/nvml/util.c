/*
 * util.c: utilisation from the simulator's busy counters.
 *
 * The simulator advances its counters lazily: busy_ns is exact as of the
 * device's t_last_ns.  Since its device is work-conserving (it runs while
 * any context has pending work), busy time up to now is projected as
 * busy_ns + min(now - t_last_ns, pending work of live processes); per
 * process, that extra time is split evenly between the contexts with pending
 * work (the simulator round-robins them), so per-process figures are
 * approximate while several processes queue work.  Utilisation is the growth
 * of busy time over a recent window: between now and the newest sample this
 * process took at least MIN_WINDOW ago.  Samples are taken at nvmlInit and at
 * each query (at most one per SPACING) and kept across nvmlShutdown; a
 * process's first query without an old enough sample waits for the rest of
 * MIN_WINDOW (at most 100 ms, once).
 */
#include <string.h>
#include <time.h>

#include "nvml_sim.h"

#define MIN_WINDOW_NS 100000000ull /* 100 ms */
#define SPACING_NS 50000000ull     /* 50 ms between kept samples */

uint64_t nvml_pending_ns(const struct sim_state *st, unsigned int d)
{
    uint64_t pending = 0;
    signed char alive[SIM_MAX_PROCS];
    memset(alive, -1, sizeof alive);
    for (int c = 0; c < SIM_MAX_CTXS; c++) {
        const struct sim_ctx *cx = &st->ctx[c];
        if (!__atomic_load_n(&cx->in_use, __ATOMIC_RELAXED) || cx->dev != (int32_t)d)
            continue;
        uint64_t p = __atomic_load_n(&cx->pending_ns, __ATOMIC_RELAXED);
        int slot = cx->proc;
        if (!p || slot < 0 || slot >= SIM_MAX_PROCS)
            continue;
        if (alive[slot] < 0)
            alive[slot] = (signed char)nvml_slot_alive(slot);
        if (alive[slot])
            pending += p; /* a dead process's work is dropped when it is reaped */
    }
    return pending;
}

/* Spread `extra` ns of projected device time over the live contexts with
 * pending work, as the simulator's round robin would. */
static void project_procs(const struct sim_state *st, unsigned int d, uint64_t extra,
                          struct nvml_sample *s)
{
    int slots[SIM_MAX_CTXS];
    uint64_t pend[SIM_MAX_CTXS];
    int n = 0;
    for (int c = 0; c < SIM_MAX_CTXS; c++) {
        const struct sim_ctx *cx = &st->ctx[c];
        uint64_t p = __atomic_load_n(&cx->pending_ns, __ATOMIC_RELAXED);
        if (__atomic_load_n(&cx->in_use, __ATOMIC_RELAXED) && cx->dev == (int32_t)d && p &&
            cx->proc >= 0 && cx->proc < SIM_MAX_PROCS && s->pid[cx->proc] &&
            nvml_slot_alive(cx->proc)) {
            slots[n] = cx->proc;
            pend[n++] = p;
        }
    }
    for (int k = 0; k < n; k++)
        s->pbusy[slots[k]] += extra / (uint64_t)n < pend[k] ? extra / (uint64_t)n : pend[k];
}

static void take(const struct sim_state *st, unsigned int d, struct nvml_sample *s)
{
    const struct sim_device *dv = &st->dev[d];
    uint64_t t_last;
    for (int tries = 0;; tries++) { /* counters as of one t_last_ns */
        t_last = __atomic_load_n(&dv->t_last_ns, __ATOMIC_ACQUIRE);
        s->busy_ns = __atomic_load_n(&dv->busy_ns, __ATOMIC_ACQUIRE);
        for (int k = 0; k < SIM_MAX_PROCS; k++) {
            const struct sim_proc *p = &st->proc[k];
            int used = __atomic_load_n(&p->in_use, __ATOMIC_ACQUIRE) != 0;
            s->pid[k] = used ? p->pid : 0;
            s->pbusy[k] = used ? __atomic_load_n(&p->dev[d].busy_ns, __ATOMIC_RELAXED) : 0;
        }
        if (__atomic_load_n(&dv->t_last_ns, __ATOMIC_ACQUIRE) == t_last || tries == 3)
            break;
    }
    uint64_t pending = nvml_pending_ns(st, d);
    s->t_ns = nvml_now_ns();
    uint64_t extra = s->t_ns > t_last ? s->t_ns - t_last : 0;
    extra = extra < pending ? extra : pending;
    s->busy_ns += extra;
    if (extra)
        project_procs(st, d, extra, s);
}

/* Caller holds g_nvml.lock. */
static void keep(unsigned int d, const struct nvml_sample *s)
{
    struct nvml_sample *ring = g_nvml.samples[d];
    unsigned int n = g_nvml.nsamples[d];
    if (n && s->t_ns < ring[n - 1].t_ns + SPACING_NS)
        return;
    if (n == NVML_SAMPLES) {
        memmove(ring, ring + 1, (n - 1) * sizeof *ring);
        n--;
    }
    ring[n] = *s;
    g_nvml.nsamples[d] = n + 1;
}

/* Caller holds g_nvml.lock: the newest kept sample at least MIN_WINDOW old. */
static const struct nvml_sample *reference(unsigned int d, uint64_t now)
{
    for (unsigned int k = g_nvml.nsamples[d]; k-- > 0;)
        if (g_nvml.samples[d][k].t_ns + MIN_WINDOW_NS <= now)
            return &g_nvml.samples[d][k];
    return NULL;
}

unsigned int nvml_util_share(uint64_t busy_then, uint64_t busy_now, uint64_t dt_ns)
{
    if (!dt_ns || busy_now <= busy_then)
        return 0;
    uint64_t p = (busy_now - busy_then) * 100 / dt_ns;
    return p > 100 ? 100 : (unsigned int)p;
}

void nvml_util_note_all(const struct sim_state *st)
{
    struct nvml_sample s;
    for (unsigned int d = 0; d < st->hdr.ndevices; d++) {
        take(st, d, &s);
        keep(d, &s);
    }
}

int nvml_util_window(unsigned int d, int wait, struct nvml_sample *ref, struct nvml_sample *now)
{
    const struct sim_state *st = nvml_state();
    if (!st)
        return -1;
    pthread_mutex_lock(&g_nvml.lock);
    take(st, d, now);
    const struct nvml_sample *r = reference(d, now->t_ns);
    if (!r && wait) {
        uint64_t from = g_nvml.nsamples[d] ? g_nvml.samples[d][0].t_ns : now->t_ns;
        keep(d, now);
        pthread_mutex_unlock(&g_nvml.lock);
        uint64_t until = from + MIN_WINDOW_NS;
        struct timespec ts = {.tv_sec = (time_t)(until / 1000000000ull),
                              .tv_nsec = (long)(until % 1000000000ull)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0) {
        }
        pthread_mutex_lock(&g_nvml.lock);
        take(st, d, now);
        r = reference(d, now->t_ns);
    }
    if (r)
        *ref = *r;
    keep(d, now);
    pthread_mutex_unlock(&g_nvml.lock);
    return r ? 0 : -1;
}

NVML_API nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device,
                                                    nvmlUtilization_t *utilization)
{
    unsigned int i;
    nvmlReturn_t r = nvml_dev_out(device, utilization, &i);
    if (r != NVML_SUCCESS)
        return r;
    struct nvml_sample ref, now;
    utilization->gpu = nvml_util_window(i, 1, &ref, &now) == 0
                           ? nvml_util_share(ref.busy_ns, now.busy_ns, now.t_ns - ref.t_ns)
                           : 0;
    utilization->memory = 0; /* the simulator models no memory traffic */
    return NVML_SUCCESS;
}
