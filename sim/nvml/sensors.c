/*
 * sensors.c: the sensors that follow utilisation (temperature, power),
 * power limits, clocks and performance state of the simulated GPU.
 */
#include "nvml_sim.h"

#define CLOCK_SM_MHZ 1980   /* CU_DEVICE_ATTRIBUTE_CLOCK_RATE / 1000 */
#define CLOCK_MEM_MHZ 2619  /* CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE / 1000 */
#define CLOCK_VIDEO_MHZ 1755
#define POWER_IDLE_MW 70000u
#define POWER_LIMIT_MW 700000u

/* Utilisation without waiting: before a window exists, 100 if work is
 * pending now, else 0. */
static unsigned int busy_percent(unsigned int d)
{
    struct nvml_sample ref, now;
    if (nvml_util_window(d, 0, &ref, &now) == 0)
        return nvml_util_share(ref.busy_ns, now.busy_ns, now.t_ns - ref.t_ns);
    const struct sim_state *st = nvml_state();
    return st && nvml_pending_ns(st, d) ? 100 : 0;
}

/* 30 C idle, 75 C flat out. */
static unsigned int temperature(unsigned int i) { return 30 + busy_percent(i) * 45 / 100; }

NVML_API nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device,
                                               nvmlTemperatureSensors_t sensorType,
                                               unsigned int *temp)
{
    unsigned int i;
    nvmlReturn_t r = nvml_dev_out(device, temp, &i);
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
    nvmlReturn_t r = nvml_dev_out(device, temperature_out, &i);
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
    nvmlReturn_t r = nvml_dev_out(device, power, &i);
    if (r != NVML_SUCCESS)
        return r;
    *power = POWER_IDLE_MW + busy_percent(i) * ((POWER_LIMIT_MW - POWER_IDLE_MW) / 100);
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit)
{
    unsigned int i;
    nvmlReturn_t r = nvml_dev_out(device, limit, &i);
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
    nvmlReturn_t r = nvml_dev_out(device, pState, &i);
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
    nvmlReturn_t r = nvml_dev_out(device, clock, &i);
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
