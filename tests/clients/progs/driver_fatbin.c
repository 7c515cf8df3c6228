/*
 * A driver-API program as a user writes it: compiled by nvcc, linked with
 * -lcuda, it loads an nvcc fatbin (argv[1]) and launches a kernel from it.
 * Prints "ok <global size> <elapsed>" or the first failing call.
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(call)                                                              \
    do {                                                                      \
        CUresult r_ = (call);                                                 \
        if (r_ != CUDA_SUCCESS) {                                             \
            const char *s_ = "?";                                             \
            cuGetErrorName(r_, &s_);                                          \
            printf("fail %s %s\n", #call, s_);                                \
            return 1;                                                         \
        }                                                                     \
    } while (0)

static void *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *b = malloc((size_t)n);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    return b;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    void *fatbin = read_all(argv[1]);
    if (!fatbin)
        return 2;
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod, mod2;
    CUfunction fn;
    CUdeviceptr d, g;
    size_t gsize;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    CK(cuModuleLoadFatBinary(&mod, fatbin));
    CK(cuModuleLoad(&mod2, argv[1]));
    CK(cuModuleGetFunction(&fn, mod, "scale"));
    if (cuModuleGetFunction(&fn, mod, "missing") != CUDA_ERROR_NOT_FOUND) {
        printf("fail unknown kernel found\n");
        return 1;
    }
    CK(cuModuleGetFunction(&fn, mod, "scale"));
    CK(cuModuleGetGlobal(&g, &gsize, mod2, "gbuf"));
    int n = 1 << 20;
    float *h = malloc(sizeof(float) * (size_t)n);
    for (int i = 0; i < n; i++)
        h[i] = (float)i;
    CK(cuMemAlloc(&d, sizeof(float) * (size_t)n));
    CK(cuMemcpyHtoD(d, h, sizeof(float) * (size_t)n));
    CUevent e0, e1;
    CK(cuEventCreate(&e0, 0));
    CK(cuEventCreate(&e1, 0));
    void *args[] = {&d, &n};
    CK(cuEventRecord(e0, NULL));
    CK(cuLaunchKernel(fn, (unsigned)n / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
    CK(cuEventRecord(e1, NULL));
    CK(cuCtxSynchronize());
    float ms = 0;
    CK(cuEventElapsedTime(&ms, e0, e1));
    CK(cuMemcpyDtoH(h, d, sizeof(float) * (size_t)n));
    CK(cuMemFree(d));
    CK(cuModuleUnload(mod2));
    CK(cuModuleUnload(mod));
    CK(cuDevicePrimaryCtxRelease(dev));
    printf("ok %zu %.3f\n", gsize, ms);
    free(h);
    free(fatbin);
    return 0;
}
