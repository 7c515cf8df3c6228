/*
 * copy_order.c: what a copy or memset waits for and is refused for before it
 * runs.  An asynchronous one needs only its stream; a synchronous one goes to
 * a default stream and waits for the context's queued work: not the legacy
 * stream while a blocking stream of the context captures, nor (where the
 * call counts as potentially unsafe) during a capture sequence.
 */
#include "sim.h"

CUresult sim_copy_order(int how, CUstream s, int unsafe)
{
    struct CUctx_st *ctx;
    struct CUstream_st *obj;
    int sync = how & SIM_HOW_SYNC;
    CUresult r = sim_stream_resolve(sync ? NULL : s, &ctx, &obj);
    if (r != CUDA_SUCCESS || !sync)
        return r;
    if (!(how & SIM_HOW_PT) && (r = sim_capture_check_legacy(ctx)) != CUDA_SUCCESS)
        return r;
    if (unsafe && (r = sim_capture_check_unsafe()) != CUDA_SUCCESS)
        return r;
    return sim_ctx_sync(ctx);
}
