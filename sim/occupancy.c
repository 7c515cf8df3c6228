/*
 * occupancy.c: occupancy queries for the simulated sm_90 (H100-class) SM:
 * 2048 threads, 32 blocks, 65536 registers and 228 KiB of shared memory per
 * SM (1 KiB of it reserved per block), warps of 32, registers allocated per
 * warp in units of 256.  Functions use their attributes (attrs.c).  The
 * time model does not depend on occupancy; these answers are for programs
 * that size their launches with them.
 */
#include "sim.h"

#define SM_THREADS 2048
#define SM_BLOCKS 32
#define SM_REGS 65536
#define SM_SMEM 233472
#define BLOCK_SMEM_RESERVED 1024

static int blocks_per_sm(const struct CUfunc_st *f, int block, size_t dyn_smem)
{
    int warps = (block + 31) / 32;
    int by_threads = SM_THREADS / (warps * 32);
    int regs = sim_func_attr(f, CU_FUNC_ATTRIBUTE_NUM_REGS);
    int warp_regs = ((regs * 32 + 255) / 256) * 256;
    int by_regs = warp_regs ? SM_REGS / (warp_regs * warps) : SM_BLOCKS;
    size_t smem = dyn_smem + (size_t)sim_func_attr(f, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES) +
                  BLOCK_SMEM_RESERVED;
    int by_smem = (int)(SM_SMEM / smem);
    int n = SM_BLOCKS;
    if (by_threads < n)
        n = by_threads;
    if (by_regs < n)
        n = by_regs;
    if (by_smem < n)
        n = by_smem;
    return n;
}

static CUresult prologue(CUfunction func, struct CUfunc_st **f)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    return sim_func_resolve(func, f);
}

CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks, CUfunction func,
                                                              int blockSize,
                                                              size_t dynamicSMemSize,
                                                              unsigned int flags)
{
    struct CUfunc_st *f;
    CUresult r = prologue(func, &f);
    if (r != CUDA_SUCCESS)
        return r;
    if (!numBlocks || blockSize <= 0 || flags > 1 ||
        blockSize > sim_func_attr(f, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK))
        return CUDA_ERROR_INVALID_VALUE;
    if (dynamicSMemSize > (size_t)sim_func_attr(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)) {
        *numBlocks = 0;
        return CUDA_SUCCESS;
    }
    *numBlocks = blocks_per_sm(f, blockSize, dynamicSMemSize);
    return CUDA_SUCCESS;
}

CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func,
                                                     int blockSize, size_t dynamicSMemSize)
{
    return cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(numBlocks, func, blockSize,
                                                                dynamicSMemSize, 0);
}

CUresult cuOccupancyMaxPotentialBlockSizeWithFlags(int *minGridSize, int *blockSize,
                                                   CUfunction func,
                                                   CUoccupancyB2DSize blockSizeToDynamicSMemSize,
                                                   size_t dynamicSMemSize, int blockSizeLimit,
                                                   unsigned int flags)
{
    struct CUfunc_st *f;
    CUresult r = prologue(func, &f);
    if (r != CUDA_SUCCESS)
        return r;
    if (!minGridSize || !blockSize || blockSizeLimit < 0 || flags > 1)
        return CUDA_ERROR_INVALID_VALUE;
    int limit = sim_func_attr(f, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    if (blockSizeLimit && blockSizeLimit < limit)
        limit = blockSizeLimit;
    int best_block = 0, best_threads = 0, best_blocks = 0;
    for (int b = (limit + 31) / 32 * 32; b > 0; b -= 32) {
        int bs = b > limit ? limit : b;
        size_t smem = blockSizeToDynamicSMemSize ? blockSizeToDynamicSMemSize(bs)
                                                 : dynamicSMemSize;
        int n = blocks_per_sm(f, bs, smem);
        if (n * bs > best_threads) {
            best_threads = n * bs;
            best_block = bs;
            best_blocks = n;
        }
    }
    *blockSize = best_block;
    *minGridSize = best_blocks * g_sim.sm_count; /* TGS_SIM_SMS */
    return CUDA_SUCCESS;
}

CUresult cuOccupancyMaxPotentialBlockSize(int *minGridSize, int *blockSize, CUfunction func,
                                          CUoccupancyB2DSize blockSizeToDynamicSMemSize,
                                          size_t dynamicSMemSize, int blockSizeLimit)
{
    return cuOccupancyMaxPotentialBlockSizeWithFlags(minGridSize, blockSize, func,
                                                     blockSizeToDynamicSMemSize, dynamicSMemSize,
                                                     blockSizeLimit, 0);
}

CUresult cuOccupancyAvailableDynamicSMemPerBlock(size_t *dynamicSmemSize, CUfunction func,
                                                 int numBlocks, int blockSize)
{
    struct CUfunc_st *f;
    CUresult r = prologue(func, &f);
    if (r != CUDA_SUCCESS)
        return r;
    if (!dynamicSmemSize || numBlocks <= 0 || blockSize <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    size_t per = SM_SMEM / (size_t)numBlocks;
    size_t fixed = (size_t)sim_func_attr(f, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES) +
                   BLOCK_SMEM_RESERVED;
    size_t avail = per > fixed ? per - fixed : 0;
    size_t cap = (size_t)sim_func_attr(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
    *dynamicSmemSize = avail < cap ? avail : cap;
    return CUDA_SUCCESS;
}

/* Thread-block clusters (sm_90): at most 8 blocks portably, 16 with the
 * non-portable attribute; a cluster must fit on the SMs of one GPC
 * (18 SMs on an H100-class part, whose blocks_per_sm each may hold). */
#define GPC_SMS 18

static CUresult cluster_args(CUfunction func, const CUlaunchConfig *config,
                             struct CUfunc_st **f, unsigned *csize)
{
    CUresult r = prologue(func, f);
    if (r != CUDA_SUCCESS)
        return r;
    if (!config || (config->numAttrs && !config->attrs))
        return CUDA_ERROR_INVALID_VALUE;
    *csize = 0;
    for (unsigned i = 0; i < config->numAttrs; i++)
        if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
            const CUlaunchAttributeValue *v = &config->attrs[i].value;
            *csize = v->clusterDim.x * v->clusterDim.y * v->clusterDim.z;
        }
    return CUDA_SUCCESS;
}

CUresult cuOccupancyMaxPotentialClusterSize(int *clusterSize, CUfunction func,
                                            const CUlaunchConfig *config)
{
    struct CUfunc_st *f;
    unsigned csize;
    CUresult r = cluster_args(func, config, &f, &csize);
    if (r != CUDA_SUCCESS)
        return r;
    if (!clusterSize)
        return CUDA_ERROR_INVALID_VALUE;
    int limit = sim_func_attr(f, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED) ? 16 : 8;
    int per_gpc = blocks_per_sm(f, (int)(config->blockDimX * config->blockDimY *
                                         config->blockDimZ),
                                config->sharedMemBytes) * GPC_SMS;
    *clusterSize = per_gpc < limit ? per_gpc : limit;
    return CUDA_SUCCESS;
}

CUresult cuOccupancyMaxActiveClusters(int *numClusters, CUfunction func,
                                      const CUlaunchConfig *config)
{
    struct CUfunc_st *f;
    unsigned csize;
    CUresult r = cluster_args(func, config, &f, &csize);
    if (r != CUDA_SUCCESS)
        return r;
    if (!numClusters || csize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    /* a size past what the kernel may launch with (8, or 16 when it allows
     * non-portable sizes) is the driver's INVALID_CLUSTER_SIZE, which cuBLAS
     * expects while it probes sizes at cublasCreate */
    if (csize > (sim_func_attr(f, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED) ? 16u : 8u))
        return CUDA_ERROR_INVALID_CLUSTER_SIZE;
    int threads = (int)(config->blockDimX * config->blockDimY * config->blockDimZ);
    if (threads <= 0 || threads > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    int per_gpc = blocks_per_sm(f, threads, config->sharedMemBytes) * GPC_SMS;
    int gpcs = (g_sim.sm_count + GPC_SMS - 1) / GPC_SMS;
    *numClusters = (per_gpc / (int)csize) * gpcs;
    return CUDA_SUCCESS;
}
