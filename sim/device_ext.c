/*
 * device_ext.c: device queries beyond the attribute table (properties,
 * compute capability, PCI lookup, peers) and context settings.  The
 * simulated devices share one host address space, so any two different
 * devices can access each other's memory (peer access is granted).
 */
#include <stdio.h>

#include "sim.h"

#define PEER_ACCESS_ALREADY_ENABLED ((CUresult)704)
#define PEER_ACCESS_NOT_ENABLED ((CUresult)705)
#define CTX_FLAGS_MASK 0x1fu /* scheduling (0-4) and blocking-sync flags */

CUresult cuDeviceGetProperties(CUdevprop *prop, CUdevice dev)
{
    CUresult r = sim_check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!prop)
        return CUDA_ERROR_INVALID_VALUE;
    static const CUdevice_attribute a[] = {
        CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X,
        CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z,
        CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y,
        CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK,
        CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY, CU_DEVICE_ATTRIBUTE_WARP_SIZE,
        CU_DEVICE_ATTRIBUTE_MAX_PITCH, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK,
        CU_DEVICE_ATTRIBUTE_CLOCK_RATE, CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT};
    int v[14];
    for (int i = 0; i < 14; i++)
        if ((r = cuDeviceGetAttribute(&v[i], a[i], dev)) != CUDA_SUCCESS)
            return r;
    *prop = (CUdevprop){v[0], {v[1], v[2], v[3]}, {v[4], v[5], v[6]}, v[7], v[8], v[9],
                        v[10], v[11], v[12], v[13]};
    return CUDA_SUCCESS;
}

CUresult cuDeviceComputeCapability(int *major, int *minor, CUdevice dev)
{
    CUresult r = sim_check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!major || !minor)
        return CUDA_ERROR_INVALID_VALUE;
    cuDeviceGetAttribute(major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    cuDeviceGetAttribute(minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetByPCIBusId(CUdevice *dev, const char *pciBusId)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!dev || !pciBusId)
        return CUDA_ERROR_INVALID_VALUE;
    unsigned dom = 0, bus = 0, slot = 0, fn = 0;
    /* "domain:bus:device.function" or "bus:device.function", hex */
    if (sscanf(pciBusId, "%x:%x:%x.%x", &dom, &bus, &slot, &fn) != 4 &&
        (dom = 0, sscanf(pciBusId, "%x:%x.%x", &bus, &slot, &fn) != 3))
        return CUDA_ERROR_INVALID_VALUE;
    if (dom != 0 || slot != 0 || fn != 0 || bus < 1 || (int)bus > sim_ndev() ||
        sim_ord((int)bus - 1) < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    *dev = (CUdevice)sim_ord((int)bus - 1);
    return CUDA_SUCCESS;
}

CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev)
{
    CUresult r = sim_check_dev(dev);
    if (r == CUDA_SUCCESS)
        r = sim_check_dev(peerDev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!canAccessPeer)
        return CUDA_ERROR_INVALID_VALUE;
    *canAccessPeer = dev != peerDev;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetP2PAttribute(int *value, CUdevice_P2PAttribute attrib, CUdevice srcDevice,
                                 CUdevice dstDevice)
{
    CUresult r = sim_check_dev(srcDevice);
    if (r == CUDA_SUCCESS)
        r = sim_check_dev(dstDevice);
    if (r != CUDA_SUCCESS)
        return r;
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    if (srcDevice == dstDevice)
        return CUDA_ERROR_INVALID_DEVICE;
    switch (attrib) {
    case CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK: *value = 0; break;
    case CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED: *value = 1; break;
    case CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED: *value = 0; break;
    case CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED: *value = 0; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetExecAffinitySupport(int *pi, CUexecAffinityType type, CUdevice dev)
{
    CUresult r = sim_check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pi || (int)type < 0 || type >= CU_EXEC_AFFINITY_TYPE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    *pi = 0; /* SM partitions are an MPS feature: not modelled */
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
    CUresult r = sim_check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (flags & ~CTX_FLAGS_MASK)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_sim.lock);
    g_sim.primary_flags[dev] = flags;
    if (g_sim.primary[dev])
        g_sim.primary[dev]->flags = flags;
    pthread_mutex_unlock(&g_sim.lock);
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{
    return cuDevicePrimaryCtxSetFlags_v2(dev, flags);
}

CUresult cuCtxSetFlags(unsigned int flags)
{
    struct CUctx_st *ctx;
    CUresult r = sim_current_ctx(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    if (flags & ~CTX_FLAGS_MASK)
        return CUDA_ERROR_INVALID_VALUE;
    ctx->flags = flags;
    return CUDA_SUCCESS;
}

static CUresult peer_check(CUcontext peer, struct CUctx_st **cur)
{
    CUresult r = sim_current_ctx(cur);
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_handle_ok(peer, SIM_K_CTX))
        return CUDA_ERROR_INVALID_CONTEXT;
    return peer->dev == (*cur)->dev ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS;
}

CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags)
{
    struct CUctx_st *cur;
    CUresult r = peer_check(peerContext, &cur);
    if (r != CUDA_SUCCESS)
        return r;
    if (Flags)
        return CUDA_ERROR_INVALID_VALUE;
    unsigned int bit = 1u << peerContext->dev;
    if (cur->peers & bit)
        return PEER_ACCESS_ALREADY_ENABLED;
    cur->peers |= bit;
    return CUDA_SUCCESS;
}

CUresult cuCtxDisablePeerAccess(CUcontext peerContext)
{
    struct CUctx_st *cur;
    CUresult r = peer_check(peerContext, &cur);
    if (r != CUDA_SUCCESS)
        return r;
    unsigned int bit = 1u << peerContext->dev;
    if (!(cur->peers & bit))
        return PEER_ACCESS_NOT_ENABLED;
    cur->peers &= ~bit;
    return CUDA_SUCCESS;
}

CUresult cuCtxResetPersistingL2Cache(void)
{
    struct CUctx_st *ctx;
    return sim_current_ctx(&ctx);
}

CUresult cuCtxGetExecAffinity(CUexecAffinityParam *pExecAffinity, CUexecAffinityType type)
{
    struct CUctx_st *ctx;
    CUresult r = sim_current_ctx(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pExecAffinity || type != CU_EXEC_AFFINITY_TYPE_SM_COUNT)
        return CUDA_ERROR_INVALID_VALUE;
    pExecAffinity->type = type;
    pExecAffinity->param.smCount.val = (unsigned int)g_sim.sm_count; /* the whole device */
    return CUDA_SUCCESS;
}

/* CUDA 12.5: an event over all the context's work so far, and a wait that
 * orders the context's later work after an event. */
CUresult cuCtxRecordEvent(CUcontext hCtx, CUevent hEvent)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_handle_ok(hCtx, SIM_K_CTX))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!sim_handle_ok(hEvent, SIM_K_EVENT) || hEvent->ctx != hCtx)
        return CUDA_ERROR_INVALID_HANDLE;
    if ((r = cuCtxPushCurrent_v2(hCtx)) != CUDA_SUCCESS)
        return r;
    r = cuEventRecord(hEvent, NULL); /* the legacy stream orders after everything */
    CUcontext popped;
    cuCtxPopCurrent_v2(&popped);
    return r;
}

CUresult cuCtxWaitEvent(CUcontext hCtx, CUevent hEvent)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_handle_ok(hCtx, SIM_K_CTX))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!sim_handle_ok(hEvent, SIM_K_EVENT))
        return CUDA_ERROR_INVALID_HANDLE;
    return hEvent->ctx == hCtx ? CUDA_SUCCESS : cuEventSynchronize(hEvent);
}

/* The deprecated attach/detach pair: the current context, counted by the
 * caller as a reference it gives back with cuCtxDetach. */
CUresult cuCtxAttach(CUcontext *pctx, unsigned int flags)
{
    struct CUctx_st *ctx;
    CUresult r = sim_current_ctx(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pctx || flags)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = ctx;
    return CUDA_SUCCESS;
}

CUresult cuCtxDetach(CUcontext ctx)
{
    struct CUctx_st *cur;
    CUresult r = sim_current_ctx(&cur);
    if (r != CUDA_SUCCESS)
        return r;
    return sim_handle_ok(ctx, SIM_K_CTX) && ctx == cur ? CUDA_SUCCESS
                                                       : CUDA_ERROR_INVALID_CONTEXT;
}

CUresult cuDeviceGetTexture1DLinearMaxWidth(size_t *maxWidthInElements, CUarray_format format,
                                            unsigned numChannels, CUdevice dev)
{
    (void)format;
    CUresult r = sim_check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!maxWidthInElements || (numChannels != 1 && numChannels != 2 && numChannels != 4))
        return CUDA_ERROR_INVALID_VALUE;
    *maxWidthInElements = 1ull << 28; /* an sm_90 device */
    return CUDA_SUCCESS;
}
