/*
 * libshim/launch_hooks.c: every kernel launch path.  Work = GPU threads
 * launched (grid x block); docs/segment.md says why and where it falls short.
 * The unthrottled path is tgs_before_launch() in shim.h: lane counters only.
 */
#include "shim.h"

static inline uint64_t threads(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                               unsigned bz)
{
    uint64_t g = (uint64_t)gx * gy, b = (uint64_t)bx * by * bz, w;
    if (__builtin_mul_overflow(g, (uint64_t)gz, &g) || __builtin_mul_overflow(g, b, &w))
        return UINT64_MAX;
    return w;
}

void tgs_launch_slow(struct tgs_slot *s, struct tgs_lane *lane, uint64_t rate, uint64_t work)
{
    uint32_t gate = TGS_RELAXED_LOAD(&tgs_g.hdr->gate_flags);
    if (gate & TGS_GATE_WAIT)
        tgs_gate_wait(tgs_g.hdr);
    if (rate != TGS_RATE_UNLIMITED)
        tgs_throttle(s, lane, rate, work);
    uint64_t cap = TGS_RELAXED_LOAD(&s->inflight_cap);
    if (cap)
        tgs_inflight_before(s, cap, work);
    if (gate & TGS_GATE_PUBLISH)
        tgs_gate_publish_busy(s);
}

void tgs_after_launch(CUresult r, uint64_t work, CUstream stream)
{
    struct tgs_slot *s = tgs_g.slot;
    if (r != CUDA_SUCCESS || !s)
        return;
    __atomic_add_fetch(&tgs_g.launch_seq, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&tgs_g.last_stream, stream, __ATOMIC_RELAXED);
    uint64_t cap = TGS_RELAXED_LOAD(&s->inflight_cap);
    if (cap)
        tgs_inflight_after(s, cap, work, stream);
}

#define LAUNCH_BODY(name, work, kernels, stream, call) \
    do { \
        TGS_HIT(name); \
        tgs_ensure_init(); \
        tgs_pfn_##name fn_ = tgs_g.real.name; \
        if (TGS_UNLIKELY(!fn_)) \
            return tgs_g.real.handle ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_NOT_INITIALIZED; \
        uint64_t w_ = (work); \
        int slow_ = tgs_before_launch(w_, (kernels)); \
        CUresult r_ = fn_ call; \
        if (TGS_UNLIKELY(slow_)) \
            tgs_after_launch(r_, w_, (stream)); \
        return r_; \
    } while (0)

#define KERNEL_ARGS f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, \
    sharedMemBytes, hStream, kernelParams

TGS_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                   unsigned int gridDimZ, unsigned int blockDimX,
                                   unsigned int blockDimY, unsigned int blockDimZ,
                                   unsigned int sharedMemBytes, CUstream hStream,
                                   void **kernelParams, void **extra)
{
    LAUNCH_BODY(cuLaunchKernel,
                threads(gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ), 1,
                hStream, (KERNEL_ARGS, extra));
}

TGS_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX,
                                        unsigned int gridDimY, unsigned int gridDimZ,
                                        unsigned int blockDimX, unsigned int blockDimY,
                                        unsigned int blockDimZ, unsigned int sharedMemBytes,
                                        CUstream hStream, void **kernelParams, void **extra)
{
    LAUNCH_BODY(cuLaunchKernel_ptsz,
                threads(gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ), 1,
                hStream, (KERNEL_ARGS, extra));
}

TGS_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX,
                                              unsigned int gridDimY, unsigned int gridDimZ,
                                              unsigned int blockDimX, unsigned int blockDimY,
                                              unsigned int blockDimZ, unsigned int sharedMemBytes,
                                              CUstream hStream, void **kernelParams)
{
    LAUNCH_BODY(cuLaunchCooperativeKernel,
                threads(gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ), 1,
                hStream, (KERNEL_ARGS));
}

TGS_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX,
                                                   unsigned int gridDimY, unsigned int gridDimZ,
                                                   unsigned int blockDimX, unsigned int blockDimY,
                                                   unsigned int blockDimZ,
                                                   unsigned int sharedMemBytes, CUstream hStream,
                                                   void **kernelParams)
{
    LAUNCH_BODY(cuLaunchCooperativeKernel_ptsz,
                threads(gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ), 1,
                hStream, (KERNEL_ARGS));
}

static inline uint64_t config_threads(const CUlaunchConfig *c)
{
    return c ? threads(c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY,
                       c->blockDimZ)
             : 0;
}

TGS_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f,
                                     void **kernelParams, void **extra)
{
    LAUNCH_BODY(cuLaunchKernelEx, config_threads(config), 1, config ? config->hStream : NULL,
                (config, f, kernelParams, extra));
}

TGS_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
                                          void **kernelParams, void **extra)
{
    LAUNCH_BODY(cuLaunchKernelEx_ptsz, config_threads(config), 1,
                config ? config->hStream : NULL, (config, f, kernelParams, extra));
}

/* A graph launch is charged the work of its kernel nodes, counted when it
 * was instantiated (graph.c); an unknown exec is charged nothing. */
static inline uint64_t graph_work(CUgraphExec exec, uint64_t *kernels)
{
    uint64_t w = 0;
    *kernels = 0;
    if (!tgs_graph_work(exec, &w, kernels))
        return 0;
    return w;
}

TGS_EXPORT CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    uint64_t k;
    uint64_t w = graph_work(hGraphExec, &k);
    LAUNCH_BODY(cuGraphLaunch, w, k, hStream, (hGraphExec, hStream));
}

TGS_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    uint64_t k;
    uint64_t w = graph_work(hGraphExec, &k);
    LAUNCH_BODY(cuGraphLaunch_ptsz, w, k, hStream, (hGraphExec, hStream));
}
