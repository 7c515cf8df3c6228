/*
 * lookup.c: cuGetProcAddress(_v2), resolving a base name ("cuMemAlloc") to
 * the variant a caller built against cudaVersion expects, as the real driver
 * does.  One row per exported entry point: {base name, symbol, the CUDA
 * version that introduced it (cudaTypedefs.h: PFN_<base>_v<version>),
 * per-thread-default-stream variant or not}.  For a request the newest
 * legacy-stream row with version <= cudaVersion wins; with
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, that row's _ptsz/_ptds
 * twin is returned instead where one exists (and is old enough).
 *
 * Two tables: every public entry point (entry_points.def, generated from
 * cudaTypedefs.h; what the simulator does not model is a stub answering
 * CUDA_ERROR_NOT_SUPPORTED, see stubs.c) and the hand-written rows[] below
 * for names outside that list.
 */
#include <string.h>

#include "sim.h"

struct lookup_row {
    const char *base;
    const char *symbol;
    int version;
    int per_thread;
    void *fn;
};

#define L(base, sym, ver) {#base, #sym, ver, 0, (void *)sym}
#define P(base, sym, ver) {#base, #sym, ver, 1, (void *)sym}

static const struct lookup_row rows[] = {
    L(cuInit, cuInit, 2000),
    L(cuDriverGetVersion, cuDriverGetVersion, 2020),
    L(cuDeviceGet, cuDeviceGet, 2000),
    L(cuDeviceGetCount, cuDeviceGetCount, 2000),
    L(cuDeviceGetName, cuDeviceGetName, 2000),
    L(cuDeviceGetUuid, cuDeviceGetUuid, 9020),
    L(cuDeviceGetUuid, cuDeviceGetUuid_v2, 11040),
    L(cuDeviceTotalMem, cuDeviceTotalMem, 2000),
    L(cuDeviceTotalMem, cuDeviceTotalMem_v2, 3020),
    L(cuDeviceGetAttribute, cuDeviceGetAttribute, 2000),
    L(cuDeviceGetPCIBusId, cuDeviceGetPCIBusId, 4010),
    L(cuDeviceGetDefaultMemPool, cuDeviceGetDefaultMemPool, 11020),
    L(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 7000),
    L(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease, 7000),
    L(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2, 11000),
    L(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset, 7000),
    L(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset_v2, 11000),
    L(cuDevicePrimaryCtxGetState, cuDevicePrimaryCtxGetState, 7000),
    L(cuCtxCreate, cuCtxCreate, 2000),
    L(cuCtxCreate, cuCtxCreate_v2, 3020),
    L(cuCtxCreate, cuCtxCreate_v3, 11040),
    L(cuCtxCreate, cuCtxCreate_v4, 12050),
    L(cuCtxDestroy, cuCtxDestroy, 2000),
    L(cuCtxDestroy, cuCtxDestroy_v2, 4000),
    L(cuCtxPushCurrent, cuCtxPushCurrent, 2000),
    L(cuCtxPushCurrent, cuCtxPushCurrent_v2, 4000),
    L(cuCtxPopCurrent, cuCtxPopCurrent, 2000),
    L(cuCtxPopCurrent, cuCtxPopCurrent_v2, 4000),
    L(cuCtxSetCurrent, cuCtxSetCurrent, 4000),
    L(cuCtxGetCurrent, cuCtxGetCurrent, 4000),
    L(cuCtxGetDevice, cuCtxGetDevice, 2000),
    L(cuCtxGetDevice, cuCtxGetDevice_v2, 13000),
    L(cuCtxSynchronize, cuCtxSynchronize, 2000),
    L(cuCtxSynchronize, cuCtxSynchronize_v2, 13000),
    L(cuStreamCreate, cuStreamCreate, 2000),
    L(cuStreamCreateWithPriority, cuStreamCreateWithPriority, 5050),
    L(cuStreamGetPriority, cuStreamGetPriority, 5050),
    P(cuStreamGetPriority, cuStreamGetPriority_ptsz, 7000),
    L(cuStreamDestroy, cuStreamDestroy, 2000),
    L(cuStreamDestroy, cuStreamDestroy_v2, 4000),
    L(cuStreamSynchronize, cuStreamSynchronize, 2000),
    P(cuStreamSynchronize, cuStreamSynchronize_ptsz, 7000),
    L(cuStreamQuery, cuStreamQuery, 2000),
    P(cuStreamQuery, cuStreamQuery_ptsz, 7000),
    L(cuEventCreate, cuEventCreate, 2000),
    L(cuEventRecord, cuEventRecord, 2000),
    P(cuEventRecord, cuEventRecord_ptsz, 7000),
    L(cuEventQuery, cuEventQuery, 2000),
    L(cuEventSynchronize, cuEventSynchronize, 2000),
    L(cuEventElapsedTime, cuEventElapsedTime, 2000),
    L(cuEventElapsedTime, cuEventElapsedTime_v2, 12080),
    L(cuEventDestroy, cuEventDestroy, 2000),
    L(cuEventDestroy, cuEventDestroy_v2, 4000),
    L(cuModuleLoadData, cuModuleLoadData, 2000),
    L(cuModuleLoadDataEx, cuModuleLoadDataEx, 2010),
    L(cuModuleGetFunction, cuModuleGetFunction, 2000),
    L(cuModuleUnload, cuModuleUnload, 2000),
    L(cuMemAlloc, cuMemAlloc, 2000),
    L(cuMemAlloc, cuMemAlloc_v2, 3020),
    L(cuMemAllocPitch, cuMemAllocPitch, 2000),
    L(cuMemAllocPitch, cuMemAllocPitch_v2, 3020),
    L(cuMemAllocManaged, cuMemAllocManaged, 6000),
    L(cuMemAllocAsync, cuMemAllocAsync, 11020),
    P(cuMemAllocAsync, cuMemAllocAsync_ptsz, 11020),
    L(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync, 11020),
    P(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz, 11020),
    L(cuMemFree, cuMemFree, 2000),
    L(cuMemFree, cuMemFree_v2, 3020),
    L(cuMemFreeAsync, cuMemFreeAsync, 11020),
    P(cuMemFreeAsync, cuMemFreeAsync_ptsz, 11020),
    L(cuMemGetInfo, cuMemGetInfo, 2000),
    L(cuMemGetInfo, cuMemGetInfo_v2, 3020),
    L(cuMemCreate, cuMemCreate, 10020),
    L(cuMemRelease, cuMemRelease, 10020),
    L(cuMemAddressReserve, cuMemAddressReserve, 10020),
    L(cuMemAddressFree, cuMemAddressFree, 10020),
    L(cuMemMap, cuMemMap, 10020),
    L(cuMemUnmap, cuMemUnmap, 10020),
    L(cuMemSetAccess, cuMemSetAccess, 10020),
    L(cuMemGetAllocationGranularity, cuMemGetAllocationGranularity, 10020),
    L(cuArrayCreate, cuArrayCreate_v2, 3020),
    L(cuArray3DCreate, cuArray3DCreate_v2, 3020),
    L(cuArrayDestroy, cuArrayDestroy, 2000),
    L(cuMipmappedArrayCreate, cuMipmappedArrayCreate, 5000),
    L(cuMipmappedArrayDestroy, cuMipmappedArrayDestroy, 5000),
    L(cuMemcpyHtoD, cuMemcpyHtoD_v2, 3020),
    P(cuMemcpyHtoD, cuMemcpyHtoD_v2_ptds, 7000),
    L(cuMemcpyDtoH, cuMemcpyDtoH_v2, 3020),
    P(cuMemcpyDtoH, cuMemcpyDtoH_v2_ptds, 7000),
    L(cuMemcpyDtoD, cuMemcpyDtoD_v2, 3020),
    P(cuMemcpyDtoD, cuMemcpyDtoD_v2_ptds, 7000),
    L(cuMemcpyHtoDAsync, cuMemcpyHtoDAsync_v2, 3020),
    P(cuMemcpyHtoDAsync, cuMemcpyHtoDAsync_v2_ptsz, 7000),
    L(cuMemcpyDtoHAsync, cuMemcpyDtoHAsync_v2, 3020),
    P(cuMemcpyDtoHAsync, cuMemcpyDtoHAsync_v2_ptsz, 7000),
    L(cuMemsetD8, cuMemsetD8_v2, 3020),
    P(cuMemsetD8, cuMemsetD8_v2_ptds, 7000),
    L(cuMemsetD32, cuMemsetD32_v2, 3020),
    P(cuMemsetD32, cuMemsetD32_v2_ptds, 7000),
    L(cuMemAdvise, cuMemAdvise, 8000),
    L(cuMemAdvise, cuMemAdvise_v2, 12020),
    L(cuMemPrefetchAsync, cuMemPrefetchAsync, 8000),
    P(cuMemPrefetchAsync, cuMemPrefetchAsync_ptsz, 8000),
    L(cuMemPrefetchAsync, cuMemPrefetchAsync_v2, 12020),
    P(cuMemPrefetchAsync, cuMemPrefetchAsync_v2_ptsz, 12020),
    L(cuLaunchKernel, cuLaunchKernel, 4000),
    P(cuLaunchKernel, cuLaunchKernel_ptsz, 7000),
    L(cuLaunchKernelEx, cuLaunchKernelEx, 11060),
    P(cuLaunchKernelEx, cuLaunchKernelEx_ptsz, 11060),
    L(cuLaunchCooperativeKernel, cuLaunchCooperativeKernel, 9000),
    P(cuLaunchCooperativeKernel, cuLaunchCooperativeKernel_ptsz, 9000),
    L(cuGraphCreate, cuGraphCreate, 10000),
    L(cuGraphAddKernelNode, cuGraphAddKernelNode, 10000),
    L(cuGraphAddKernelNode, cuGraphAddKernelNode_v2, 12000),
    L(cuGraphKernelNodeGetParams, cuGraphKernelNodeGetParams, 10000),
    L(cuGraphKernelNodeGetParams, cuGraphKernelNodeGetParams_v2, 12000),
    L(cuGraphGetNodes, cuGraphGetNodes, 10000),
    L(cuGraphNodeGetType, cuGraphNodeGetType, 10000),
    L(cuGraphInstantiate, cuGraphInstantiate, 10000),
    L(cuGraphInstantiate, cuGraphInstantiate_v2, 11000),
    L(cuGraphInstantiateWithFlags, cuGraphInstantiateWithFlags, 11040),
    L(cuGraphInstantiateWithParams, cuGraphInstantiateWithParams, 12000),
    P(cuGraphInstantiateWithParams, cuGraphInstantiateWithParams_ptsz, 12000),
    L(cuGraphLaunch, cuGraphLaunch, 10000),
    P(cuGraphLaunch, cuGraphLaunch_ptsz, 10000),
    L(cuGraphExecDestroy, cuGraphExecDestroy, 10000),
    L(cuGraphDestroy, cuGraphDestroy, 10000),
    L(cuGetErrorString, cuGetErrorString, 6000),
    L(cuGetErrorName, cuGetErrorName, 6000),
    L(cuGetProcAddress, cuGetProcAddress, 11030),
    L(cuGetProcAddress, cuGetProcAddress_v2, 12000),
    L(cuGetExportTable, cuGetExportTable, 3000),
};

#define NROWS (sizeof rows / sizeof rows[0])

/* The exported symbols, by asm name: their C prototypes differ (cuda_abi.h
 * declares the modelled ones), the address is all that is needed here. */
#define E(base, sym, ver, pt) extern CUresult sim_ep_##sym(void) __asm__(#sym);
#include "entry_points.def"
#undef E

static const struct lookup_row ep_rows[] = {
#define E(base, sym, ver, pt) {#base, #sym, ver, pt, (void *)sim_ep_##sym},
#include "entry_points.def"
#undef E
};

#define NEP (sizeof ep_rows / sizeof ep_rows[0])

/* Row i of the union of both tables. */
static const struct lookup_row *row_at(size_t i)
{
    return i < NEP ? &ep_rows[i] : &rows[i - NEP];
}

static CUdriverProcAddressQueryResult resolve(const char *symbol, int version, int per_thread,
                                              void **out)
{
    const struct lookup_row *best = NULL;
    int known = 0;
    for (size_t i = 0; i < NEP + NROWS; i++) {
        const struct lookup_row *r = row_at(i);
        if (r->per_thread || strcmp(r->base, symbol))
            continue;
        known = 1;
        if (r->version <= version && (!best || r->version > best->version))
            best = r;
    }
    if (!best) {
        /* A base with only a per-thread row never happens; names unknown. */
        return known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                     : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    }
    *out = best->fn;
    if (per_thread) {
        size_t n = strlen(best->symbol);
        for (size_t i = 0; i < NEP + NROWS; i++) {
            const struct lookup_row *r = row_at(i);
            if (r->per_thread && r->version <= version && !strncmp(r->symbol, best->symbol, n) &&
                (!strcmp(r->symbol + n, "_ptsz") || !strcmp(r->symbol + n, "_ptds")))
                *out = r->fn;
        }
    }
    return CU_GET_PROC_ADDRESS_SUCCESS;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *symbolStatus)
{
    if (!symbol || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
    *pfn = NULL;
    if (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                              CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
        return CUDA_ERROR_INVALID_VALUE;
    int pt = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    CUdriverProcAddressQueryResult st = resolve(symbol, cudaVersion, pt, pfn);
    /* TGS_LOG_LEVEL=debug: one line per lookup (how a client's needs are found) */
    sim_log(TGS_LOG_DEBUG, "lookup %s %d %llu -> %s", symbol, cudaVersion,
            (unsigned long long)flags,
            st == CU_GET_PROC_ADDRESS_SUCCESS ? "found"
            : st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT ? "version not sufficient"
                                                               : "not found");
    if (symbolStatus)
        *symbolStatus = st;
    if (st != CU_GET_PROC_ADDRESS_SUCCESS) {
        *pfn = NULL;
        return CUDA_ERROR_NOT_FOUND;
    }
    return CUDA_SUCCESS;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    return cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
}
