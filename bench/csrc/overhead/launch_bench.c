/*
 * launch_bench.c: ns per cuLaunchKernel and per cuMemAlloc_v2+cuMemFree_v2
 * pair, median over many batches.  Linked against libcuda (the stub or the
 * simulator, chosen by LD_LIBRARY_PATH); the shim comes in by LD_PRELOAD.
 *   launch_bench time BATCHES BATCH   -> "launch_ns <median> alloc_free_ns <median>
 *                                        cycle_ns <median>"
 *     cycle_ns: one launch then cuCtxSynchronize: for a production (PUBLISH)
 *     process that is an idle->busy->idle transition each time, with the
 *     FUTEX_WAKE production makes after every 1 -> 0 change of its busy count
 *   launch_bench count N              -> N launches, no timing (for callgrind)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_common.h"

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    CUfunction f;
    if (bench_init("launch_bench", &f))
        return 1;
    if (argc == 3 && !strcmp(argv[1], "count")) {
        long n = atol(argv[2]);
        for (long i = 0; i < n; i++)
            cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
        return 0;
    }
    if (argc != 4 || strcmp(argv[1], "time")) {
        fprintf(stderr, "usage: launch_bench time BATCHES BATCH | count N\n");
        return 2;
    }
    int batches = atoi(argv[2]), batch = atoi(argv[3]);
    double *l = calloc((size_t)batches, sizeof(double)), *a = calloc((size_t)batches, sizeof(double));
    double *y = calloc((size_t)batches, sizeof(double));
    for (int b = 0; b < batches; b++) {
        unsigned long long t0 = now_ns();
        for (int i = 0; i < batch; i++)
            cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
        l[b] = (double)(now_ns() - t0) / batch;
        cuCtxSynchronize(); /* outside the timed region: keeps the simulator's queue short */
        t0 = now_ns();
        for (int i = 0; i < batch / 16; i++) {
            CUdeviceptr p;
            cuMemAlloc_v2(&p, 4096);
            cuMemFree_v2(p);
        }
        a[b] = (double)(now_ns() - t0) / (batch / 16);
        t0 = now_ns();
        for (int i = 0; i < batch / 16; i++) {
            cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
            cuCtxSynchronize();
        }
        y[b] = (double)(now_ns() - t0) / (batch / 16);
    }
    qsort(l, (size_t)batches, sizeof(double), cmp);
    qsort(a, (size_t)batches, sizeof(double), cmp);
    qsort(y, (size_t)batches, sizeof(double), cmp);
    printf("launch_ns %.2f alloc_free_ns %.2f cycle_ns %.2f\n", l[batches / 2], a[batches / 2],
           y[batches / 2]);
    return 0;
}
