/* smoke.c: a quick driver-API round trip, linked with -lcuda. */
#include <stdio.h>
#include <string.h>

#include "tgs/cuda_abi.h"

#define CK(x)                                                                                  \
    do {                                                                                       \
        CUresult r_ = (x);                                                                     \
        if (r_ != CUDA_SUCCESS) {                                                              \
            printf("FAIL %s = %d (line %d)\n", #x, (int)r_, __LINE__);                         \
            return 1;                                                                          \
        }                                                                                      \
    } while (0)

int main(void)
{
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction fn;
    CUdeviceptr d;
    char name[64];
    int v;
    CK(cuInit(0));
    CK(cuDriverGetVersion(&v));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDeviceGetName(name, sizeof name, dev));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    CK(cuModuleLoadData(&mod, "// tgs-sim: cost k 2.0\n"));
    CK(cuModuleGetFunction(&fn, mod, "k"));
    CK(cuMemAlloc_v2(&d, 1 << 20));
    char buf[64] = "hello", out[64] = {0};
    CK(cuMemcpyHtoD_v2(d, buf, sizeof buf));
    CK(cuLaunchKernel(fn, 1000, 1, 1, 1000, 1, 1, 0, NULL, NULL, NULL));
    CK(cuCtxSynchronize());
    CK(cuMemcpyDtoH_v2(out, d, sizeof out));
    size_t fr, tot;
    CK(cuMemGetInfo_v2(&fr, &tot));
    CK(cuMemFree_v2(d));
    printf("version=%d name=%s out=%s free=%zu total=%zu\n", v, name, out, fr, tot);
    return strcmp(out, "hello") != 0;
}
