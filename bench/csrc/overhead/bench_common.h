/*
 * bench_common.h: what the overhead benchmarks (gate_bench.c, launch_bench.c)
 * share: a monotonic clock and the set-up of a zero-cost kernel "k" in device
 * 0's primary context.  Header-only (static inline), found next to them.
 */
#ifndef TGS_BENCH_COMMON_H
#define TGS_BENCH_COMMON_H

#include <stdio.h>
#include <time.h>

#include "tgs/cuda_abi.h"

static inline unsigned long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

/* The kernel in *f; 0, or 1 after "<who>: driver init failed" on stderr. */
static inline int bench_init(const char *who, CUfunction *f)
{
    CUdevice d;
    CUcontext c;
    CUmodule m;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) ||
        cuCtxSetCurrent(c) || cuModuleLoadData(&m, "// tgs-sim: cost k 0\n") ||
        cuModuleGetFunction(f, m, "k")) {
        fprintf(stderr, "%s: driver init failed\n", who);
        return 1;
    }
    return 0;
}

#endif
