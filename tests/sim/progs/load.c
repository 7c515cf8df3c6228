/*
 * load.c: a minimal driver-API load generator for the simulator's timing
 * tests.  Loads libcuda.so.1 with dlopen and resolves every entry point
 * through cuGetProcAddress_v2 (the path modern runtimes take).
 *   -t secs     launch until this much wall time has passed, then sync
 *   -n count    or launch exactly this many times
 *   -g grid -b block     kernel shape (1-D)
 *   -c factor   module declares "// tgs-sim: cost k <factor>"
 *   -s every    synchronise after every `every` launches (latency measured)
 *   -p usec     host sleep after each synchronisation
 *   -S when     wait until CLOCK_REALTIME `when` (seconds) before starting
 *   -e          time the whole run with events, print event_ms
 *   -G nodes    launch a graph of `nodes` kernels instead of one kernel
 * Prints one JSON line.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "tgs/cuda_abi.h"

#define F(name) static tgs_pfn_##name p_##name
F(cuInit); F(cuDeviceGet); F(cuDevicePrimaryCtxRetain); F(cuCtxSetCurrent);
F(cuModuleLoadData); F(cuModuleGetFunction); F(cuLaunchKernel); F(cuCtxSynchronize);
F(cuEventCreate); F(cuEventRecord); F(cuEventSynchronize); F(cuEventElapsedTime_v2);
F(cuGraphCreate); F(cuGraphAddKernelNode_v2); F(cuGraphInstantiateWithFlags); F(cuGraphLaunch);

#define CK(x)                                                                                  \
    do {                                                                                       \
        CUresult r_ = (x);                                                                     \
        if (r_ != CUDA_SUCCESS) {                                                              \
            fprintf(stderr, "load: %s failed: %d\n", #x, (int)r_);                             \
            exit(2);                                                                           \
        }                                                                                      \
    } while (0)

static double now_s(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void resolve(tgs_pfn_cuGetProcAddress_v2 gpa, const char *name, void **out)
{
    CUdriverProcAddressQueryResult st;
    if (gpa(name, out, 12080, 0, &st) != CUDA_SUCCESS || !*out) {
        fprintf(stderr, "load: cannot resolve %s (status %d)\n", name, (int)st);
        exit(2);
    }
}

int main(int argc, char **argv)
{
    double secs = 0, start_at = 0, factor = 1.0;
    long count = 0, every = 0, sleep_us = 0, nodes = 0;
    unsigned int grid = 1024, block = 1024;
    int events = 0, opt;
    while ((opt = getopt(argc, argv, "t:n:g:b:c:s:p:S:eG:")) != -1) {
        switch (opt) {
        case 't': secs = atof(optarg); break;
        case 'n': count = atol(optarg); break;
        case 'g': grid = (unsigned)atol(optarg); break;
        case 'b': block = (unsigned)atol(optarg); break;
        case 'c': factor = atof(optarg); break;
        case 's': every = atol(optarg); break;
        case 'p': sleep_us = atol(optarg); break;
        case 'S': start_at = atof(optarg); break;
        case 'e': events = 1; break;
        case 'G': nodes = atol(optarg); break;
        default: return 2;
        }
    }
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "load: %s\n", dlerror());
        return 2;
    }
    tgs_pfn_cuGetProcAddress_v2 gpa = (tgs_pfn_cuGetProcAddress_v2)dlsym(lib, "cuGetProcAddress_v2");
#define R(name, base) resolve(gpa, base, (void **)&p_##name)
    R(cuInit, "cuInit"); R(cuDeviceGet, "cuDeviceGet");
    R(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"); R(cuCtxSetCurrent, "cuCtxSetCurrent");
    R(cuModuleLoadData, "cuModuleLoadData"); R(cuModuleGetFunction, "cuModuleGetFunction");
    R(cuLaunchKernel, "cuLaunchKernel"); R(cuCtxSynchronize, "cuCtxSynchronize");
    R(cuEventCreate, "cuEventCreate"); R(cuEventRecord, "cuEventRecord");
    R(cuEventSynchronize, "cuEventSynchronize"); R(cuEventElapsedTime_v2, "cuEventElapsedTime");
    R(cuGraphCreate, "cuGraphCreate"); R(cuGraphAddKernelNode_v2, "cuGraphAddKernelNode");
    R(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags"); R(cuGraphLaunch, "cuGraphLaunch");

    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction fn;
    char image[128];
    snprintf(image, sizeof image, ".version 8.0\n// tgs-sim: cost k %g\n", factor);
    CK(p_cuInit(0));
    CK(p_cuDeviceGet(&dev, 0));
    CK(p_cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(p_cuCtxSetCurrent(ctx));
    CK(p_cuModuleLoadData(&mod, image));
    CK(p_cuModuleGetFunction(&fn, mod, "k"));
    CUgraphExec exec = NULL;
    if (nodes > 0) {
        CUgraph g;
        CUgraphNode prev = NULL, n;
        CK(p_cuGraphCreate(&g, 0));
        for (long i = 0; i < nodes; i++) {
            CUDA_KERNEL_NODE_PARAMS_v2 kp = {.func = fn, .gridDimX = grid, .gridDimY = 1,
                                             .gridDimZ = 1, .blockDimX = block, .blockDimY = 1,
                                             .blockDimZ = 1};
            CK(p_cuGraphAddKernelNode_v2(&n, g, prev ? &prev : NULL, prev ? 1 : 0, &kp));
            prev = n;
        }
        CK(p_cuGraphInstantiateWithFlags(&exec, g, 0));
    }
    CUevent e0 = NULL, e1 = NULL;
    if (events) {
        CK(p_cuEventCreate(&e0, 0));
        CK(p_cuEventCreate(&e1, 0));
    }
    while (start_at > 0 && now_s(CLOCK_REALTIME) < start_at)
        usleep(1000);
    double t0 = now_s(CLOCK_MONOTONIC), lat_sum = 0;
    long launches = 0, syncs = 0;
    if (events)
        CK(p_cuEventRecord(e0, NULL));
    double batch_t0 = t0;
    for (;;) {
        if (count > 0 && launches >= count)
            break;
        if (count <= 0 && now_s(CLOCK_MONOTONIC) - t0 >= secs)
            break;
        if (exec)
            CK(p_cuGraphLaunch(exec, NULL));
        else
            CK(p_cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, NULL, NULL, NULL));
        launches++;
        if (every > 0 && launches % every == 0) {
            CK(p_cuCtxSynchronize());
            double t = now_s(CLOCK_MONOTONIC);
            lat_sum += t - batch_t0;
            syncs++;
            if (sleep_us > 0)
                usleep((useconds_t)sleep_us);
            batch_t0 = now_s(CLOCK_MONOTONIC);
        }
    }
    if (events)
        CK(p_cuEventRecord(e1, NULL));
    CK(p_cuCtxSynchronize());
    double wall = now_s(CLOCK_MONOTONIC) - t0;
    float ms = -1;
    if (events) {
        CK(p_cuEventSynchronize(e1));
        CK(p_cuEventElapsedTime_v2(&ms, e0, e1));
    }
    long kernels = launches * (nodes > 0 ? nodes : 1);
    printf("{\"pid\": %d, \"launches\": %ld, \"kernels\": %ld, \"wall_s\": %.6f, "
           "\"mean_lat_us\": %.1f, \"event_ms\": %.4f}\n",
           (int)getpid(), launches, kernels, wall, syncs ? lat_sum / syncs * 1e6 : 0.0,
           (double)ms);
    return 0;
}
