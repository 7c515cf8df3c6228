/*
 * libshim/oversub.c: memory oversubscription for opportunistic jobs
 * (docs/oversubscription.md).  When the job's .ctl sets mem_total (and the
 * job is OPPORTUNISTIC), its device allocations (cuMemAlloc_v2,
 * cuMemAllocPitch_v2) become managed memory with global attach: the driver's
 * own paging moves them to host memory when production needs the device,
 * and back on access or prefetch.  The ledger then admits against mem_total
 * (what the job may hold in all); an allocation that takes the job past
 * mem_quota (what it may keep resident) is advised to prefer the host.
 * Production jobs never get here: their memory stays device memory, which
 * the driver never evicts.
 */
#include "shim.h"

#define TGS_CU_DEVICE_CPU (-1)

int tgs_oversub_on(void)
{
    if (!tgs_slot()) /* attaches on first use */
        return 0;
    const struct tgs_ctl_header *c = tgs_g.ctl;
    return c && TGS_RELAXED_LOAD(&c->priority) == TGS_PRIORITY_OPPORTUNISTIC &&
           TGS_RELAXED_LOAD(&c->mem_total) != 0 && tgs_g.real.cuMemAllocManaged;
}

uint64_t tgs_oversub_limit(void)
{
    const struct tgs_ctl_header *c = tgs_g.ctl;
    return tgs_oversub_on() ? TGS_RELAXED_LOAD(&c->mem_total) : TGS_RELAXED_LOAD(&c->mem_quota);
}

CUresult tgs_oversub_alloc(CUdeviceptr *dptr, uint64_t bytes)
{
    /* deferred frees (oversub_free.c) still hold their bytes: wait for them before refusing */
    if (tgs_mem_admit(bytes) != 0 && (!tgs_oversub_reap(1) || tgs_mem_admit(bytes) != 0)) {
        tgs_log(TGS_LOG_INFO, "oversubscribed allocation of %llu bytes refused by mem_total",
                (unsigned long long)bytes);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUresult r = tgs_g.real.cuMemAllocManaged(dptr, (size_t)bytes, CU_MEM_ATTACH_GLOBAL);
    if (r != CUDA_SUCCESS) {
        tgs_mem_release(bytes);
        return r;
    }
    tgs_ptrmap_put(&tgs_g.ptrs, TGS_KIND_DPTR, (uint64_t)*dptr, bytes);
    uint64_t quota = TGS_RELAXED_LOAD(&tgs_g.ctl->mem_quota), limit, used;
    tgs_mem_view(&limit, &used);
    if (quota != TGS_QUOTA_UNLIMITED && used > quota && tgs_g.real.cuMemAdvise) {
        /* past the resident budget: let it live on the host (accessed over the bus) */
        CUresult a = tgs_g.real.cuMemAdvise(*dptr, (size_t)bytes,
                                            CU_MEM_ADVISE_SET_PREFERRED_LOCATION,
                                            TGS_CU_DEVICE_CPU);
        if (a != CUDA_SUCCESS)
            tgs_log(TGS_LOG_WARN, "cuMemAdvise(preferred host) failed: %d", (int)a);
        tgs_oversub_track((uint64_t)*dptr, bytes, a == CUDA_SUCCESS);
        return CUDA_SUCCESS;
    }
    tgs_oversub_track((uint64_t)*dptr, bytes, 0); /* oversub_watch.c: prefetched back */
    return CUDA_SUCCESS;
}

/* cuMemAllocPitch_v2's checks and a 512-byte pitch (what real GPUs give). */
CUresult tgs_oversub_alloc_pitch(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                                 unsigned int elem)
{
    if (!dptr || !pitch || width == 0 || height == 0 || (elem != 4 && elem != 8 && elem != 16))
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t p = ((uint64_t)width + 511) & ~(uint64_t)511;
    if (p < width || height > UINT64_MAX / p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = tgs_oversub_alloc(dptr, p * height);
    if (r == CUDA_SUCCESS)
        *pitch = (size_t)p;
    return r;
}

/*
 * Stream-ordered allocations (cuMemAllocAsync, from the device's current pool):
 * managed memory too, allocated at once (valid before its stream reaches the
 * call: stream order only asks that it be usable from there on).  Its free,
 * cuMemFreeAsync, happens once the stream's work queued so far is done
 * (oversub_free.c).  Explicit pools (cuMemAllocFromPoolAsync)
 * stay device memory: a pool may promise IPC export handles or a location
 * managed memory cannot keep (docs/oversubscription.md).
 */
CUresult tgs_oversub_alloc_async(CUdeviceptr *dptr, uint64_t bytes, CUstream stream)
{
    (void)stream;
    if (!dptr || !bytes)
        return CUDA_ERROR_INVALID_VALUE;
    tgs_oversub_reap(0); /* frees deferred until their stream's work was done */
    CUresult r = tgs_oversub_alloc(dptr, bytes);
    if (r == CUDA_SUCCESS)
        tgs_ptrmap_put(&tgs_g.ptrs, TGS_KIND_ASYNC_MANAGED, (uint64_t)*dptr, bytes);
    return r;
}

/*
 * Legacy 32-bit entry points (cuMemAlloc, cuMemAllocPitch): managed memory like the v2
 * when its address fits in 32 bits.  The driver promises no such address for managed
 * memory (on a 64-bit process it practically never gives one), so otherwise the managed
 * allocation is given back and the caller allocates device memory as before (admitted
 * against mem_total).  Returns 1 with *r set when it answered, 0 to fall back.
 */
int tgs_oversub_alloc32(unsigned int *dptr, uint64_t bytes, CUresult *r)
{
    CUdeviceptr p = 0;
    if (!dptr || !bytes)
        return 0;
    *r = tgs_oversub_alloc(&p, bytes);
    if (*r != CUDA_SUCCESS)
        return 1;
    if (p <= 0xffffffffull) {
        *dptr = (unsigned int)p;
        return 1;
    }
    uint64_t b;
    tgs_oversub_forget(p);
    if (tgs_g.real.cuMemFree_v2 && tgs_g.real.cuMemFree_v2(p) == CUDA_SUCCESS &&
        tgs_ptrmap_take(&tgs_g.ptrs, TGS_KIND_DPTR, (uint64_t)p, &b))
        tgs_mem_release(b);
    return 0;
}
