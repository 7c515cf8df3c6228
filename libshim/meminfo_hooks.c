/*
 * libshim/meminfo_hooks.c: the quota presented as the device's memory.
 * total = min(quota, real total); free = total - job usage, clamped to
 * [0, total] and to the real free memory: never negative, never wrapped.
 * Without a quota (no segment limit, no TGS_MEM_LIMIT) the real values pass.
 * A multi-device job's process asking on another device of the job sees
 * that device's part: its quota and usage (parts.c, nvml_job.c).
 * An oversubscribed job (oversub.c) sees total = mem_total, free = mem_total
 * - what the job holds: its budget, not the device's residency.
 */
#include "nvml_shim.h"

/* A multi-device job asked about another of its devices: that device's
 * part (its quota and usage, read from its files: nvml_job.c), as NVML shows it. */
static void present_other(CUdevice dev, uint64_t *freep, uint64_t *totalp)
{
    char uuid[64];
    struct tgs_nvml_job j;
    unsigned int n;
    if (tgs_cuda_uuid(dev, uuid, sizeof(uuid)) != 0 ||
        !tgs_nvml_part(uuid, &j, NULL, NULL, 0, &n))
        return;
    tgs_part_warn(dev);
    if (!j.has_quota)
        return;
    uint64_t total = j.mem_quota < *totalp ? j.mem_quota : *totalp;
    uint64_t fr = j.mem_used >= total ? 0 : total - j.mem_used;
    *totalp = total;
    if (fr < *freep)
        *freep = fr;
}

static void present(uint64_t *freep, uint64_t *totalp)
{
    uint64_t q, used;
    int quota = tgs_mem_view(&q, &used);
    CUdevice other;
    if (TGS_UNLIKELY(tgs_g.opt.parts[0]) && tgs_other_device(&other)) {
        present_other(other, freep, totalp);
        return;
    }
    if (!quota)
        return;
    if (tgs_oversub_on()) { /* oversubscribed: the job's own budget, whatever is resident */
        *totalp = q;
        *freep = used >= q ? 0 : q - used;
        return;
    }
    uint64_t total = q < *totalp ? q : *totalp;
    uint64_t fr = used >= total ? 0 : total - used;
    if (fr > *freep)
        fr = *freep;
    *totalp = total;
    *freep = fr;
}

TGS_EXPORT CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
    TGS_HIT(cuMemGetInfo_v2);
    tgs_ensure_init();
    if (!tgs_g.real.cuMemGetInfo_v2)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = tgs_g.real.cuMemGetInfo_v2(free, total);
    if (r == CUDA_SUCCESS && free && total) {
        uint64_t f = *free, t = *total;
        present(&f, &t);
        *free = (size_t)f;
        *total = (size_t)t;
    }
    tgs_heartbeat();
    return r;
}

TGS_EXPORT CUresult cuMemGetInfo(unsigned int *free, unsigned int *total)
{
    TGS_HIT(cuMemGetInfo);
    tgs_ensure_init();
    if (!tgs_g.real.cuMemGetInfo)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = tgs_g.real.cuMemGetInfo(free, total);
    if (r == CUDA_SUCCESS && free && total) {
        uint64_t f = *free, t = *total;
        present(&f, &t);
        *free = (unsigned int)f;
        *total = (unsigned int)t;
    }
    return r;
}

TGS_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    TGS_HIT(cuDeviceTotalMem_v2);
    tgs_ensure_init();
    if (!tgs_g.real.cuDeviceTotalMem_v2)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = tgs_g.real.cuDeviceTotalMem_v2(bytes, dev);
    uint64_t q, used;
    if (r == CUDA_SUCCESS && bytes && tgs_mem_view(&q, &used) && q < *bytes)
        *bytes = (size_t)q;
    return r;
}

TGS_EXPORT CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
    TGS_HIT(cuDeviceTotalMem);
    tgs_ensure_init();
    if (!tgs_g.real.cuDeviceTotalMem)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = tgs_g.real.cuDeviceTotalMem(bytes, dev);
    uint64_t q, used;
    if (r == CUDA_SUCCESS && bytes && tgs_mem_view(&q, &used) && q < *bytes)
        *bytes = (unsigned int)q;
    return r;
}
