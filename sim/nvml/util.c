/*
 * util.c: utilisation from the simulator's busy counters, and the sensors
 * that follow it (temperature, power), clocks and performance state.
 *
 * The simulator advances its counters lazily: busy_ns is exact as of the
 * device's t_last_ns.  Since its device is work-conserving (it runs while
 * any context has pending work), busy time up to now is projected as
 * busy_ns + min(now - t_last_ns, pending work).  Utilisation is the growth
 * of that over a recent window: between now and the newest sample this
 * process took at least MIN_WINDOW ago.  Samples are taken at nvmlInit and
 * at each query (at most one per SPACING), kept across nvmlShutdown; a
 * process's first query without an old enough sample waits for the rest of
 * MIN_WINDOW (at most 100 ms, once).
 */
#include <string.h>
#include <time.h>

#include "nvml_sim.h"

#define MIN_WINDOW_NS 100000000ull /* 100 ms */
#define SPACING_NS 50000000ull     /* 50 ms between kept samples */

#define CLOCK_SM_MHZ 1980   /* CU_DEVICE_ATTRIBUTE_CLOCK_RATE / 1000 */
#define CLOCK_MEM_MHZ 2619  /* CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE / 1000 */
#define CLOCK_VIDEO_MHZ 1755
#define POWER_IDLE_MW 70000u
#define POWER_LIMIT_MW 700000u

/* Work queued on device d by live processes (a dead one's is dropped when
 * the simulator reaps it). */
static uint64_t pending_ns(const struct sim_state *st, unsigned int d)
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
            pending += p;
    }
    return pending;
}

static struct nvml_sample take(const struct sim_state *st, unsigned int d)
{
    const struct sim_device *dv = &st->dev[d];
    uint64_t t_last, busy;
    for (int tries = 0;; tries++) { /* busy_ns as of one t_last_ns */
        t_last = __atomic_load_n(&dv->t_last_ns, __ATOMIC_ACQUIRE);
        busy = __atomic_load_n(&dv->busy_ns, __ATOMIC_ACQUIRE);
        if (__atomic_load_n(&dv->t_last_ns, __ATOMIC_ACQUIRE) == t_last || tries == 3)
            break;
    }
    uint64_t pending = pending_ns(st, d);
    uint64_t now = nvml_now_ns();
    if (now > t_last)
        busy += now - t_last < pending ? now - t_last : pending;
    return (struct nvml_sample){.t_ns = now, .busy_ns = busy};
}

/* Caller holds g_nvml.lock. */
static void keep(unsigned int d, struct nvml_sample s)
{
    struct nvml_sample *ring = g_nvml.samples[d];
    unsigned int n = g_nvml.nsamples[d];
    if (n && s.t_ns < ring[n - 1].t_ns + SPACING_NS)
        return;
    if (n == NVML_SAMPLES) {
        for (unsigned int k = 1; k < n; k++)
            ring[k - 1] = ring[k];
        n--;
    }
    ring[n] = s;
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

static unsigned int percent(const struct nvml_sample *ref, struct nvml_sample now)
{
    if (now.t_ns <= ref->t_ns || now.busy_ns <= ref->busy_ns)
        return 0;
    uint64_t p = (now.busy_ns - ref->busy_ns) * 100 / (now.t_ns - ref->t_ns);
    return p > 100 ? 100 : (unsigned int)p;
}

void nvml_util_note_all(const struct sim_state *st)
{
    for (unsigned int d = 0; d < st->hdr.ndevices; d++)
        keep(d, take(st, d));
}

/* GPU utilisation in percent over the recent window.  wait == 0 never
 * sleeps: without an old enough sample it answers 100 if work is pending
 * now, else 0 (what the sensors below use). */
static unsigned int util_percent(unsigned int d, int wait)
{
    const struct sim_state *st = nvml_state();
    pthread_mutex_lock(&g_nvml.lock);
    struct nvml_sample now = take(st, d);
    const struct nvml_sample *ref = reference(d, now.t_ns);
    unsigned int p = 0;
    if (ref) {
        p = percent(ref, now);
    } else if (!wait) {
        p = pending_ns(st, d) ? 100 : 0;
    } else {
        uint64_t from = g_nvml.nsamples[d] ? g_nvml.samples[d][0].t_ns : now.t_ns;
        keep(d, now);
        pthread_mutex_unlock(&g_nvml.lock);
        uint64_t until = from + MIN_WINDOW_NS;
        struct timespec ts = {.tv_sec = (time_t)(until / 1000000000ull),
                              .tv_nsec = (long)(until % 1000000000ull)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0) {
        }
        pthread_mutex_lock(&g_nvml.lock);
        now = take(st, d);
        ref = reference(d, now.t_ns);
        p = ref ? percent(ref, now) : 0;
    }
    keep(d, now);
    pthread_mutex_unlock(&g_nvml.lock);
    return p;
}

NVML_API nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device,
                                                    nvmlUtilization_t *utilization)
{
    unsigned int i;
    nvmlReturn_t r = nvml_dev(device, &i);
    if (r != NVML_SUCCESS)
        return r;
    if (!utilization)
        return NVML_ERROR_INVALID_ARGUMENT;
    utilization->gpu = util_percent(i, 1);
    utilization->memory = 0; /* the simulator models no memory traffic */
    return NVML_SUCCESS;
}

static nvmlReturn_t sensor(nvmlDevice_t device, void *out, unsigned int *idx)
{
    nvmlReturn_t r = nvml_dev(device, idx);
    if (r != NVML_SUCCESS)
        return r;
    return out ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

/* 30 C idle, 75 C flat out. */
static unsigned int temperature(unsigned int i) { return 30 + util_percent(i, 0) * 45 / 100; }

NVML_API nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device,
                                               nvmlTemperatureSensors_t sensorType,
                                               unsigned int *temp)
{
    unsigned int i;
    nvmlReturn_t r = sensor(device, temp, &i);
    if (r != NVML_SUCCESS)
        return r;
    if (sensorType != NVML_TEMPERATURE_GPU)
        return NVML_ERROR_INVALID_ARGUMENT;
    *temp = temperature(i);
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t device,
                                                nvmlTemperature_t *temperature_out)
{
    unsigned int i;
    nvmlReturn_t r = sensor(device, temperature_out, &i);
    if (r != NVML_SUCCESS)
        return r;
    if (temperature_out->version != nvmlTemperature_v1)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (temperature_out->sensorType != NVML_TEMPERATURE_GPU)
        return NVML_ERROR_INVALID_ARGUMENT;
    temperature_out->temperature = (int)temperature(i);
    return NVML_SUCCESS;
}

/* Milliwatts: idle power plus a share of the limit that follows utilisation. */
NVML_API nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power)
{
    unsigned int i;
    nvmlReturn_t r = sensor(device, power, &i);
    if (r != NVML_SUCCESS)
        return r;
    *power = POWER_IDLE_MW + util_percent(i, 0) * ((POWER_LIMIT_MW - POWER_IDLE_MW) / 100);
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit)
{
    unsigned int i;
    nvmlReturn_t r = sensor(device, limit, &i);
    if (r == NVML_SUCCESS)
        *limit = POWER_LIMIT_MW;
    return r;
}

NVML_API nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device,
                                                        unsigned int *limit)
{
    return nvmlDeviceGetEnforcedPowerLimit(device, limit);
}

NVML_API nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device, nvmlPstates_t *pState)
{
    unsigned int i;
    nvmlReturn_t r = sensor(device, pState, &i);
    if (r == NVML_SUCCESS)
        *pState = NVML_PSTATE_0; /* persistence mode on: always ready */
    return r;
}

static int clock_mhz(nvmlClockType_t type, unsigned int *out)
{
    switch (type) {
    case NVML_CLOCK_GRAPHICS:
    case NVML_CLOCK_SM: *out = CLOCK_SM_MHZ; return 0;
    case NVML_CLOCK_MEM: *out = CLOCK_MEM_MHZ; return 0;
    case NVML_CLOCK_VIDEO: *out = CLOCK_VIDEO_MHZ; return 0;
    default: return -1;
    }
}

/* The simulated GPU always runs at its maximum clocks. */
NVML_API nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                             unsigned int *clock)
{
    unsigned int i;
    nvmlReturn_t r = sensor(device, clock, &i);
    if (r != NVML_SUCCESS)
        return r;
    return clock_mhz(type, clock) == 0 ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

NVML_API nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                                unsigned int *clock)
{
    return nvmlDeviceGetClockInfo(device, type, clock);
}

NVML_API nvmlReturn_t nvmlDeviceGetClock(nvmlDevice_t device, nvmlClockType_t clockType,
                                         nvmlClockId_t clockId, unsigned int *clockMHz)
{
    if ((unsigned int)clockId > NVML_CLOCK_ID_CUSTOMER_BOOST_MAX)
        return NVML_ERROR_INVALID_ARGUMENT;
    return nvmlDeviceGetClockInfo(device, clockType, clockMHz);
}
