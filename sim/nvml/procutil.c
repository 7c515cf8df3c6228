/*
 * procutil.c: nvmlDeviceGetProcessUtilization: one sample per live process
 * on the device (as in the compute process list), its SM utilisation over
 * the same recent window as nvmlDeviceGetUtilizationRates (util.c), stamped
 * now (CLOCK_REALTIME, microseconds).  Memory, encoder and decoder
 * utilisation are 0: the simulator models none of them.
 */
#include <string.h>
#include <time.h>

#include "nvml_sim.h"

static uint64_t realtime_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000ull + (uint64_t)ts.tv_nsec / 1000;
}

NVML_API nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                                      nvmlProcessUtilizationSample_t *utilization,
                                                      unsigned int *processSamplesCount,
                                                      unsigned long long lastSeenTimeStamp)
{
    unsigned int d;
    nvmlReturn_t r = nvml_dev_out(device, processSamplesCount, &d);
    if (r != NVML_SUCCESS)
        return r;
    uint64_t stamp = realtime_us();
    if (stamp <= lastSeenTimeStamp)
        return NVML_ERROR_NOT_FOUND;
    unsigned int pids[SIM_MAX_PROCS];
    unsigned long long mem[SIM_MAX_PROCS];
    unsigned int n = nvml_compute_procs(d, pids, mem);
    if (n == 0)
        return NVML_ERROR_NOT_FOUND; /* no process: no sample */
    if (!utilization || *processSamplesCount < n) {
        *processSamplesCount = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    struct nvml_sample ref, now;
    int have = nvml_util_window(d, 1, &ref, &now) == 0;
    for (unsigned int k = 0; k < n; k++) {
        unsigned int sm = 0;
        for (int s = 0; have && s < SIM_MAX_PROCS; s++) {
            if (now.pid[s] != (int32_t)pids[k])
                continue;
            uint64_t then = ref.pid[s] == now.pid[s] ? ref.pbusy[s] : 0; /* new since ref */
            sm = nvml_util_share(then, now.pbusy[s], now.t_ns - ref.t_ns);
            break;
        }
        memset(&utilization[k], 0, sizeof utilization[k]);
        utilization[k].pid = pids[k];
        utilization[k].timeStamp = stamp;
        utilization[k].smUtil = sm;
    }
    *processSamplesCount = n;
    return NVML_SUCCESS;
}
