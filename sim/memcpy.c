/*
 * memcpy.c: copies, memsets, advice and prefetch.  Copies move the bytes at
 * once and take no device time (bandwidth is not modelled); synchronous
 * copies first wait for the context's queued work, as the legacy stream
 * orders them after it on a real GPU.
 */
#include <string.h>

#include "sim.h"

static CUresult check_dev_range(CUdeviceptr p, size_t n)
{
    return sim_mem_range_ok(p, n) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* How a copy is issued: synchronous or not, through a _ptds/_ptsz entry point
 * (the per-thread default stream) or not (the legacy stream). */
#define SYNC 1
#define PT 2

/* Synchronous work goes to a default stream and waits: not while that
 * touches a capture, nor as a potentially unsafe call during one. */
static CUresult sync_ctx(int how)
{
    struct CUctx_st *ctx;
    CUresult r = sim_current_ctx(&ctx);
    if (r == CUDA_SUCCESS && !(how & PT))
        r = sim_capture_check_legacy(ctx);
    if (r == CUDA_SUCCESS)
        r = sim_capture_check_unsafe();
    return r != CUDA_SUCCESS ? r : sim_ctx_sync(ctx);
}

static CUresult async_check(CUstream s)
{
    struct CUctx_st *ctx;
    struct CUstream_st *obj;
    return sim_stream_resolve(s, &ctx, &obj);
}

/* An asynchronous copy into a capturing stream becomes a memcpy node. */
static CUresult copy(CUmemorytype dt, void *dst, CUmemorytype st, const void *src, size_t n,
                     int how, CUstream s)
{
    CUresult r;
    if (!(how & SYNC) && sim_capture_copy(s, (how & PT) != 0, dt, (uintptr_t)dst, st,
                                          (uintptr_t)src, n, &r))
        return r;
    memcpy(dst, src, n);
    return CUDA_SUCCESS;
}

static CUresult htod(CUdeviceptr dst, const void *src, size_t n, int how, CUstream s)
{
    CUresult r = (how & SYNC) ? sync_ctx(how) : async_check(s);
    if (r != CUDA_SUCCESS || n == 0)
        return r;
    if (!src || check_dev_range(dst, n) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_VALUE;
    return copy(CU_MEMORYTYPE_DEVICE, (void *)(uintptr_t)dst, CU_MEMORYTYPE_HOST, src, n, how,
                s);
}

static CUresult dtoh(void *dst, CUdeviceptr src, size_t n, int how, CUstream s)
{
    CUresult r = (how & SYNC) ? sync_ctx(how) : async_check(s);
    if (r != CUDA_SUCCESS || n == 0)
        return r;
    if (!dst || check_dev_range(src, n) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_VALUE;
    return copy(CU_MEMORYTYPE_HOST, dst, CU_MEMORYTYPE_DEVICE, (const void *)(uintptr_t)src, n, how,
                s);
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    return htod(dstDevice, srcHost, ByteCount, SYNC, NULL);
}
CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    return htod(dstDevice, srcHost, ByteCount, SYNC | PT, NULL);
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                              CUstream hStream)
{
    return htod(dstDevice, srcHost, ByteCount, 0, hStream);
}
CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                                   CUstream hStream)
{
    return htod(dstDevice, srcHost, ByteCount, PT, hStream);
}
CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    return dtoh(dstHost, srcDevice, ByteCount, SYNC, NULL);
}
CUresult cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    return dtoh(dstHost, srcDevice, ByteCount, SYNC | PT, NULL);
}
CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                              CUstream hStream)
{
    return dtoh(dstHost, srcDevice, ByteCount, 0, hStream);
}
CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                   CUstream hStream)
{
    return dtoh(dstHost, srcDevice, ByteCount, PT, hStream);
}

static CUresult dtod(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, int how)
{
    CUresult r = sync_ctx(how);
    if (r != CUDA_SUCCESS || ByteCount == 0)
        return r;
    if (check_dev_range(dstDevice, ByteCount) || check_dev_range(srcDevice, ByteCount))
        return CUDA_ERROR_INVALID_VALUE;
    memmove((void *)(uintptr_t)dstDevice, (const void *)(uintptr_t)srcDevice, ByteCount);
    return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
    return dtod(dstDevice, srcDevice, ByteCount, SYNC);
}
CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
    return dtod(dstDevice, srcDevice, ByteCount, SYNC | PT);
}

/* The synchronous memsets run in a default stream: not the legacy one while a
 * blocking stream of the context captures (how: PT for the _ptds variants). */
static CUresult memset_n(CUdeviceptr dst, unsigned int v, size_t n, size_t elem, int how)
{
    struct CUctx_st *ctx;
    CUresult r = sim_current_ctx(&ctx);
    if (r == CUDA_SUCCESS && !(how & PT))
        r = sim_capture_check_legacy(ctx);
    if (r != CUDA_SUCCESS || n == 0)
        return r;
    if (n > SIZE_MAX / elem || (dst % elem) || check_dev_range(dst, n * elem))
        return CUDA_ERROR_INVALID_VALUE;
    if (elem == 1) {
        memset((void *)(uintptr_t)dst, (int)(v & 0xff), n);
    } else {
        uint32_t *p = (uint32_t *)(uintptr_t)dst;
        for (size_t i = 0; i < n; i++)
            p[i] = v;
    }
    return CUDA_SUCCESS;
}

CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    return memset_n(dstDevice, uc, N, 1, SYNC);
}
CUresult cuMemsetD8_v2_ptds(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    return memset_n(dstDevice, uc, N, 1, SYNC | PT);
}
CUresult cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
    return memset_n(dstDevice, ui, N, 4, SYNC);
}
CUresult cuMemsetD32_v2_ptds(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
    return memset_n(dstDevice, ui, N, 4, SYNC | PT);
}

/* Advice and prefetch are validated, recorded, and move residency (residency.c). */
static CUresult check_loc_dev(int dev)
{
    return dev == -1 /* CU_DEVICE_CPU */ || (dev >= 0 && dev < sim_ndev())
               ? CUDA_SUCCESS
               : CUDA_ERROR_INVALID_DEVICE;
}

static CUresult check_location(CUmemLocation loc)
{
    switch (loc.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
        return check_loc_dev(loc.id);
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

static CUresult advise_common(CUdeviceptr p, size_t count, CUmem_advise advice)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (advice < CU_MEM_ADVISE_SET_READ_MOSTLY || advice > CU_MEM_ADVISE_UNSET_ACCESSED_BY ||
        count == 0 || check_dev_range(p, count))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* Remember the advice for cuMemRangeGetAttribute (loc: device, -1 host). */
static void record_advice(CUdeviceptr p, CUmem_advise advice, int loc)
{
    switch (advice) {
    case CU_MEM_ADVISE_SET_READ_MOSTLY: sim_region_advise(p, SIM_ADV_READ_MOSTLY, 1); break;
    case CU_MEM_ADVISE_UNSET_READ_MOSTLY: sim_region_advise(p, SIM_ADV_READ_MOSTLY, 0); break;
    case CU_MEM_ADVISE_SET_PREFERRED_LOCATION: sim_region_advise(p, SIM_ADV_PREFERRED, loc); break;
    case CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION:
        sim_region_advise(p, SIM_ADV_PREFERRED, -2);
        break;
    case CU_MEM_ADVISE_SET_ACCESSED_BY: sim_region_advise(p, SIM_ADV_ACCESSED_BY_SET, loc); break;
    case CU_MEM_ADVISE_UNSET_ACCESSED_BY:
        sim_region_advise(p, SIM_ADV_ACCESSED_BY_CLEAR, loc);
        break;
    }
}

static int location_ordinal(CUmemLocation loc)
{
    return loc.type == CU_MEM_LOCATION_TYPE_DEVICE ? loc.id : -1;
}

CUresult cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUdevice device)
{
    CUresult r = advise_common(devPtr, count, advice);
    if (r == CUDA_SUCCESS)
        r = check_loc_dev(device);
    if (r == CUDA_SUCCESS)
        record_advice(devPtr, advice, device);
    return r;
}

CUresult cuMemAdvise_v2(CUdeviceptr devPtr, size_t count, CUmem_advise advice,
                        CUmemLocation location)
{
    CUresult r = advise_common(devPtr, count, advice);
    if (r == CUDA_SUCCESS)
        r = check_location(location);
    if (r == CUDA_SUCCESS)
        record_advice(devPtr, advice, location_ordinal(location));
    return r;
}

/* The bytes a prefetch moved cost bus time: device time on its stream
 * (bytes / TGS_SIM_PCIE_GBPS), queued like a kernel of that stream. */
static void prefetch_charge(CUstream s, uint64_t moved)
{
    struct CUctx_st *ctx;
    struct CUstream_st *obj;
    uint64_t seq;
    if (!moved || sim_stream_resolve(s, &ctx, &obj) != CUDA_SUCCESS)
        return;
    if (sim_enqueue(ctx, sim_res_migration_ns(moved), 0, &seq) == CUDA_SUCCESS)
        sim_stream_note(ctx, obj, seq);
}

static CUresult prefetch_common(CUdeviceptr p, size_t count, CUstream s)
{
    CUresult r = async_check(s);
    if (r != CUDA_SUCCESS)
        return r;
    return count && !check_dev_range(p, count) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream)
{
    CUresult r = prefetch_common(devPtr, count, hStream);
    if (r == CUDA_SUCCESS)
        r = check_loc_dev(dstDevice);
    if (r == CUDA_SUCCESS)
        prefetch_charge(hStream, sim_region_advise(devPtr, SIM_ADV_PREFETCH, dstDevice));
    return r;
}
CUresult cuMemPrefetchAsync_ptsz(CUdeviceptr devPtr, size_t count, CUdevice dstDevice,
                                 CUstream hStream)
{
    return cuMemPrefetchAsync(devPtr, count, dstDevice, hStream);
}
CUresult cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count, CUmemLocation location,
                               unsigned int flags, CUstream hStream)
{
    CUresult r = prefetch_common(devPtr, count, hStream);
    if (r == CUDA_SUCCESS && flags != 0)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = check_location(location);
    if (r == CUDA_SUCCESS)
        prefetch_charge(hStream,
                        sim_region_advise(devPtr, SIM_ADV_PREFETCH, location_ordinal(location)));
    return r;
}

/* What advice and prefetch recorded, for a range inside one managed
 * allocation (the simulator keeps them per allocation). */
CUresult cuMemRangeGetAttribute(void *data, size_t dataSize, CUmem_range_attribute attribute,
                                CUdeviceptr devPtr, size_t count)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_region reg;
    if (!data || !count || sim_region_find(devPtr, &reg) || reg.kind != SIM_R_MANAGED ||
        count > reg.size - (devPtr - reg.base) || dataSize < 4 || dataSize % 4)
        return CUDA_ERROR_INVALID_VALUE;
    int *v = data;
    int n = (int)(dataSize / 4);
    switch (attribute) {
    case CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY:
        *v = reg.read_mostly;
        break;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION:
        *v = reg.preferred;
        break;
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION:
        *v = reg.last_prefetch;
        break;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE:
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE: {
        int loc = attribute == CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE ? reg.preferred
                                                                             : reg.last_prefetch;
        *v = loc == -2 ? CU_MEM_LOCATION_TYPE_INVALID
             : loc == -1 ? CU_MEM_LOCATION_TYPE_HOST
                         : CU_MEM_LOCATION_TYPE_DEVICE;
        break;
    }
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID:
        *v = reg.preferred >= 0 ? reg.preferred : 0;
        break;
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID:
        *v = reg.last_prefetch >= 0 ? reg.last_prefetch : 0;
        break;
    case CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY: {
        int k = 0;
        if (reg.accessed_by & (1u << 31) && k < n)
            v[k++] = -1;
        for (int d = 0; d < SIM_MAX_DEVICES && k < n; d++)
            if (reg.accessed_by & (1u << d))
                v[k++] = d;
        while (k < n)
            v[k++] = -2;
        break;
    }
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

CUresult cuMemRangeGetAttributes(void **data, size_t *dataSizes,
                                 CUmem_range_attribute *attributes, size_t numAttributes,
                                 CUdeviceptr devPtr, size_t count)
{
    if (!data || !dataSizes || !attributes || !numAttributes)
        return sim_check_init() ? sim_check_init() : CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < numAttributes; i++) {
        CUresult r = cuMemRangeGetAttribute(data[i], dataSizes[i], attributes[i], devPtr, count);
        if (r != CUDA_SUCCESS)
            return r;
    }
    return CUDA_SUCCESS;
}
CUresult cuMemPrefetchAsync_v2_ptsz(CUdeviceptr devPtr, size_t count, CUmemLocation location,
                                    unsigned int flags, CUstream hStream)
{
    return cuMemPrefetchAsync_v2(devPtr, count, location, flags, hStream);
}
