/*
 * stream_ext.c: stream and event calls beyond create/sync/record, and the
 * context queries that go with them.  A context's streams share one FIFO
 * (stream_event.c), so waiting on an event of the same context is already
 * satisfied by the order; an event of another context is waited for on
 * the host.  Host functions and stream callbacks run on the calling thread
 * once the stream's earlier work is done (the caller blocks until then),
 * so they see every effect of that work and later work follows them.
 */
#include "sim.h"

#define WAIT_EXTERNAL 0x1
#define RECORD_EXTERNAL 0x1

/* Outside capture: a context's streams share one FIFO, so the order
 * already holds; the waiting stream's synchronize must also cover the
 * event's work.  Across contexts the host waits for the event.  During
 * capture the rules are capture_deps.c's. */
static CUresult wait_event(CUstream hStream, CUevent hEvent, unsigned int Flags, int ptsz)
{
    struct CUctx_st *ctx;
    struct CUstream_st *obj;
    CUresult r = sim_stream_resolve(hStream, &ctx, &obj);
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_handle_ok(hEvent, SIM_K_EVENT))
        return CUDA_ERROR_INVALID_HANDLE;
    if (Flags & ~(unsigned int)WAIT_EXTERNAL)
        return CUDA_ERROR_INVALID_VALUE;
    if (sim_capture_wait(hStream, ptsz, hEvent, Flags, ctx, obj, &r))
        return r;
    if (!hEvent->recorded)
        return CUDA_SUCCESS;
    if (hEvent->ctx == ctx) {
        if (obj && hEvent->seq > __atomic_load_n(&obj->last_seq, __ATOMIC_ACQUIRE))
            __atomic_store_n(&obj->last_seq, hEvent->seq, __ATOMIC_RELEASE);
    } else if (sim_handle_ok(hEvent->ctx, SIM_K_CTX)) {
        sim_wait_seq(hEvent->ctx, hEvent->seq);
    }
    return CUDA_SUCCESS;
}
CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    return wait_event(hStream, hEvent, Flags, 0);
}
CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    return wait_event(hStream, hEvent, Flags, 1);
}

/* A stream callback may not be captured (the real driver refuses it: the
 * capture is invalidated); a host function becomes a host node. */
static CUresult add_callback(CUstream hStream, CUstreamCallback callback, void *userData,
                             unsigned int flags, int ptsz)
{
    struct CUctx_st *ctx;
    struct CUstream_st *obj;
    CUresult r = sim_stream_resolve(hStream, &ctx, &obj);
    if (r != CUDA_SUCCESS)
        return r;
    if (!callback || flags)
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = sim_capture_check_sync(hStream, ptsz, ctx, obj)) != CUDA_SUCCESS)
        return r;
    r = sim_stream_sync(hStream);
    callback(hStream, r, userData);
    return CUDA_SUCCESS;
}
CUresult cuStreamAddCallback(CUstream hStream, CUstreamCallback callback, void *userData,
                             unsigned int flags)
{
    return add_callback(hStream, callback, userData, flags, 0);
}
CUresult cuStreamAddCallback_ptsz(CUstream hStream, CUstreamCallback callback, void *userData,
                                  unsigned int flags)
{
    return add_callback(hStream, callback, userData, flags, 1);
}

static CUresult host_func(CUstream hStream, CUhostFn fn, void *userData, int ptsz)
{
    struct CUctx_st *ctx;
    struct CUstream_st *obj;
    CUresult r = sim_stream_resolve(hStream, &ctx, &obj);
    if (r != CUDA_SUCCESS)
        return r;
    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
    if (sim_capture_host(hStream, ptsz, fn, userData, &r))
        return r;
    if ((r = sim_stream_sync(hStream)) != CUDA_SUCCESS)
        return r;
    fn(userData);
    return CUDA_SUCCESS;
}
CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
    return host_func(hStream, fn, userData, 0);
}
CUresult cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData)
{
    return host_func(hStream, fn, userData, 1);
}

CUresult cuStreamGetFlags(CUstream hStream, unsigned int *flags)
{
    struct CUctx_st *ctx;
    struct CUstream_st *obj;
    CUresult r = sim_stream_resolve(hStream, &ctx, &obj);
    if (r != CUDA_SUCCESS)
        return r;
    if (!flags)
        return CUDA_ERROR_INVALID_VALUE;
    *flags = obj ? obj->flags : CU_STREAM_DEFAULT;
    return CUDA_SUCCESS;
}
CUresult cuStreamGetFlags_ptsz(CUstream hStream, unsigned int *flags)
{
    return cuStreamGetFlags(hStream, flags);
}

CUresult cuStreamGetCtx(CUstream hStream, CUcontext *pctx)
{
    struct CUctx_st *ctx;
    struct CUstream_st *obj;
    CUresult r = sim_stream_resolve(hStream, &ctx, &obj);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = ctx;
    return CUDA_SUCCESS;
}
CUresult cuStreamGetCtx_ptsz(CUstream hStream, CUcontext *pctx)
{
    return cuStreamGetCtx(hStream, pctx);
}

CUresult cuStreamGetId(CUstream hStream, unsigned long long *streamId)
{
    struct CUctx_st *ctx;
    struct CUstream_st *obj;
    CUresult r = sim_stream_resolve(hStream, &ctx, &obj);
    if (r != CUDA_SUCCESS)
        return r;
    if (!streamId)
        return CUDA_ERROR_INVALID_VALUE;
    /* the special streams have small ids; a created one its address */
    *streamId = obj ? (unsigned long long)(uintptr_t)obj
                    : hStream == TGS_CU_STREAM_PER_THREAD ? 2ull : 1ull;
    return CUDA_SUCCESS;
}
CUresult cuStreamGetId_ptsz(CUstream hStream, unsigned long long *streamId)
{
    return cuStreamGetId(hStream, streamId);
}

CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags)
{
    if (flags & ~(unsigned int)RECORD_EXTERNAL)
        return sim_check_init() ? sim_check_init() : CUDA_ERROR_INVALID_VALUE;
    return cuEventRecord(hEvent, hStream);
}
CUresult cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int flags)
{
    if (flags & ~(unsigned int)RECORD_EXTERNAL)
        return sim_check_init() ? sim_check_init() : CUDA_ERROR_INVALID_VALUE;
    return cuEventRecord_ptsz(hEvent, hStream);
}

CUresult cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
    struct CUctx_st *ctx;
    CUresult r = sim_current_ctx(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    if (leastPriority)
        *leastPriority = 0;
    if (greatestPriority)
        *greatestPriority = -5;
    return CUDA_SUCCESS;
}

#define SIM_LIMIT_CIG_SHMEM_FALLBACK_ENABLED 9 /* CU_LIMIT_SHMEM_SIZE = 7, CIG_ENABLED = 8 */

/* Defaults of an sm_90 context. */
static const size_t limit_default[] = {1024, 1048576, 8388608, 2, 2048, 32, 0};

CUresult cuCtxGetLimit(size_t *pvalue, CUlimit limit)
{
    struct CUctx_st *ctx;
    CUresult r = sim_current_ctx(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pvalue || (int)limit < 0 || limit > SIM_LIMIT_CIG_SHMEM_FALLBACK_ENABLED)
        return CUDA_ERROR_INVALID_VALUE;
    /* the CIG limits (CUDA 12.8+: shared memory size, CIG enabled, fallback)
     * describe a context made for CUDA-in-graphics, which a simulated context
     * never is: 0, as cuBLASLt reads them at start-up */
    if (limit > CU_LIMIT_PERSISTING_L2_CACHE_SIZE) {
        *pvalue = 0;
        return CUDA_SUCCESS;
    }
    *pvalue = g_sim.limits_set[limit] ? g_sim.limits[limit] : limit_default[limit];
    return CUDA_SUCCESS;
}

CUresult cuCtxSetLimit(CUlimit limit, size_t value)
{
    struct CUctx_st *ctx;
    CUresult r = sim_current_ctx(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    if ((int)limit < 0 || limit > CU_LIMIT_PERSISTING_L2_CACHE_SIZE)
        return CUDA_ERROR_INVALID_VALUE;
    if (limit == CU_LIMIT_PERSISTING_L2_CACHE_SIZE && value > (50331648 * 3ull) / 4)
        return CUDA_ERROR_INVALID_VALUE;
    g_sim.limits[limit] = value;
    g_sim.limits_set[limit] = 1;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetFlags(unsigned int *flags)
{
    struct CUctx_st *ctx;
    CUresult r = sim_current_ctx(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    if (!flags)
        return CUDA_ERROR_INVALID_VALUE;
    *flags = ctx->flags;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)
{
    struct CUctx_st *c;
    CUresult r = sim_ctx_or_current(ctx, &c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    *version = 3020; /* the context ABI every current driver reports */
    return CUDA_SUCCESS;
}

CUresult cuCtxGetId(CUcontext ctx, unsigned long long *ctxId)
{
    struct CUctx_st *c;
    CUresult r = sim_ctx_or_current(ctx, &c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!ctxId)
        return CUDA_ERROR_INVALID_VALUE;
    *ctxId = (unsigned long long)(uintptr_t)c;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetCacheConfig(CUfunc_cache *pconfig)
{
    struct CUctx_st *ctx;
    CUresult r = sim_current_ctx(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pconfig)
        return CUDA_ERROR_INVALID_VALUE;
    *pconfig = (CUfunc_cache)g_sim.cache_config;
    return CUDA_SUCCESS;
}

CUresult cuCtxSetCacheConfig(CUfunc_cache config)
{
    struct CUctx_st *ctx;
    CUresult r = sim_current_ctx(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    if ((int)config < 0 || config > CU_FUNC_CACHE_PREFER_EQUAL)
        return CUDA_ERROR_INVALID_VALUE;
    g_sim.cache_config = config;
    return CUDA_SUCCESS;
}

/* The profiler API (cudaProfiler.h): nothing to collect, nothing fails. */
CUresult cuProfilerInitialize(const char *configFile, const char *outputFile, int outputMode);
CUresult cuProfilerStart(void);
CUresult cuProfilerStop(void);
CUresult cuProfilerInitialize(const char *configFile, const char *outputFile, int outputMode)
{
    (void)configFile, (void)outputFile, (void)outputMode;
    return sim_check_init();
}
CUresult cuProfilerStart(void) { return sim_check_init(); }
CUresult cuProfilerStop(void) { return sim_check_init(); }
