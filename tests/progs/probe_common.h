/*
 * probe_common.h: what the C test probes (tests/shim/progs, tests/sim/progs)
 * share: a monotonic clock, the one-kernel module, the set-up that loads it in
 * the primary context of device 0, a command's numeric fields, and the driver
 * that runs each argument as one command.  Header-only (static inline),
 * included by each probe.
 */
#ifndef TGS_TESTS_PROBE_COMMON_H
#define TGS_TESTS_PROBE_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tgs/cuda_abi.h"

/* Real PTX (a real driver JIT-compiles it; the simulator reads the cost line). */
#define PROBE_PTX                                                                   \
    ".version 7.0\n.target sm_70\n.address_size 64\n"                              \
    "// tgs-sim: cost k 1\n"                                                        \
    ".visible .entry k()\n{\n    ret;\n}\n"

/* The simulator-only image: kernel "k" at 1 ns per thread. */
#define PROBE_SIM_IMAGE "// tgs-sim: cost k 1\n.entry k {}\n"

static inline unsigned long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

/* cuInit, device 0's primary context made current, `image` loaded, its kernel "k"
 * in *fn.  Returns the first failing CUresult (0 when all succeeded). */
static inline int probe_init_kernel(const char *image, CUfunction *fn)
{
    CUdevice d;
    CUcontext c;
    CUmodule m;
    int r = cuInit(0);
    if (!r) r = cuDeviceGet(&d, 0);
    if (!r) r = cuDevicePrimaryCtxRetain(&c, d);
    if (!r) r = cuCtxSetCurrent(c);
    if (!r) r = cuModuleLoadData(&m, image);
    if (!r) r = cuModuleGetFunction(fn, m, "k");
    return r;
}

/* Field i (from 0) of a command "name:f1:f2:...", as a number (0 where it is missing). */
static inline unsigned long long arg(const char *s, int i)
{
    const char *p = s;
    for (int k = 0; k < i && p; k++) {
        p = strchr(p, ':');
        if (p) p++;
    }
    return p ? strtoull(p, NULL, 10) : 0;
}

/* What a probe's cmd() returns for a command it does not know itself. */
#define PROBE_UNKNOWN 3

/* The commands every probe knows: "sync" (cuCtxSynchronize: "sync <rc>"); anything
 * else is "unknown <command>" and ends the run (2). */
static inline int probe_common_cmd(const char *c)
{
    if (!strcmp(c, "sync")) {
        printf("sync %d\n", cuCtxSynchronize());
        return 0;
    }
    printf("unknown %s\n", c);
    return 2;
}

/* Line-buffered stdout, then each argument run through `cmd` in order (those it
 * returns PROBE_UNKNOWN for through probe_common_cmd), stdout flushed after each; a
 * command returning 2 (unknown or failed set-up) ends the run with exit status 2. */
static inline int probe_main(int argc, char **argv, int (*cmd)(const char *))
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int i = 1; i < argc; i++) {
        int r = cmd(argv[i]);
        if (r == PROBE_UNKNOWN)
            r = probe_common_cmd(argv[i]);
        fflush(stdout);
        if (r == 2)
            return 2;
    }
    return 0;
}

#endif
