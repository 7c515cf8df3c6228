/*
 * libshim/nvml_hooks.c: NVML as a job sees it.  On the job's GPU,
 * nvmlDeviceGetMemoryInfo(_v2) present the quota as cuMemGetInfo does
 * (meminfo_hooks.c): total = min(quota, real total), used = the job's ledger
 * usage, free = total - used clamped to [0, real free], v2 reserved = 0; the
 * process lists show the job's own processes (its pids, its ledger bytes),
 * never the neighbours'.  The real function runs first, so NVML still
 * validates handles, pointers and struct versions; any error passes as is.
 * Another GPU, no job segment, or (memory) no quota: NVML's answer unchanged.
 * A multi-device job (TGS_PARTS) shows each of its GPUs with that GPU's part
 * (nvml_job.c reads the part's files), whichever part the process attached to.
 */
#include <string.h>

#include "nvml_shim.h"

#define NO_INSTANCE 0xFFFFFFFFu /* gpuInstanceId / computeInstanceId without MIG */

/* dev is the job's GPU: the segment's device UUID; if NVML knows no device
 * of that UUID (a simulated GPU registered as "GPU-sim-N"), its ordinal. */
static bool job_device(nvmlDevice_t dev, const struct tgs_nvml_job *j)
{
    if (j->device_uuid[0]) {
        char u[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
        if (tgs_nvml_uuid(dev, u, sizeof(u)) == NVML_SUCCESS && strcmp(u, j->device_uuid) == 0)
            return true;
        nvmlDevice_t other;
        if (tgs_nvml_by_uuid(j->device_uuid, &other) == NVML_SUCCESS)
            return false;
    }
    unsigned int idx;
    return j->device_index >= 0 && tgs_nvml_index(dev, &idx) == NVML_SUCCESS &&
           idx == (unsigned int)j->device_index;
}

/* A multi-device job: its part on dev (by dev's UUID), read from the part's files. */
static int part_view(nvmlDevice_t dev, struct tgs_nvml_job *j, unsigned int *pids,
                     unsigned long long *bytes, unsigned int max, unsigned int *n)
{
    char u[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    return tgs_nvml_uuid(dev, u, sizeof(u)) == NVML_SUCCESS &&
           tgs_nvml_part(u, j, pids, bytes, max, n);
}

/* 1 when the job's view replaced NVML's */
static int present(nvmlDevice_t dev, unsigned long long *total, unsigned long long *freep,
                    unsigned long long *used)
{
    struct tgs_nvml_job j;
    unsigned int n;
    if (part_view(dev, &j, NULL, NULL, 0, &n)) {
        if (!j.has_quota)
            return 0;
    } else if (!tgs_nvml_job(&j) || !j.has_quota || !job_device(dev, &j))
        return 0;
    uint64_t t = j.mem_quota < *total ? j.mem_quota : *total;
    uint64_t fr = j.mem_used >= t ? 0 : t - j.mem_used;
    if (fr > *freep)
        fr = *freep;
    *total = t;
    *freep = fr;
    *used = j.mem_used;
    return 1;
}

TGS_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    nvmlReturn_t (*real)(nvmlDevice_t, nvmlMemory_t *) = (nvmlReturn_t (*)(
        nvmlDevice_t, nvmlMemory_t *))tgs_nvml_real(TGS_NVML_nvmlDeviceGetMemoryInfo);
    if (!real)
        return NVML_ERROR_UNINITIALIZED;
    nvmlReturn_t r = real(device, memory);
    if (r == NVML_SUCCESS && memory)
        present(device, &memory->total, &memory->free, &memory->used);
    return r;
}

TGS_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    nvmlReturn_t (*real)(nvmlDevice_t, nvmlMemory_v2_t *) = (nvmlReturn_t (*)(
        nvmlDevice_t, nvmlMemory_v2_t *))tgs_nvml_real(TGS_NVML_nvmlDeviceGetMemoryInfo_v2);
    if (!real)
        return NVML_ERROR_UNINITIALIZED;
    nvmlReturn_t r = real(device, memory);
    if (r == NVML_SUCCESS && memory &&
        present(device, &memory->total, &memory->free, &memory->used))
        memory->reserved = 0; /* the job has no share of the driver's reserve */
    return r;
}

/* NVML's two-call protocol: too small a *infoCount (0 with infos NULL to
 * ask) gets INSUFFICIENT_SIZE and the count needed. */
static nvmlReturn_t list(int id, nvmlDevice_t dev, unsigned int *count, void *infos, int wide,
                         int compute)
{
    nvmlReturn_t (*real)(nvmlDevice_t, unsigned int *, void *) =
        (nvmlReturn_t (*)(nvmlDevice_t, unsigned int *, void *))tgs_nvml_real(id);
    if (!real)
        return NVML_ERROR_UNINITIALIZED;
    struct tgs_nvml_job j;
    unsigned int pids[TGS_SEG_MAX_SLOTS];
    unsigned long long bytes[TGS_SEG_MAX_SLOTS];
    unsigned int n = 0;
    if (!count)
        return real(dev, count, infos);
    if (part_view(dev, &j, pids, bytes, TGS_SEG_MAX_SLOTS, &n))
        n = compute ? n : 0;   /* the job's processes are compute processes */
    else if (tgs_nvml_job(&j) && job_device(dev, &j))
        n = compute ? tgs_nvml_job_procs(pids, bytes, TGS_SEG_MAX_SLOTS) : 0;
    else
        return real(dev, count, infos);
    if (*count < n) {
        *count = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    if (n && !infos)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned int k = 0; k < n; k++) {
        if (wide) {
            nvmlProcessInfo_v2_t *o = (nvmlProcessInfo_v2_t *)infos + k;
            memset(o, 0, sizeof(*o));
            o->pid = pids[k];
            o->usedGpuMemory = bytes[k];
            o->gpuInstanceId = o->computeInstanceId = NO_INSTANCE;
        } else {
            nvmlProcessInfo_v1_t *o = (nvmlProcessInfo_v1_t *)infos + k;
            memset(o, 0, sizeof(*o));
            o->pid = pids[k];
            o->usedGpuMemory = bytes[k];
        }
    }
    *count = n;
    return NVML_SUCCESS;
}

#define TGS_NVML_LIST(fn, type, wide, compute)                                                \
    TGS_EXPORT nvmlReturn_t fn(nvmlDevice_t device, unsigned int *infoCount, type *infos)     \
    {                                                                                         \
        return list(TGS_NVML_##fn, device, infoCount, infos, wide, compute);                  \
    }

TGS_NVML_LIST(nvmlDeviceGetComputeRunningProcesses, nvmlProcessInfo_v1_t, 0, 1)
TGS_NVML_LIST(nvmlDeviceGetComputeRunningProcesses_v2, nvmlProcessInfo_v2_t, 1, 1)
TGS_NVML_LIST(nvmlDeviceGetComputeRunningProcesses_v3, nvmlProcessInfo_t, 1, 1)
TGS_NVML_LIST(nvmlDeviceGetGraphicsRunningProcesses, nvmlProcessInfo_v1_t, 0, 0)
TGS_NVML_LIST(nvmlDeviceGetGraphicsRunningProcesses_v2, nvmlProcessInfo_v2_t, 1, 0)
TGS_NVML_LIST(nvmlDeviceGetGraphicsRunningProcesses_v3, nvmlProcessInfo_t, 1, 0)
TGS_NVML_LIST(nvmlDeviceGetMPSComputeRunningProcesses, nvmlProcessInfo_v1_t, 0, 0)
TGS_NVML_LIST(nvmlDeviceGetMPSComputeRunningProcesses_v2, nvmlProcessInfo_v2_t, 1, 0)
TGS_NVML_LIST(nvmlDeviceGetMPSComputeRunningProcesses_v3, nvmlProcessInfo_t, 1, 0)
