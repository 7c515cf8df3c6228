/*
 * stub_driver.c -> build/bench/stub/libcuda.so.1: a stand-in driver whose
 * entry points return CUDA_SUCCESS at once, so that the shim's own cost per
 * call is what a benchmark measures (the simulator's launch costs far more
 * and jitters).  Only what bench/csrc/overhead/launch_bench.c calls.
 */
#include "tgs/cuda_abi.h"

#define V __attribute__((visibility("default")))

V CUresult cuInit(unsigned int f) { (void)f; return CUDA_SUCCESS; }
V CUresult cuDeviceGet(CUdevice *d, int o) { *d = o; return CUDA_SUCCESS; }
V CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d)
{
    (void)d;
    *c = (CUcontext)0x1000;
    return CUDA_SUCCESS;
}
V CUresult cuCtxSetCurrent(CUcontext c) { (void)c; return CUDA_SUCCESS; }
V CUresult cuCtxSynchronize(void) { return CUDA_SUCCESS; }
V CUresult cuModuleLoadData(CUmodule *m, const void *i)
{
    (void)i;
    *m = (CUmodule)0x2000;
    return CUDA_SUCCESS;
}
V CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *n)
{
    (void)m;
    (void)n;
    *f = (CUfunction)0x3000;
    return CUDA_SUCCESS;
}
V CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                          unsigned int bx, unsigned int by, unsigned int bz, unsigned int sm,
                          CUstream s, void **p, void **e)
{
    (void)f; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)sm; (void)s;
    (void)p; (void)e;
    return CUDA_SUCCESS;
}
static unsigned long long next_ptr = 0x10000;
V CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
    *p = next_ptr;
    next_ptr += (n + 255) & ~(size_t)255;
    return CUDA_SUCCESS;
}
V CUresult cuMemFree_v2(CUdeviceptr p) { (void)p; return CUDA_SUCCESS; }
