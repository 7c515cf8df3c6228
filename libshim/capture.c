/*
 * libshim/capture.c: CUDA stream capture.
 *
 * Work launched into a capturing stream does not run: it becomes a graph
 * node, and is charged when the graph's executable is launched (graph.c
 * counts its kernel nodes at instantiation).  So a captured launch must take
 * no tokens, no in-flight budget and no gate, and must not be counted.
 *
 * The fast path cannot ask the driver per launch (it costs a few ns), so the
 * begin/end hooks keep tgs_g.captures, the number of capture sequences in
 * progress; while it is nonzero, launches take the slow path, which asks
 * cuStreamIsCapturing(_ptsz) for the launch's stream.  That is the only exact
 * answer: a stream that was never passed to a begin can join a capture
 * through cuStreamWaitEvent on an event recorded in a capturing stream.
 *
 * The drain helper (drain.c) records no tail while any capture is in progress,
 * and a begin waits for a record round in progress (tgs_drain_rec_lock), so no
 * stream can start capturing between its check and its record.
 *
 * The shim's own events (the in-flight cap's, FIT's timing pair) are never
 * recorded into a capturing stream, and while any capture is in progress the
 * shim records and queries them in the RELAXED capture mode: in the default
 * GLOBAL mode an event query during a capture is a prohibited call that
 * invalidates the capture on a real driver.
 */
#include "shim.h"

bool tgs_capturing(CUstream stream, int ptsz)
{
    if (!tgs_capture_any())
        return false;
    tgs_pfn_cuStreamIsCapturing fn = ptsz ? tgs_g.real.cuStreamIsCapturing_ptsz
                                          : tgs_g.real.cuStreamIsCapturing;
    if (!fn)
        fn = tgs_g.real.cuStreamIsCapturing;
    if (!fn)
        return false;
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult r = fn(stream, &st);
    /* IMPLICIT: the legacy stream while a blocking stream captures; the work
     * will be refused by the driver, so it is not charged either */
    if (r == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT)
        return true;
    return r == CUDA_SUCCESS && st != CU_STREAM_CAPTURE_STATUS_NONE;
}

int tgs_capture_relax(void)
{
    if (!tgs_capture_any() || !tgs_g.real.cuThreadExchangeStreamCaptureMode)
        return -1;
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    if (tgs_g.real.cuThreadExchangeStreamCaptureMode(&m) != CUDA_SUCCESS)
        return -1;
    return (int)m;
}

void tgs_capture_restore(int saved)
{
    if (saved < 0)
        return;
    CUstreamCaptureMode m = (CUstreamCaptureMode)saved;
    tgs_g.real.cuThreadExchangeStreamCaptureMode(&m);
}

static void began(CUresult r)
{
    if (r == CUDA_SUCCESS)
        __atomic_add_fetch(&tgs_g.captures, 1, __ATOMIC_RELAXED);
}

/* An end ends the sequence (whatever it returns) when the stream captured
 * before it and no longer does after it. */
static void ended(void)
{
    int v = __atomic_load_n(&tgs_g.captures, __ATOMIC_RELAXED);
    while (v > 0 && !__atomic_compare_exchange_n(&tgs_g.captures, &v, v - 1, 0,
                                                 __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

#define CAPTURE_PROLOGUE(name) \
    TGS_HIT(name); \
    tgs_ensure_init(); \
    if (!tgs_g.real.name) \
        return tgs_g.real.handle ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_NOT_INITIALIZED

#define BEGIN_HOOK(name, params, args) \
    TGS_EXPORT CUresult name params \
    { \
        CAPTURE_PROLOGUE(name); \
        tgs_drain_rec_lock(); \
        CUresult r = tgs_g.real.name args; \
        began(r); \
        tgs_drain_rec_unlock(); \
        return r; \
    }

BEGIN_HOOK(cuStreamBeginCapture, (CUstream hStream), (hStream))
BEGIN_HOOK(cuStreamBeginCapture_ptsz, (CUstream hStream), (hStream))
BEGIN_HOOK(cuStreamBeginCapture_v2, (CUstream hStream, CUstreamCaptureMode mode),
           (hStream, mode))
BEGIN_HOOK(cuStreamBeginCapture_v2_ptsz, (CUstream hStream, CUstreamCaptureMode mode),
           (hStream, mode))

#define TO_GRAPH_PARAMS \
    (CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies, \
     const CUgraphEdgeData *dependencyData, size_t numDependencies, CUstreamCaptureMode mode)
#define TO_GRAPH_ARGS (hStream, hGraph, dependencies, dependencyData, numDependencies, mode)
BEGIN_HOOK(cuStreamBeginCaptureToGraph, TO_GRAPH_PARAMS, TO_GRAPH_ARGS)
BEGIN_HOOK(cuStreamBeginCaptureToGraph_ptsz, TO_GRAPH_PARAMS, TO_GRAPH_ARGS)

#define END_HOOK(name, ptsz) \
    TGS_EXPORT CUresult name(CUstream hStream, CUgraph *phGraph) \
    { \
        CAPTURE_PROLOGUE(name); \
        int was = tgs_capturing(hStream, ptsz); \
        CUresult r = tgs_g.real.name(hStream, phGraph); \
        if (was && !tgs_capturing(hStream, ptsz)) \
            ended(); \
        return r; \
    }

END_HOOK(cuStreamEndCapture, 0)
END_HOOK(cuStreamEndCapture_ptsz, 1)
