/*
 * memory.c: device and managed allocations, accounting against the shared
 * device capacity, and the process-local table of device-memory regions.
 * Device memory is lazily mapped host memory (MAP_NORESERVE) and a
 * CUdeviceptr is its process-local address, so copies round-trip exactly.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "sim.h"

#define PAGE 4096ull

CUresult sim_mem_account(int dev, int64_t bytes, int managed)
{
    struct sim_state *st = g_sim.st;
    uint64_t moved = 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        sim_dev_lock(dev);
        struct sim_device *dv = &st->dev[dev];
        struct sim_proc_dev *pd = &st->proc[g_sim.proc_slot].dev[dev];
        if (managed) {
            dv->managed_used += (uint64_t)bytes;
            pd->managed_used += (uint64_t)bytes;
            sim_dev_unlock(dev);
            return CUDA_SUCCESS;
        }
        /* resident managed memory makes room (residency.c): only device
         * allocations themselves make one fail */
        if (bytes <= 0 || dv->mem_used + (uint64_t)bytes <= dv->mem_total) {
            if (bytes > 0 && sim_res_evict_locked(dev, (uint64_t)bytes, &moved)) {
                /* the host cannot take what would have to move: nothing moved */
                sim_dev_unlock(dev);
                sim_log(TGS_LOG_INFO, "device allocation refused: the eviction it needs does "
                                      "not fit in host memory (TGS_SIM_HOST_MEM)");
                if (attempt == 0) {
                    sim_reap_dead(1);
                    continue;
                }
                return CUDA_ERROR_OUT_OF_MEMORY;
            }
            dv->mem_used += (uint64_t)bytes;
            pd->mem_used += (uint64_t)bytes;
            sim_dev_unlock(dev);
            if (moved) /* the write-back of what was evicted, outside the lock */
                sim_sleep_until(sim_now_ns() + sim_res_migration_ns(moved));
            return CUDA_SUCCESS;
        }
        sim_dev_unlock(dev);
        if (attempt == 0)
            sim_reap_dead(1); /* a dead process may still hold memory */
    }
    return CUDA_ERROR_OUT_OF_MEMORY;
}

static size_t region_index(uint64_t p) /* first region with base > p */
{
    size_t lo = 0, hi = g_sim.nregions;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (g_sim.regions[mid].base <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int region_insert(const struct sim_region *r)
{
    pthread_mutex_lock(&g_sim.lock);
    if (g_sim.nregions == g_sim.regions_cap) {
        size_t cap = g_sim.regions_cap ? g_sim.regions_cap * 2 : 64;
        struct sim_region *n = realloc(g_sim.regions, cap * sizeof *n);
        if (!n) {
            pthread_mutex_unlock(&g_sim.lock);
            return -1;
        }
        g_sim.regions = n;
        g_sim.regions_cap = cap;
    }
    size_t i = region_index(r->base);
    memmove(&g_sim.regions[i + 1], &g_sim.regions[i],
            (g_sim.nregions - i) * sizeof *g_sim.regions);
    g_sim.regions[i] = *r;
    g_sim.nregions++;
    pthread_mutex_unlock(&g_sim.lock);
    return 0;
}

/* Remove the region starting exactly at base whose kind is in mask. */
int sim_region_take(uint64_t base, int mask, struct sim_region *out)
{
    pthread_mutex_lock(&g_sim.lock);
    size_t i = region_index(base);
    int ok = i > 0 && g_sim.regions[i - 1].base == base &&
             (mask & (1 << g_sim.regions[i - 1].kind));
    if (ok) {
        *out = g_sim.regions[i - 1];
        memmove(&g_sim.regions[i - 1], &g_sim.regions[i],
                (g_sim.nregions - i) * sizeof *g_sim.regions);
        g_sim.nregions--;
    }
    pthread_mutex_unlock(&g_sim.lock);
    return ok ? 0 : -1;
}

int sim_mem_range_ok(uint64_t p, size_t n)
{
    pthread_mutex_lock(&g_sim.lock);
    size_t i = region_index(p);
    int ok = i > 0 && p - g_sim.regions[i - 1].base <= g_sim.regions[i - 1].size &&
             n <= g_sim.regions[i - 1].size - (p - g_sim.regions[i - 1].base);
    pthread_mutex_unlock(&g_sim.lock);
    return ok;
}

/* [p, p + n) is covered by regions without a gap: several cuMemMap mappings
 * side by side count as one range (cuMemSetAccess takes such a range). */
int sim_mem_range_covered(uint64_t p, size_t n)
{
    pthread_mutex_lock(&g_sim.lock);
    size_t i = region_index(p);
    uint64_t at = p, end = p + n;
    int ok = n > 0 && end > p && i > 0 && p - g_sim.regions[i - 1].base < g_sim.regions[i - 1].size;
    for (i = i - 1; ok && at < end; i++) {
        const struct sim_region *r = i < g_sim.nregions ? &g_sim.regions[i] : NULL;
        if (!r || r->base > at || at - r->base >= r->size) {
            ok = 0;
            break;
        }
        at = r->base + r->size;
    }
    pthread_mutex_unlock(&g_sim.lock);
    return ok;
}

int sim_region_find(uint64_t p, struct sim_region *out)
{
    pthread_mutex_lock(&g_sim.lock);
    size_t i = region_index(p);
    int ok = i > 0 && p - g_sim.regions[i - 1].base < g_sim.regions[i - 1].size;
    if (ok)
        *out = g_sim.regions[i - 1];
    pthread_mutex_unlock(&g_sim.lock);
    return ok ? 0 : -1;
}

/* Note the pool an allocation came from (mempool.c); pool NULL forgets
 * every allocation of old (a pool being destroyed). */
void sim_region_set_pool(uint64_t base, void *pool, void *old)
{
    pthread_mutex_lock(&g_sim.lock);
    if (pool) {
        size_t i = region_index(base);
        if (i > 0 && g_sim.regions[i - 1].base == base)
            g_sim.regions[i - 1].pool = pool;
    } else {
        for (size_t i = 0; i < g_sim.nregions; i++)
            if (g_sim.regions[i].pool == old)
                g_sim.regions[i].pool = NULL;
    }
    pthread_mutex_unlock(&g_sim.lock);
}

uint64_t sim_region_advise(uint64_t p, enum sim_advice what, int value)
{
    int mslot = 0;
    pthread_mutex_lock(&g_sim.lock);
    size_t i = region_index(p);
    if (i > 0 && p - g_sim.regions[i - 1].base < g_sim.regions[i - 1].size) {
        struct sim_region *r = &g_sim.regions[i - 1];
        unsigned int bit = value < 0 ? 1u << 31 : 1u << (value & 7);
        switch (what) {
        case SIM_ADV_READ_MOSTLY: r->read_mostly = value; break;
        case SIM_ADV_PREFERRED: r->preferred = value; break;
        case SIM_ADV_ACCESSED_BY_SET: r->accessed_by |= bit; break;
        case SIM_ADV_ACCESSED_BY_CLEAR: r->accessed_by &= ~bit; break;
        case SIM_ADV_PREFETCH: r->last_prefetch = value; break;
        }
        mslot = r->mslot;
    }
    pthread_mutex_unlock(&g_sim.lock);
    if (mslot && what == SIM_ADV_PREFERRED)
        sim_res_advise_preferred(mslot, value);
    else if (mslot && what == SIM_ADV_PREFETCH)
        return sim_res_prefetch(mslot, value);
    return 0;
}

int sim_region_add_host(uint64_t base, uint64_t size, int kind, unsigned int flags, int dev)
{
    /* page-locked host memory counts against TGS_SIM_HOST_MEM (residency.c) */
    int ms = sim_res_add(dev, base, size, 1);
    if (ms < 0)
        return -1;
    struct sim_region r = {.base = base, .size = size, .kind = kind, .dev = -1, .flags = flags,
                           .mslot = ms};
    if (region_insert(&r) == 0)
        return 0;
    if (ms > 0)
        sim_res_remove(ms);
    return -1;
}

/* Exposed to vmm.c: a mapped VMM range is device memory too. */
int sim_region_add(uint64_t base, uint64_t size, int kind, int dev, void *vmm)
{
    struct sim_region r = {.base = base, .size = size, .kind = kind, .dev = dev, .vmm = vmm};
    return region_insert(&r);
}

CUresult sim_mem_alloc(CUdeviceptr *dptr, size_t bytes, int kind, int low32)
{
    struct CUctx_st *ctx;
    CUresult r = sim_current_ctx(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    if (!dptr || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (bytes > (1ull << 48))
        return CUDA_ERROR_OUT_OF_MEMORY;
    uint64_t size = (bytes + PAGE - 1) & ~(PAGE - 1);
    int managed = kind == SIM_R_MANAGED;
    r = sim_mem_account(ctx->dev, (int64_t)size, managed);
    if (r != CUDA_SUCCESS)
        return r;
    int fl = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | (low32 ? MAP_32BIT : 0);
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, fl, -1, 0);
    struct sim_region reg = {.base = (uint64_t)(uintptr_t)p, .size = size, .acct = size,
                             .kind = kind, .dev = ctx->dev, .preferred = -2,
                             .last_prefetch = -2};
    if (managed && p != MAP_FAILED)
        reg.mslot = sim_res_add(ctx->dev, reg.base, size, 0);
    if (p == MAP_FAILED || reg.mslot < 0 || region_insert(&reg) != 0) {
        if (p != MAP_FAILED)
            munmap(p, size);
        if (reg.mslot > 0)
            sim_res_remove(reg.mslot);
        sim_mem_account(ctx->dev, -(int64_t)size, managed);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *dptr = reg.base;
    if (kind == SIM_R_GRAPH) { /* cuDeviceGetGraphMemAttribute's counters */
        uint64_t now = __atomic_add_fetch(&g_sim.graph_mem[ctx->dev], size, __ATOMIC_RELAXED);
        uint64_t hi = __atomic_load_n(&g_sim.graph_mem_high[ctx->dev], __ATOMIC_RELAXED);
        while (now > hi && !__atomic_compare_exchange_n(&g_sim.graph_mem_high[ctx->dev], &hi, now,
                                                        1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            ;
    }
    return CUDA_SUCCESS;
}

CUresult sim_mem_free(CUdeviceptr dptr, int kind_mask)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (dptr == 0)
        return CUDA_SUCCESS;
    struct sim_region reg;
    if (sim_region_take(dptr, kind_mask, &reg) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (reg.pool)
        sim_pool_uncharge(reg.pool, reg.size);
    if (reg.kind == SIM_R_GRAPH)
        __atomic_sub_fetch(&g_sim.graph_mem[reg.dev], reg.size, __ATOMIC_RELAXED);
    munmap((void *)(uintptr_t)reg.base, reg.size);
    sim_res_remove(reg.mslot);
    return sim_mem_account(reg.dev, -(int64_t)reg.acct, reg.kind == SIM_R_MANAGED);
}

#define FREEABLE ((1 << SIM_R_DEVICE) | (1 << SIM_R_MANAGED) | (1 << SIM_R_GRAPH))

/* The synchronous allocation calls are "potentially unsafe" during stream
 * capture (capture.c); the stream-ordered ones below are not. */
#define UNSAFE_DURING_CAPTURE() \
    do { \
        if (sim_capture_any() && sim_check_init() == CUDA_SUCCESS && \
            sim_capture_check_unsafe() != CUDA_SUCCESS) \
            return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; \
    } while (0)

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    UNSAFE_DURING_CAPTURE();
    return sim_mem_alloc(dptr, bytesize, SIM_R_DEVICE, 0);
}

CUresult cuMemAlloc(unsigned int *dptr, unsigned int bytesize)
{
    CUdeviceptr p = 0;
    UNSAFE_DURING_CAPTURE();
    if (!dptr)
        return sim_check_init() != CUDA_SUCCESS ? sim_check_init() : CUDA_ERROR_INVALID_VALUE;
    CUresult r = sim_mem_alloc(&p, bytesize, SIM_R_DEVICE, 1);
    if (r == CUDA_SUCCESS && p > 0xffffffffull) {
        sim_mem_free(p, FREEABLE);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (r == CUDA_SUCCESS)
        *dptr = (unsigned int)p;
    return r;
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    UNSAFE_DURING_CAPTURE();
    return sim_mem_free(dptr, FREEABLE);
}
CUresult cuMemFree(unsigned int dptr) { return cuMemFree_v2(dptr); }

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
        return sim_check_init() != CUDA_SUCCESS ? sim_check_init() : CUDA_ERROR_INVALID_VALUE;
    UNSAFE_DURING_CAPTURE();
    return sim_mem_alloc(dptr, bytesize, SIM_R_MANAGED, 0);
}

CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                            size_t Height, unsigned int ElementSizeBytes)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!dptr || !pPitch || WidthInBytes == 0 || Height == 0 ||
        (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
        return CUDA_ERROR_INVALID_VALUE;
    size_t pitch = (WidthInBytes + 511) & ~(size_t)511; /* 512-byte rows, like real GPUs */
    if (Height > (1ull << 48) / pitch)
        return CUDA_ERROR_OUT_OF_MEMORY;
    /* Goes through the exported entry point on purpose: -Bsymbolic binds it
     * here, so an LD_PRELOAD library never sees this inner call. */
    r = cuMemAlloc_v2(dptr, pitch * Height);
    if (r == CUDA_SUCCESS)
        *pPitch = pitch;
    return r;
}

CUresult cuMemAllocPitch(unsigned int *dptr, unsigned int *pPitch, unsigned int WidthInBytes,
                         unsigned int Height, unsigned int ElementSizeBytes)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!dptr || !pPitch || WidthInBytes == 0 || Height == 0 ||
        (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t pitch = ((uint64_t)WidthInBytes + 511) & ~511ull;
    if (pitch * Height > 0xffffffffull)
        return CUDA_ERROR_OUT_OF_MEMORY;
    r = cuMemAlloc(dptr, (unsigned int)(pitch * Height));
    if (r == CUDA_SUCCESS)
        *pPitch = (unsigned int)pitch;
    return r;
}

static CUresult check_stream(CUstream s)
{
    struct CUctx_st *ctx;
    struct CUstream_st *obj;
    return sim_stream_resolve(s, &ctx, &obj);
}

/* Stream-ordered allocation: the simulator allocates at once (kernels do not
 * touch memory, so stream order cannot be observed), from the device's
 * current pool, whose usage counters follow (mempool.c). */
CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    CUresult r = check_stream(hStream);
    if (r != CUDA_SUCCESS)
        return r;
    return cuMemAllocFromPoolAsync(dptr, bytesize, sim_pool_current(sim_current_dev()), hStream);
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return cuMemAllocAsync(dptr, bytesize, hStream);
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    CUresult r = check_stream(hStream);
    return r != CUDA_SUCCESS ? r : sim_mem_free(dptr, FREEABLE);
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    return cuMemFreeAsync(dptr, hStream);
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                 CUstream hStream)
{
    CUresult r = check_stream(hStream);
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_pool_ok(pool) || pool->dev != sim_current_dev())
        return CUDA_ERROR_INVALID_VALUE;
    /* stream-ordered: not "unsafe" during capture, so not through cuMemAlloc_v2 */
    if ((r = sim_mem_alloc(dptr, bytesize, SIM_R_DEVICE, 0)) == CUDA_SUCCESS)
        sim_pool_charge(pool, *dptr);
    return r;
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream hStream)
{
    return cuMemAllocFromPoolAsync(dptr, bytesize, pool, hStream);
}

CUresult cuMemGetInfo_v2(size_t *free_out, size_t *total)
{
    struct CUctx_st *ctx;
    CUresult r = sim_current_ctx(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    if (!free_out || !total)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_device *dv = &g_sim.st->dev[ctx->dev];
    /* device allocations and the managed memory resident there */
    uint64_t used = __atomic_load_n(&dv->mem_used, __ATOMIC_RELAXED) +
                    __atomic_load_n(&g_sim.st->res.resident[ctx->dev], __ATOMIC_RELAXED);
    *total = dv->mem_total;
    *free_out = used < dv->mem_total ? dv->mem_total - used : 0;
    return CUDA_SUCCESS;
}

CUresult cuMemGetInfo(unsigned int *free_out, unsigned int *total)
{
    size_t f = 0, t = 0;
    if (!free_out || !total)
        return sim_check_init() != CUDA_SUCCESS ? sim_check_init() : CUDA_ERROR_INVALID_VALUE;
    CUresult r = cuMemGetInfo_v2(&f, &t);
    if (r == CUDA_SUCCESS) {
        *free_out = f > 0xffffffffull ? 0xffffffffu : (unsigned int)f;
        *total = t > 0xffffffffull ? 0xffffffffu : (unsigned int)t;
    }
    return r;
}
