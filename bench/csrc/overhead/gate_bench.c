/*
 * gate_bench.c: how fast a gated opportunistic launch reacts when production
 * goes idle (the futex wake of docs/segment.md, "Gating").  Two roles, run
 * as two processes with the shim preloaded:
 *   gate_bench prod N BUSY_US GAP_US  N x (launch, busy BUSY_US, synchronize,
 *                                     print "idle <CLOCK_MONOTONIC ns>", sleep GAP_US)
 *   gate_bench opp SECONDS            launches back to back; each launch that was
 *                                     held (> 20 us) prints "go <ns when it returned>"
 * The reaction of one gap is the first "go" after its "idle".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_common.h"

static void sleep_us(long us)
{
    struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };
    nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
    CUfunction f;
    if (bench_init("gate_bench", &f))
        return 1;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 5 && !strcmp(argv[1], "prod")) {
        int n = atoi(argv[2]);
        long busy = atol(argv[3]), gap = atol(argv[4]);
        for (int i = 0; i < n; i++) {
            cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
            sleep_us(busy);
            cuCtxSynchronize();
            printf("idle %llu\n", now_ns());
            sleep_us(gap);
        }
        return 0;
    }
    if (argc == 3 && !strcmp(argv[1], "opp")) {
        unsigned long long end = now_ns() + (unsigned long long)(atof(argv[2]) * 1e9);
        for (unsigned long long t0 = now_ns(); t0 < end; t0 = now_ns()) {
            cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
            unsigned long long t1 = now_ns();
            if (t1 - t0 > 20000)
                printf("go %llu\n", t1);
        }
        return 0;
    }
    fprintf(stderr, "usage: gate_bench prod N BUSY_US GAP_US | opp SECONDS\n");
    return 2;
}
