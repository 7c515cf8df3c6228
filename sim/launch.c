/*
 * launch.c: kernel launches.  A kernel does not compute; it occupies the
 * device for blocks x threads x TGS_SIM_NS_PER_THREAD x its cost factor ns.
 */
#include "graph.h"

static CUresult check_dims(unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                           unsigned int by, unsigned int bz)
{
    if (!gx || !gy || !gz || !bx || !by || !bz)
        return CUDA_ERROR_INVALID_VALUE;
    if (gx > 2147483647u || gy > 65535 || gz > 65535 || bx > 1024 || by > 1024 || bz > 64 ||
        (uint64_t)bx * by * bz > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

static uint64_t kernel_ns(const struct CUfunc_st *f, unsigned int gx, unsigned int gy,
                          unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz)
{
    double threads = (double)gx * gy * gz * (double)bx * by * bz;
    double ns = threads * g_sim.ns_per_thread * f->factor;
    return ns >= 1.8e19 ? (uint64_t)1.8e19 : (uint64_t)ns;
}

CUresult sim_launch(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                    unsigned int bx, unsigned int by, unsigned int bz, CUstream s, int ptsz)
{
    /* one FIFO per context: the default streams run alike (ptsz matters to capture) */
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct CUfunc_st *fn;
    if ((r = sim_func_resolve(f, &fn)) != CUDA_SUCCESS)
        return r;
    r = check_dims(gx, gy, gz, bx, by, bz);
    if (r != CUDA_SUCCESS)
        return r;
    struct CUctx_st *ctx;
    struct CUstream_st *obj;
    r = sim_stream_resolve(s, &ctx, &obj);
    if (r != CUDA_SUCCESS)
        return r;
    if (sim_capture_any()) {
        struct sim_gwork w = {.type = CU_GRAPH_NODE_TYPE_KERNEL};
        CUDA_KERNEL_NODE_PARAMS_v2 *k = &w.u.kernel;
        k->func = f;
        k->gridDimX = gx, k->gridDimY = gy, k->gridDimZ = gz;
        k->blockDimX = bx, k->blockDimY = by, k->blockDimZ = bz;
        if (sim_capture_take(s, ptsz, ctx, obj, &w, &r))
            return r;
    }
    /* lazy loading (CUDA_MODULE_LOADING, default LAZY): the driver loads a function's code
     * at its first launch, on the launching thread */
    if (g_sim.lazy_load_ns && !__atomic_exchange_n(&fn->loaded, 1, __ATOMIC_RELAXED) &&
        sim_lazy_loading())
        sim_sleep_until(sim_now_ns() + g_sim.lazy_load_ns);
    uint64_t seq;
    uint64_t ns = kernel_ns(fn, gx, gy, gz, bx, by, bz);
    uint64_t mig = sim_res_kernel_ns(ctx->dev); /* non-resident managed memory */
    r = sim_enqueue(ctx, ns + mig < ns ? UINT64_MAX : ns + mig, 0, &seq);
    if (r == CUDA_SUCCESS)
        sim_stream_note(ctx, obj, seq);
    return r;
}

static CUresult launch_kernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                              unsigned int bx, unsigned int by, unsigned int bz,
                              unsigned int sharedMemBytes, CUstream hStream, int extra_and_params,
                              int ptsz)
{
    if (extra_and_params || sharedMemBytes > 232448)
        return sim_check_init() ? sim_check_init() : CUDA_ERROR_INVALID_VALUE;
    return sim_launch(f, gx, gy, gz, bx, by, bz, hStream, ptsz);
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                        unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                        unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                        void **kernelParams, void **extra)
{
    return launch_kernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                         sharedMemBytes, hStream, kernelParams && extra, 0);
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                             unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                             unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                             void **kernelParams, void **extra)
{
    return launch_kernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                         sharedMemBytes, hStream, kernelParams && extra, 1);
}

static CUresult launch_ex(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                          void **extra, int ptsz)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!config || (config->numAttrs && !config->attrs) || (kernelParams && extra))
        return CUDA_ERROR_INVALID_VALUE;
    return sim_launch(f, config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX,
                      config->blockDimY, config->blockDimZ, config->hStream, ptsz);
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                          void **extra)
{
    return launch_ex(config, f, kernelParams, extra, 0);
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                               void **extra)
{
    return launch_ex(config, f, kernelParams, extra, 1);
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                   unsigned int gridDimZ, unsigned int blockDimX,
                                   unsigned int blockDimY, unsigned int blockDimZ,
                                   unsigned int sharedMemBytes, CUstream hStream,
                                   void **kernelParams)
{
    (void)kernelParams;
    return launch_kernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                         sharedMemBytes, hStream, 0, 0);
}

CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX,
                                        unsigned int gridDimY, unsigned int gridDimZ,
                                        unsigned int blockDimX, unsigned int blockDimY,
                                        unsigned int blockDimZ, unsigned int sharedMemBytes,
                                        CUstream hStream, void **kernelParams)
{
    (void)kernelParams;
    return launch_kernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                         sharedMemBytes, hStream, 0, 1);
}
