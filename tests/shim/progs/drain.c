/*
 * drain.c: a production client for the drain-detection tests.  Runs its
 * arguments as commands, in order, printing one line per result:
 *   init              cuInit, primary context, kernel "k" (1 ns per thread on the simulator),
 *                     streams s[1..9] (s[0] is the NULL stream): "init <rc>"
 *   kick:N:G:B:S      N launches on stream S (grid G, block B), no synchronize: "kick <rc>"
 *   other:G           one launch of kernel "k2" (1 ns per thread, its own module: the
 *                     simulator's lazy load applies to its first launch) on the NULL stream,
 *                     grid G, block 1000: "other <rc>"
 *   mark:S            record this probe's "old" event on stream S: "mark <rc>"
 *   waitold           cuEventSynchronize of the old event (run-ahead: an older iteration,
 *                     never the last launch): "waitold <rc>"
 *   ready             prints "ready", waits for a line on stdin
 *   fork:CMD          fork; the child runs CMD (one of these commands, or "none") and exits
 *                     through exit(); the parent waits for it: "fork <child exit status>"
 *   steps:N:G:P:W[:V] N run-ahead steps, no synchronize: a G us kernel, P us of host time
 *                     (the GPU drains: a micro-gap), another G us kernel, W us of host
 *                     time (the step's real gap): "steps <rc>"; V=1: step i launches i % 3
 *                     more G us kernels before its gap (steps of varying launch counts)
 *   loss:N:G:W:E:L    N run-ahead steps of one G us kernel and W us of host time, every
 *                     E-th step reading its loss instead: cuCtxSynchronize, then L us of
 *                     host time (logging): "loss <rc>"
 *   sync              cuCtxSynchronize: "sync <rc>"
 *   quit              exit(0) at once, whatever is queued
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probe_common.h"

#define NSTREAMS 10

static CUfunction fn, fn2;
static CUstream st[NSTREAMS];
static CUevent old;

static int init(void)
{
    CUmodule m2;
    int r = probe_init_kernel(PROBE_SIM_IMAGE, &fn);
    if (!r) r = cuModuleLoadData(&m2, "// tgs-sim: cost k2 1\n.entry k2 {}\n");
    if (!r) r = cuModuleGetFunction(&fn2, m2, "k2");
    for (int i = 1; i < NSTREAMS && !r; i++)
        r = cuStreamCreate(&st[i], 0);
    if (!r) r = cuEventCreate(&old, CU_EVENT_DISABLE_TIMING);
    return r;
}

static CUstream stream(unsigned long long i)
{
    return i < NSTREAMS ? st[i] : NULL;
}

static int cmd(const char *c)
{
    int r = 0;
    if (!strcmp(c, "init")) {
        r = init();
        printf("init %d\n", r);
    } else if (!strncmp(c, "kick:", 5)) {
        CUstream s = stream(arg(c, 4));
        for (unsigned long long i = 0; i < arg(c, 1) && !r; i++)
            r = cuLaunchKernel(fn, (unsigned)arg(c, 2), 1, 1, (unsigned)arg(c, 3), 1, 1, 0, s,
                               NULL, NULL);
        printf("kick %d\n", r);
    } else if (!strncmp(c, "other:", 6)) {
        printf("other %d\n", cuLaunchKernel(fn2, (unsigned)arg(c, 1), 1, 1, 1000, 1, 1, 0, NULL,
                                            NULL, NULL));
    } else if (!strncmp(c, "steps:", 6)) {
        unsigned long long g = arg(c, 2);
        for (unsigned long long i = 0; i < arg(c, 1) && !r; i++) {
            r = cuLaunchKernel(fn, (unsigned)g, 1, 1, 1000, 1, 1, 0, NULL, NULL, NULL);
            usleep((useconds_t)arg(c, 3));
            unsigned long long more = 1 + (arg(c, 5) ? i % 3 : 0);
            for (unsigned long long k = 0; k < more && !r; k++)
                r = cuLaunchKernel(fn, (unsigned)g, 1, 1, 1000, 1, 1, 0, NULL, NULL, NULL);
            usleep((useconds_t)arg(c, 4));
        }
        printf("steps %d\n", r);
    } else if (!strncmp(c, "loss:", 5)) {
        for (unsigned long long i = 1; i <= arg(c, 1) && !r; i++) {
            r = cuLaunchKernel(fn, (unsigned)arg(c, 2), 1, 1, 1000, 1, 1, 0, NULL, NULL, NULL);
            if (!r && i % arg(c, 4) == 0) {
                r = cuCtxSynchronize();
                usleep((useconds_t)arg(c, 5));
            } else {
                usleep((useconds_t)arg(c, 3));
            }
        }
        printf("loss %d\n", r);
    } else if (!strncmp(c, "mark:", 5)) {
        printf("mark %d\n", cuEventRecord(old, stream(arg(c, 1))));
    } else if (!strcmp(c, "waitold")) {
        printf("waitold %d\n", cuEventSynchronize(old));
    } else if (!strcmp(c, "ready")) {
        char line[16];
        printf("ready\n");
        fflush(stdout);
        if (!fgets(line, sizeof line, stdin)) { /* parent closed stdin: go on */ }
    } else if (!strncmp(c, "fork:", 5)) {
        fflush(stdout);
        pid_t p = fork();
        if (p == 0) {
            if (strcmp(c + 5, "none"))
                cmd(c + 5);
            fflush(stdout);
            exit(0);
        }
        int status = -1;
        if (p > 0)
            waitpid(p, &status, 0);
        printf("fork %d\n", status);
    } else if (!strcmp(c, "quit")) {
        fflush(stdout);
        exit(0);
    } else {
        return PROBE_UNKNOWN;
    }
    return 0;
}

int main(int argc, char **argv)
{
    return probe_main(argc, argv, cmd);
}
