/* memhold.c: allocate argv[1] bytes of device memory; print the result
 * code; with "hold", keep it (without freeing) until stdin closes; with
 * "hold-managed", the bytes are managed memory prefetched to the device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tgs/cuda_abi.h"

int main(int argc, char **argv)
{
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr p = 0;
    if (argc < 2 || cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
        cuCtxSetCurrent(ctx))
        return 2;
    size_t n = strtoull(argv[1], NULL, 0);
    int managed = argc > 2 && !strcmp(argv[2], "hold-managed");
    CUresult r = managed ? cuMemAllocManaged(&p, n, CU_MEM_ATTACH_GLOBAL) : cuMemAlloc_v2(&p, n);
    if (managed && r == CUDA_SUCCESS && (r = cuMemPrefetchAsync(p, n, dev, NULL)) == CUDA_SUCCESS)
        r = cuCtxSynchronize();
    size_t fr = 0, tot = 0;
    cuMemGetInfo_v2(&fr, &tot);
    printf("%d %zu %zu\n", (int)r, fr, tot);
    fflush(stdout);
    if (argc > 2 && !strncmp(argv[2], "hold", 4)) {
        char buf[16];
        while (fread(buf, 1, sizeof buf, stdin) > 0) {
        }
    }
    return 0;
}
