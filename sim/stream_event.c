/*
 * stream_event.c: streams and events.  A context's work runs in one FIFO
 * (the device runs one kernel at a time anyway), so a stream is just the
 * sequence number of its last item, and an event is a zero-time marker whose
 * simulated completion time the engine records.
 */
#include <stdlib.h>

#include "sim.h"

#define PRIO_LEAST 0
#define PRIO_GREATEST (-5)

CUresult sim_stream_resolve(CUstream s, struct CUctx_st **ctx, struct CUstream_st **obj)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (s == NULL || s == TGS_CU_STREAM_LEGACY || s == TGS_CU_STREAM_PER_THREAD) {
        *obj = NULL;
        return sim_current_ctx(ctx);
    }
    if (!sim_handle_ok(s, SIM_K_STREAM))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!sim_handle_ok(s->ctx, SIM_K_CTX))
        return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    *obj = s;
    *ctx = s->ctx;
    return CUDA_SUCCESS;
}

void sim_stream_note(struct CUctx_st *ctx, struct CUstream_st *obj, uint64_t seq_end)
{
    (void)ctx;
    if (obj)
        __atomic_store_n(&obj->last_seq, seq_end, __ATOMIC_RELEASE);
}

static uint64_t stream_seq(struct CUctx_st *ctx, struct CUstream_st *obj)
{
    /* The default streams synchronise with everything in the context. */
    return obj ? __atomic_load_n(&obj->last_seq, __ATOMIC_ACQUIRE) : sim_ctx_tail(ctx);
}

CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
    struct CUctx_st *ctx;
    CUresult r = sim_current_ctx(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    if (!phStream || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
        return CUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s = calloc(1, sizeof *s);
    if (!s)
        return CUDA_ERROR_OUT_OF_MEMORY;
    s->obj.kind = SIM_K_STREAM;
    s->ctx = ctx;
    s->flags = flags;
    s->priority = priority > PRIO_LEAST ? PRIO_LEAST
                  : priority < PRIO_GREATEST ? PRIO_GREATEST : priority;
    sim_handle_add(s);
    *phStream = s;
    return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    return cuStreamCreateWithPriority(phStream, Flags, 0);
}

CUresult cuStreamGetPriority(CUstream hStream, int *priority)
{
    struct CUctx_st *ctx;
    struct CUstream_st *obj;
    CUresult r = sim_stream_resolve(hStream, &ctx, &obj);
    if (r != CUDA_SUCCESS)
        return r;
    if (!priority)
        return CUDA_ERROR_INVALID_VALUE;
    *priority = obj ? obj->priority : 0;
    return CUDA_SUCCESS;
}

CUresult cuStreamGetPriority_ptsz(CUstream hStream, int *priority)
{
    return cuStreamGetPriority(hStream, priority);
}

CUresult cuStreamDestroy_v2(CUstream hStream)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_handle_ok(hStream, SIM_K_STREAM))
        return CUDA_ERROR_INVALID_HANDLE;
    /* Like the driver: returns at once; queued work still completes. */
    sim_capture_stream_gone(hStream);
    sim_handle_del(hStream);
    hStream->obj.kind = 0;
    free(hStream);
    return CUDA_SUCCESS;
}

CUresult cuStreamDestroy(CUstream hStream) { return cuStreamDestroy_v2(hStream); }

static CUresult stream_sync(CUstream s, int ptsz)
{
    struct CUctx_st *ctx;
    struct CUstream_st *obj;
    CUresult r = sim_stream_resolve(s, &ctx, &obj);
    if (r == CUDA_SUCCESS)
        r = sim_capture_check_sync(s, ptsz, ctx, obj);
    if (r != CUDA_SUCCESS)
        return r;
    sim_wait_seq(ctx, stream_seq(ctx, obj));
    return CUDA_SUCCESS;
}

CUresult sim_stream_sync(CUstream s) { return stream_sync(s, 0); }

CUresult cuStreamSynchronize(CUstream hStream) { return stream_sync(hStream, 0); }
CUresult cuStreamSynchronize_ptsz(CUstream hStream) { return stream_sync(hStream, 1); }

static CUresult stream_query(CUstream hStream, int ptsz)
{
    struct CUctx_st *ctx;
    struct CUstream_st *obj;
    CUresult r = sim_stream_resolve(hStream, &ctx, &obj);
    if (r == CUDA_SUCCESS)
        r = sim_capture_check_sync(hStream, ptsz, ctx, obj);
    if (r != CUDA_SUCCESS)
        return r;
    return sim_seq_done(ctx, stream_seq(ctx, obj)) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuStreamQuery(CUstream hStream) { return stream_query(hStream, 0); }
CUresult cuStreamQuery_ptsz(CUstream hStream) { return stream_query(hStream, 1); }

CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    struct CUctx_st *ctx;
    CUresult r = sim_current_ctx(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    if (!phEvent || (Flags & ~0xfu))
        return CUDA_ERROR_INVALID_VALUE;
    struct CUevent_st *e = calloc(1, sizeof *e);
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    e->obj.kind = SIM_K_EVENT;
    e->ctx = ctx;
    e->flags = Flags;
    sim_handle_add(e);
    *phEvent = e;
    return CUDA_SUCCESS;
}

static CUresult event_record(CUevent hEvent, CUstream hStream, int ptsz)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_handle_ok(hEvent, SIM_K_EVENT))
        return CUDA_ERROR_INVALID_HANDLE;
    struct CUctx_st *ctx;
    struct CUstream_st *obj;
    r = sim_stream_resolve(hStream, &ctx, &obj);
    if (r != CUDA_SUCCESS)
        return r;
    if (sim_capture_record(hEvent, hStream, ptsz, ctx, obj, &r))
        return r;
    uint64_t marker = __atomic_add_fetch(&ctx->next_marker, 1, __ATOMIC_RELAXED), seq;
    r = sim_enqueue(ctx, 0, marker, &seq);
    if (r != CUDA_SUCCESS)
        return r;
    sim_stream_note(ctx, obj, seq);
    hEvent->ctx = ctx;
    hEvent->slot = ctx->slot;
    hEvent->gen = g_sim.st->ctx[ctx->slot].gen;
    hEvent->seq = seq;
    hEvent->marker = marker;
    hEvent->t_ns = 0;
    hEvent->recorded = 1;
    sim_event_times_recorded(hEvent);
    return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
    return event_record(hEvent, hStream, 0);
}

CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream)
{
    return event_record(hEvent, hStream, 1);
}

static CUresult event_check(CUevent e)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    return sim_handle_ok(e, SIM_K_EVENT) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* Querying, synchronizing or timing: never on an event last recorded in a
 * capture; on others, a "potentially unsafe" call during a capture (PyTorch's
 * caching allocator defers its event queries while a capture is underway for
 * this reason). */
static CUresult event_check_use(CUevent e, int unsafe)
{
    CUresult r = event_check(e);
    if (r == CUDA_SUCCESS)
        r = sim_capture_check_event(e);
    if (r == CUDA_SUCCESS && unsafe)
        r = sim_capture_check_unsafe();
    return r;
}

/* 1 when done (and its time cached), 0 when pending. */
static int event_done(CUevent e)
{
    if (!e->recorded || e->t_ns)
        return 1;
    if (!sim_handle_ok(e->ctx, SIM_K_CTX) || !sim_seq_done(e->ctx, e->seq))
        return sim_handle_ok(e->ctx, SIM_K_CTX) ? 0 : 1;
    e->t_ns = sim_marker_time(e->slot, e->gen, e->marker);
    return 1;
}

CUresult cuEventQuery(CUevent hEvent)
{
    CUresult r = event_check_use(hEvent, 1);
    if (r != CUDA_SUCCESS)
        return r;
    return event_done(hEvent) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuEventSynchronize(CUevent hEvent)
{
    CUresult r = event_check_use(hEvent, 1);
    if (r != CUDA_SUCCESS)
        return r;
    if (hEvent->recorded && sim_handle_ok(hEvent->ctx, SIM_K_CTX))
        sim_wait_seq(hEvent->ctx, hEvent->seq);
    event_done(hEvent);
    return CUDA_SUCCESS;
}

CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    CUresult r = event_check_use(hStart, 0);
    if (r == CUDA_SUCCESS)
        r = event_check_use(hEnd, 0);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pMilliseconds)
        return CUDA_ERROR_INVALID_VALUE;
    if ((hStart->flags | hEnd->flags) & CU_EVENT_DISABLE_TIMING)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!hStart->recorded || !hEnd->recorded)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!event_done(hStart) || !event_done(hEnd))
        return CUDA_ERROR_NOT_READY;
    if (!hStart->t_ns || !hEnd->t_ns)
        return CUDA_ERROR_INVALID_HANDLE; /* its context was destroyed before it completed */
    *pMilliseconds = (float)(((double)hEnd->t_ns - (double)hStart->t_ns) / 1e6);
    return CUDA_SUCCESS;
}

CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    return cuEventElapsedTime_v2(pMilliseconds, hStart, hEnd);
}

CUresult cuEventDestroy_v2(CUevent hEvent)
{
    CUresult r = event_check(hEvent);
    if (r != CUDA_SUCCESS)
        return r;
    sim_handle_del(hEvent);
    sim_event_times_forget(hEvent);
    sim_capture_event_gone(hEvent);
    hEvent->obj.kind = 0;
    free(hEvent);
    return CUDA_SUCCESS;
}

CUresult cuEventDestroy(CUevent hEvent) { return cuEventDestroy_v2(hEvent); }
