/*
 * libshim/launch_hooks.c: every kernel launch path.  Each launch charges its
 * lane work = GPU threads launched (grid x block; docs/segment.md says why and
 * where it falls short) and blocks = grid size (TGS's own unit).  The
 * unthrottled path is tgs_launch_fast() in shim.h: lane counters only.
 */
#include "shim.h"

/* grid x block threads and grid blocks, saturating (a hostile grid cannot wrap a counter) */
static inline __attribute__((always_inline)) struct tgs_launch_count
kernel_count(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz)
{
    struct tgs_launch_count c = { UINT64_MAX, UINT64_MAX, 1 };
    uint64_t g = (uint64_t)gx * gy, b = (uint64_t)bx * by * bz;
    if (__builtin_mul_overflow(g, (uint64_t)gz, &g))
        return c;
    c.blocks = g;
    if (!__builtin_mul_overflow(g, b, &c.work))
        return c;
    c.work = UINT64_MAX;
    return c;
}

int tgs_launch_slow_before(uint64_t work, uint64_t blocks, uint64_t kernels, CUstream stream)
{
    struct tgs_slot *s = tgs_slot();
    if (!s)
        return tgs_refused() ? -1 : 0;
    struct tgs_lane *lane = tgs_tls.lane;
    if (!lane || tgs_tls.epoch != tgs_g.epoch)
        lane = tgs_lane_slow(s);
    /* oversubscribed and evicted: wait for the memory instead of migrating (first, so that
     * the gates below judge the moment the kernel really goes); a job with managed memory
     * on this path looks first (an eviction since the watcher's last look) */
    if (TGS_UNLIKELY(TGS_RELAXED_LOAD(&tgs_g.oversub.n)) &&
        !TGS_RELAXED_LOAD(&tgs_g.oversub.hold))
        tgs_oversub_launch_look();
    if (TGS_UNLIKELY(TGS_RELAXED_LOAD(&tgs_g.oversub.hold)))
        tgs_oversub_hold_wait();
    uint32_t gate = TGS_RELAXED_LOAD(&tgs_g.ctl->gate_flags);
    int fit = (gate & (TGS_GATE_WAIT | TGS_GATE_FIT)) == (TGS_GATE_WAIT | TGS_GATE_FIT);
    if ((gate & TGS_GATE_WAIT) && !fit)
        tgs_gate_wait(tgs_g.ctl);
    uint64_t rate = TGS_RELAXED_LOAD(&tgs_g.cline->rate);
    if (rate != TGS_RATE_UNLIMITED)
        tgs_throttle(s, lane, rate, work);
    uint64_t cap = TGS_RELAXED_LOAD(&tgs_g.cline->inflight_cap);
    if (cap)
        tgs_inflight_before(s, cap, work, stream);
    /* last, so that the fit is judged at the moment the kernel goes */
    int sampled = fit ? tgs_fit_gate(tgs_g.ctl, work, stream) : 0;
    if (gate & TGS_GATE_PUBLISH)
        tgs_gate_publish_busy(s, stream);
    if (!tgs_tls.shared) {
        TGS_RELAXED_STORE(&lane->launches, TGS_RELAXED_LOAD(&lane->launches) + kernels);
        TGS_RELAXED_STORE(&lane->work, TGS_RELAXED_LOAD(&lane->work) + work);
        TGS_RELAXED_STORE(&lane->blocks, TGS_RELAXED_LOAD(&lane->blocks) + blocks);
    } else {
        __atomic_fetch_add(&lane->launches, kernels, __ATOMIC_RELAXED);
        __atomic_fetch_add(&lane->work, work, __ATOMIC_RELAXED);
        __atomic_fetch_add(&lane->blocks, blocks, __ATOMIC_RELAXED);
    }
    return sampled;
}

void tgs_after_launch(CUresult r, uint64_t work, CUstream stream, int sampled)
{
    struct tgs_slot *s = tgs_g.slot;
    tgs_launch_done();
    if (sampled)
        tgs_fit_after(sampled, r, stream);
    if (r != CUDA_SUCCESS || !s)
        return;
    __atomic_add_fetch(&tgs_g.launch_seq, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&tgs_g.last_stream, stream, __ATOMIC_RELAXED);
    uint64_t cap = TGS_RELAXED_LOAD(&tgs_g.cline->inflight_cap);
    if (cap)
        tgs_inflight_after(s, cap, work, stream);
}

/*
 * Each launch hook: the fast path ends in a tail call to the real function
 * (the caller's arguments stay in place: no copying of stack arguments); the
 * slow path is a separate function with the same parameters.  While a stream
 * capture is in progress every launch takes the slow path, and one into a
 * capturing stream (ptsz: the hook is a per-thread-stream variant) goes
 * straight to the driver, uncharged: it only adds a node to a graph.
 * `count` is an expression of the hook's parameters giving its struct
 * tgs_launch_count.
 */
/* A ptsz hook's NULL stream is the calling thread's per-thread stream: tracked (and
 * recorded into by the launching thread) as CU_STREAM_PER_THREAD. */
#define STREAM_KEY(s, ptsz) ((ptsz) && !(s) ? TGS_CU_STREAM_PER_THREAD : (s))

#define LAUNCH_HOOK(name, params, args, count, stream, ptsz) \
    static __attribute__((noinline)) CUresult slow_##name params \
    { \
        TGS_HIT(name); \
        tgs_pfn_##name fn_ = tgs_g.real.name; \
        if (TGS_UNLIKELY(!fn_)) \
            return tgs_g.real.handle ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_NOT_INITIALIZED; \
        if (TGS_UNLIKELY(tgs_capture_any()) && tgs_capturing((stream), (ptsz))) \
            return fn_ args; \
        struct tgs_launch_count c_ = (count); \
        int smp_ = tgs_launch_slow_before(c_.work, c_.blocks, c_.kernels, \
                                          STREAM_KEY((stream), (ptsz))); \
        if (TGS_UNLIKELY(smp_ < 0)) \
            return CUDA_ERROR_NOT_PERMITTED; \
        CUresult r_ = fn_ args; \
        tgs_after_launch(r_, c_.work, STREAM_KEY((stream), (ptsz)), smp_); \
        return r_; \
    } \
    TGS_EXPORT CUresult name params \
    { \
        tgs_pfn_##name fn_ = tgs_g.real.name; \
        if (TGS_LIKELY(fn_)) { \
            struct tgs_launch_count c_ = (count); \
            if (TGS_LIKELY(tgs_launch_fast(c_.work, c_.blocks, c_.kernels, \
                                           STREAM_KEY((stream), (ptsz))))) \
                return fn_ args; \
        } \
        return slow_##name args; \
    }

#define KERNEL_ARGS (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, \
                     sharedMemBytes, hStream, kernelParams, extra)
#define COOP_ARGS (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, \
                   sharedMemBytes, hStream, kernelParams)
#define KERNEL_COUNT kernel_count(gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ)

LAUNCH_HOOK(cuLaunchKernel, TGS_CU_LAUNCH_ARGS, KERNEL_ARGS, KERNEL_COUNT, hStream, 0)
LAUNCH_HOOK(cuLaunchKernel_ptsz, TGS_CU_LAUNCH_ARGS, KERNEL_ARGS, KERNEL_COUNT, hStream, 1)
LAUNCH_HOOK(cuLaunchCooperativeKernel, TGS_CU_COOP_ARGS, COOP_ARGS, KERNEL_COUNT, hStream, 0)
LAUNCH_HOOK(cuLaunchCooperativeKernel_ptsz, TGS_CU_COOP_ARGS, COOP_ARGS, KERNEL_COUNT, hStream, 1)

static inline __attribute__((always_inline)) struct tgs_launch_count
config_count(const CUlaunchConfig *c)
{
    if (!c)
        return (struct tgs_launch_count){ 0, 0, 1 };
    return kernel_count(c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY,
                        c->blockDimZ);
}

#define EX_PARAMS (const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra)
#define EX_ARGS (config, f, kernelParams, extra)
LAUNCH_HOOK(cuLaunchKernelEx, EX_PARAMS, EX_ARGS, config_count(config),
            config ? config->hStream : NULL, 0)
LAUNCH_HOOK(cuLaunchKernelEx_ptsz, EX_PARAMS, EX_ARGS, config_count(config),
            config ? config->hStream : NULL, 1)

/* A graph launch is charged the counts of its kernel nodes, taken when it was
 * instantiated (graph.c); an unknown exec is charged nothing.  The map lookup
 * takes a mutex: graph launches are rare next to kernel launches. */
static struct tgs_launch_count graph_count(CUgraphExec exec)
{
    struct tgs_launch_count c;
    tgs_graph_work(exec, &c);
    return c;
}

#define GRAPH_PARAMS (CUgraphExec hGraphExec, CUstream hStream)
#define GRAPH_ARGS (hGraphExec, hStream)
LAUNCH_HOOK(cuGraphLaunch, GRAPH_PARAMS, GRAPH_ARGS, graph_count(hGraphExec), hStream, 0)
LAUNCH_HOOK(cuGraphLaunch_ptsz, GRAPH_PARAMS, GRAPH_ARGS, graph_count(hGraphExec), hStream, 1)
