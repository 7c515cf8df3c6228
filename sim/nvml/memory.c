/*
 * memory.c: memory information and running processes, from the simulator's
 * per-device and per-process counters.
 *
 * A process is listed on a device while it is alive (it holds the OFD lock
 * of its process slot, as the simulator's reaper checks) and it has device
 * memory or a context there; its usedGpuMemory is its simulated device
 * bytes plus its managed bytes resident on that device, so the processes'
 * figures add up to the device's used memory (which counts resident managed
 * memory, as the simulator's cuMemGetInfo does).  No graphics or MPS
 * processes exist on a simulated GPU.
 *
 * The simulator returns a killed process's memory lazily (the next process
 * that allocates, or its engine every ~100 ms, reaps the slot); NVML, like
 * the real driver, reports it free at once: used memory leaves out slots
 * whose owner is gone.
 */
#include <fcntl.h>
#include <string.h>

#include "nvml_sim.h"

#define NO_INSTANCE 0xFFFFFFFFu /* gpuInstanceId / computeInstanceId without MIG */

/* Slot alive: someone holds the OFD write lock on its byte.  F_OFD_GETLK
 * only asks; it works on our read-only descriptor and takes nothing. */
int nvml_slot_alive(int slot)
{
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET,
                       .l_start = SIM_LOCK_SLOT_BASE + slot, .l_len = 1};
    return fcntl(g_nvml.fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
}

static void device_memory(unsigned int i, unsigned long long *total, unsigned long long *used)
{
    const struct sim_state *st = nvml_state();
    const struct sim_device *dv = &st->dev[i];
    *total = dv->mem_total;
    unsigned long long u = __atomic_load_n(&dv->mem_used, __ATOMIC_RELAXED);
    for (int s = 0; s < SIM_MAX_PROCS; s++) {
        const struct sim_proc *p = &st->proc[s];
        uint64_t m = __atomic_load_n(&p->dev[i].mem_used, __ATOMIC_RELAXED);
        if (m && __atomic_load_n(&p->in_use, __ATOMIC_ACQUIRE) && !nvml_slot_alive(s))
            u -= m < u ? m : u; /* dead, not reaped yet */
    }
    u += __atomic_load_n(&st->res.resident[i], __ATOMIC_RELAXED); /* managed, on the device */
    *used = u < *total ? u : *total;
}

NVML_API nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    unsigned int i;
    nvmlReturn_t r = nvml_dev_out(device, memory, &i);
    if (r != NVML_SUCCESS)
        return r;
    device_memory(i, &memory->total, &memory->used);
    memory->free = memory->total - memory->used;
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    unsigned int i;
    nvmlReturn_t r = nvml_dev_out(device, memory, &i);
    if (r != NVML_SUCCESS)
        return r;
    if (memory->version != nvmlMemory_v2)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    device_memory(i, &memory->total, &memory->used);
    memory->reserved = 0; /* the simulator sets nothing aside */
    memory->free = memory->total - memory->used;
    return NVML_SUCCESS;
}

static int has_context(const struct sim_state *st, int slot, unsigned int dev)
{
    for (int c = 0; c < SIM_MAX_CTXS; c++) {
        const struct sim_ctx *cx = &st->ctx[c];
        if (__atomic_load_n(&cx->in_use, __ATOMIC_RELAXED) && cx->proc == slot &&
            cx->dev == (int32_t)dev)
            return 1;
    }
    return 0;
}

/* Each process slot's managed bytes resident on the device (residency table), in one pass. */
static void resident_by_slot(const struct sim_state *st, unsigned int dev, uint64_t out[SIM_MAX_PROCS])
{
    memset(out, 0, SIM_MAX_PROCS * sizeof out[0]);
    uint32_t hwm = __atomic_load_n(&st->res.hwm, __ATOMIC_ACQUIRE);
    for (uint32_t k = 0; k < hwm && k < SIM_MAX_MRANGES; k++) {
        const struct sim_mrange *m = &st->res.r[k];
        if (__atomic_load_n(&m->in_use, __ATOMIC_ACQUIRE) && m->dev == (int32_t)dev &&
            m->preferred != SIM_PINNED && m->proc >= 0 && m->proc < SIM_MAX_PROCS)
            out[m->proc] += __atomic_load_n(&m->resident, __ATOMIC_RELAXED);
    }
}

unsigned int nvml_compute_procs(unsigned int dev, unsigned int *pids,
                                unsigned long long *used_out)
{
    const struct sim_state *st = nvml_state();
    uint64_t resident[SIM_MAX_PROCS];
    resident_by_slot(st, dev, resident);
    unsigned int n = 0;
    for (int s = 0; s < SIM_MAX_PROCS; s++) {
        const struct sim_proc *p = &st->proc[s];
        if (!__atomic_load_n(&p->in_use, __ATOMIC_ACQUIRE))
            continue;
        uint64_t used = __atomic_load_n(&p->dev[dev].mem_used, __ATOMIC_RELAXED) + resident[s];
        if ((used || has_context(st, s, dev)) && nvml_slot_alive(s)) {
            pids[n] = (unsigned int)p->pid;
            used_out[n] = used;
            n++;
        }
    }
    return n;
}

/* NVML's two-call protocol: too small a *infoCount (0 with infos NULL to
 * ask) gets INSUFFICIENT_SIZE and the count needed; none running: SUCCESS
 * and 0.  `wide` selects the v2/v3 layout (with MIG instance ids). */
static nvmlReturn_t list(nvmlDevice_t device, unsigned int *infoCount, void *infos, int wide,
                         int compute)
{
    unsigned int i;
    nvmlReturn_t r = nvml_dev_out(device, infoCount, &i);
    if (r != NVML_SUCCESS)
        return r;
    unsigned int pids[SIM_MAX_PROCS];
    unsigned long long used[SIM_MAX_PROCS];
    unsigned int n = compute ? nvml_compute_procs(i, pids, used) : 0;
    if (*infoCount < n) {
        *infoCount = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    if (n && !infos)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned int k = 0; k < n; k++) {
        if (wide) {
            nvmlProcessInfo_v2_t *o = (nvmlProcessInfo_v2_t *)infos + k;
            memset(o, 0, sizeof *o);
            o->pid = pids[k];
            o->usedGpuMemory = used[k];
            o->gpuInstanceId = o->computeInstanceId = NO_INSTANCE;
        } else {
            nvmlProcessInfo_v1_t *o = (nvmlProcessInfo_v1_t *)infos + k;
            memset(o, 0, sizeof *o);
            o->pid = pids[k];
            o->usedGpuMemory = used[k];
        }
    }
    *infoCount = n;
    return NVML_SUCCESS;
}

#define PROCESS_LIST(fn, type, wide, compute)                                         \
    NVML_API nvmlReturn_t fn(nvmlDevice_t device, unsigned int *infoCount, type *infos) \
    {                                                                                 \
        return list(device, infoCount, infos, wide, compute);                         \
    }

PROCESS_LIST(nvmlDeviceGetComputeRunningProcesses, nvmlProcessInfo_v1_t, 0, 1)
PROCESS_LIST(nvmlDeviceGetComputeRunningProcesses_v2, nvmlProcessInfo_v2_t, 1, 1)
PROCESS_LIST(nvmlDeviceGetComputeRunningProcesses_v3, nvmlProcessInfo_t, 1, 1)
PROCESS_LIST(nvmlDeviceGetGraphicsRunningProcesses, nvmlProcessInfo_v1_t, 0, 0)
PROCESS_LIST(nvmlDeviceGetGraphicsRunningProcesses_v2, nvmlProcessInfo_v2_t, 1, 0)
PROCESS_LIST(nvmlDeviceGetGraphicsRunningProcesses_v3, nvmlProcessInfo_t, 1, 0)
PROCESS_LIST(nvmlDeviceGetMPSComputeRunningProcesses, nvmlProcessInfo_v1_t, 0, 0)
PROCESS_LIST(nvmlDeviceGetMPSComputeRunningProcesses_v2, nvmlProcessInfo_v2_t, 1, 0)
PROCESS_LIST(nvmlDeviceGetMPSComputeRunningProcesses_v3, nvmlProcessInfo_t, 1, 0)
