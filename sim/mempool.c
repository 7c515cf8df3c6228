/*
 * mempool.c: memory pools.  Each device has a default pool and a current
 * pool (cuDeviceSetMemPool); cuMemAllocAsync allocates from the current
 * one, cuMemAllocFromPoolAsync from any pool of the device.  A pool counts
 * the bytes allocated from it (USED_MEM_*); the simulator frees at once,
 * so reserved memory equals used memory and trimming has nothing to do.
 */
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#define ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES 1
#define ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES 3
#define ATTR_RELEASE_THRESHOLD 4
#define ATTR_RESERVED_MEM_CURRENT 5
#define ATTR_RESERVED_MEM_HIGH 6
#define ATTR_USED_MEM_CURRENT 7
#define ATTR_USED_MEM_HIGH 8

static struct CUmemPoolHandle_st *default_pool(int dev)
{
    struct CUmemPoolHandle_st *p = &g_sim.default_pool[dev];
    if (!p->obj.kind) { /* first use: the defaults of a fresh pool */
        pthread_mutex_lock(&g_sim.lock);
        if (!p->obj.kind) {
            p->dev = dev;
            p->is_default = 1;
            p->reuse[0] = p->reuse[1] = p->reuse[2] = 1;
            p->access = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
            __atomic_store_n(&p->obj.kind, SIM_K_POOL, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&g_sim.lock);
    }
    return p;
}

int sim_pool_ok(const struct CUmemPoolHandle_st *p)
{
    uintptr_t a = (uintptr_t)p, d = (uintptr_t)g_sim.default_pool;
    if (a >= d && a < d + sizeof g_sim.default_pool)
        return (a - d) % sizeof *p == 0 && (int)((a - d) / sizeof *p) < sim_ndev() &&
               p->obj.kind == SIM_K_POOL;
    return sim_handle_ok(p, SIM_K_POOL);
}

struct CUmemPoolHandle_st *sim_pool_current(int dev)
{
    struct CUmemPoolHandle_st *p = __atomic_load_n(&g_sim.current_pool[dev], __ATOMIC_ACQUIRE);
    return p ? p : default_pool(dev);
}

void sim_pool_charge(struct CUmemPoolHandle_st *p, CUdeviceptr base)
{
    struct sim_region reg;
    if (sim_region_find(base, &reg))
        return;
    sim_region_set_pool(base, p, NULL);
    uint64_t used = __atomic_add_fetch(&p->used, reg.size, __ATOMIC_RELAXED);
    uint64_t high = __atomic_load_n(&p->used_high, __ATOMIC_RELAXED);
    while (used > high &&
           !__atomic_compare_exchange_n(&p->used_high, &high, used, 1, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED))
        ;
}

void sim_pool_uncharge(struct CUmemPoolHandle_st *p, uint64_t bytes)
{
    __atomic_sub_fetch(&p->used, bytes, __ATOMIC_RELAXED);
}

/* *out = get(dev), for a valid device and out. */
static CUresult device_pool(CUmemoryPool *out, CUdevice dev, CUmemoryPool (*get)(CUdevice))
{
    CUresult r = sim_check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    *out = get(dev);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    return device_pool(pool_out, dev, default_pool);
}

CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    return device_pool(pool, dev, sim_pool_current);
}

CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    CUresult r = sim_check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_pool_ok(pool) || pool->dev != dev)
        return CUDA_ERROR_INVALID_VALUE;
    __atomic_store_n(&g_sim.current_pool[dev], pool, __ATOMIC_RELEASE);
    return CUDA_SUCCESS;
}

CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!pool || !poolProps || poolProps->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        poolProps->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return poolProps && poolProps->location.type == CU_MEM_LOCATION_TYPE_HOST
                   ? CUDA_ERROR_NOT_SUPPORTED
                   : CUDA_ERROR_INVALID_VALUE;
    if ((r = sim_check_dev(poolProps->location.id)) != CUDA_SUCCESS)
        return r;
    struct CUmemPoolHandle_st *p = calloc(1, sizeof *p);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    p->obj.kind = SIM_K_POOL;
    p->dev = poolProps->location.id;
    p->reuse[0] = p->reuse[1] = p->reuse[2] = 1;
    p->access = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    sim_handle_add(p);
    *pool = p;
    return CUDA_SUCCESS;
}

CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_pool_ok(pool) || pool->is_default)
        return CUDA_ERROR_INVALID_VALUE;
    /* a destroyed current pool gives way to the default one */
    __atomic_compare_exchange_n(&g_sim.current_pool[pool->dev], &pool, NULL, 0, __ATOMIC_ACQ_REL,
                                __ATOMIC_RELAXED);
    sim_handle_del(pool);
    sim_region_set_pool(0, NULL, pool); /* its allocations outlive it */
    pool->obj.kind = 0;
    free(pool);
    return CUDA_SUCCESS;
}

CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    (void)minBytesToKeep;
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    return sim_pool_ok(pool) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_pool_ok(pool) || !value)
        return CUDA_ERROR_INVALID_VALUE;
    switch ((int)attr) {
    case ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES ... ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        pool->reuse[attr - 1] = *(int *)value != 0;
        return CUDA_SUCCESS;
    case ATTR_RELEASE_THRESHOLD:
        pool->release_threshold = *(cuuint64_t *)value;
        return CUDA_SUCCESS;
    case ATTR_RESERVED_MEM_HIGH:
    case ATTR_USED_MEM_HIGH: /* may only be reset to zero: to the current value */
        if (*(cuuint64_t *)value != 0)
            return CUDA_ERROR_INVALID_VALUE;
        __atomic_store_n(&pool->used_high, __atomic_load_n(&pool->used, __ATOMIC_RELAXED),
                         __ATOMIC_RELAXED);
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_pool_ok(pool) || !value)
        return CUDA_ERROR_INVALID_VALUE;
    switch ((int)attr) {
    case ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES ... ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        *(int *)value = pool->reuse[attr - 1];
        return CUDA_SUCCESS;
    case ATTR_RELEASE_THRESHOLD:
        *(cuuint64_t *)value = pool->release_threshold;
        return CUDA_SUCCESS;
    case ATTR_RESERVED_MEM_CURRENT:
    case ATTR_USED_MEM_CURRENT:
        *(cuuint64_t *)value = __atomic_load_n(&pool->used, __ATOMIC_RELAXED);
        return CUDA_SUCCESS;
    case ATTR_RESERVED_MEM_HIGH:
    case ATTR_USED_MEM_HIGH:
        *(cuuint64_t *)value = __atomic_load_n(&pool->used_high, __ATOMIC_RELAXED);
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *map, size_t count)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_pool_ok(pool) || (count && !map))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++) {
        if (map[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
            sim_check_dev(map[i].location.id) != CUDA_SUCCESS)
            return CUDA_ERROR_INVALID_DEVICE;
        if (map[i].location.id == pool->dev && map[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            return CUDA_ERROR_INVALID_VALUE; /* the owner keeps read-write access */
    }
    return CUDA_SUCCESS;
}

CUresult cuMemPoolGetAccess(CUmemAccess_flags *flags, CUmemoryPool memPool,
                            CUmemLocation *location)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!flags || !location || !sim_pool_ok(memPool) ||
        location->type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    *flags = location->id == memPool->dev ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE
                                          : CU_MEM_ACCESS_FLAGS_PROT_NONE;
    return CUDA_SUCCESS;
}

/* The CUDA 13 location-based forms: device locations only (no host pools). */
static CUresult location_dev(const CUmemLocation *loc, CUmemAllocationType type, int *dev)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!loc || type != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    if (loc->type != CU_MEM_LOCATION_TYPE_DEVICE)
        return loc->type == CU_MEM_LOCATION_TYPE_HOST ||
                       loc->type == CU_MEM_LOCATION_TYPE_HOST_NUMA
                   ? CUDA_ERROR_NOT_SUPPORTED
                   : CUDA_ERROR_INVALID_VALUE;
    *dev = loc->id;
    return sim_check_dev(loc->id);
}

CUresult cuMemGetDefaultMemPool(CUmemoryPool *pool_out, CUmemLocation *location,
                                CUmemAllocationType type)
{
    int dev;
    CUresult r = location_dev(location, type, &dev);
    return r != CUDA_SUCCESS ? r : cuDeviceGetDefaultMemPool(pool_out, dev);
}

CUresult cuMemGetMemPool(CUmemoryPool *pool, CUmemLocation *location, CUmemAllocationType type)
{
    int dev;
    CUresult r = location_dev(location, type, &dev);
    return r != CUDA_SUCCESS ? r : cuDeviceGetMemPool(pool, dev);
}

CUresult cuMemSetMemPool(CUmemLocation *location, CUmemAllocationType type, CUmemoryPool pool)
{
    int dev;
    CUresult r = location_dev(location, type, &dev);
    return r != CUDA_SUCCESS ? r : cuDeviceSetMemPool(dev, pool);
}
