/*
 * stream_wait.c: cuStreamWaitEvent.  Outside capture: a context's streams
 * share one FIFO, so the order already holds; the waiting stream's
 * synchronize must also cover the event's work.  Across contexts the host
 * waits for the event.  During capture the rules are capture_deps.c's.
 */
#include "sim.h"

static CUresult wait_event(CUstream s, CUevent e, unsigned int flags, int ptsz)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_handle_ok(e, SIM_K_EVENT))
        return CUDA_ERROR_INVALID_HANDLE;
    struct CUctx_st *ctx;
    struct CUstream_st *obj;
    r = sim_stream_resolve(s, &ctx, &obj);
    if (r != CUDA_SUCCESS)
        return r;
    if (flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL)
        return CUDA_ERROR_INVALID_VALUE;
    if (sim_capture_wait(s, ptsz, e, flags, ctx, obj, &r))
        return r;
    if (!e->recorded)
        return CUDA_SUCCESS;
    if (e->ctx == ctx) {
        if (obj && e->seq > __atomic_load_n(&obj->last_seq, __ATOMIC_ACQUIRE))
            __atomic_store_n(&obj->last_seq, e->seq, __ATOMIC_RELEASE);
    } else if (sim_handle_ok(e->ctx, SIM_K_CTX)) {
        sim_wait_seq(e->ctx, e->seq);
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
