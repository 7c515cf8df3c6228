/*
 * capture.c: a stream-capture client for the shim tests.  Runs its arguments
 * as commands, in order, printing one line per result:
 *   init                   cuInit, primary context, kernel "k", two blocking streams s, s2
 *   kick:N:G:B             N launches on s (grid G, block B): "kick <rc>"
 *   capture:N:G:B          capture N launches on s into a graph (GLOBAL mode), instantiate it:
 *                          "capture <begin> <launches> <end> <nodes> <kernel nodes> <inst> <ns>"
 *   fork:N:G:B             the same, the launches on s2, which joins the capture through an
 *                          event recorded in s and is joined back: same line, "fork ..."
 *   pcapture:N:G:B:FLAGS   the same through cuGetProcAddress_v2 (12080, FLAGS): "pcapture ..."
 *   ptcapture:N:G:B        the same on the per-thread default stream: "ptcapture ..."
 *   mixed:N:G:B            while s captures N launches, N more on a third stream s3 (run, and
 *                          charged): "mixed <capture fields as above> <sync of s3 rc>"
 *   replay:N               N launches of the last graph on s, then a synchronize of s:
 *                          "replay <rc> <sync rc> <ns>"
 *   illegal                begin on s, one launch, cuStreamSynchronize(s), end:
 *                          "illegal <sync rc> <status after> <end rc> <graph is NULL>"
 *   sync                   cuCtxSynchronize: "sync <rc>"
 *   ready                  prints "ready", waits for a line on stdin
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "probe_common.h"

static CUfunction fn;
static CUstream s, s2, s3;
static CUgraphExec exec;

static int init(void)
{
    int r = probe_init_kernel(PROBE_PTX, &fn);
    if (!r) r = cuStreamCreate(&s, 0);
    if (!r) r = cuStreamCreate(&s2, 0);
    if (!r) r = cuStreamCreate(&s3, 0);
    return r;
}

static int launch_n(CUstream st, unsigned long long n, unsigned g, unsigned b)
{
    int r = 0;
    for (unsigned long long i = 0; i < n && !r; i++)
        r = cuLaunchKernel(fn, g, 1, 1, b, 1, 1, 0, st, NULL, NULL);
    return r;
}

static void capture(const char *c, int fork)
{
    CUgraph g = NULL;
    CUevent e1, e2;
    unsigned long long t0 = now_ns();
    int b = cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    int l = 0;
    if (fork) {
        cuEventCreate(&e1, CU_EVENT_DISABLE_TIMING);
        cuEventCreate(&e2, CU_EVENT_DISABLE_TIMING);
        l |= cuEventRecord(e1, s);
        l |= cuStreamWaitEvent(s2, e1, 0);
        l |= launch_n(s2, arg(c, 1), (unsigned)arg(c, 2), (unsigned)arg(c, 3));
        l |= cuEventRecord(e2, s2);
        l |= cuStreamWaitEvent(s, e2, 0);
    } else {
        l = launch_n(s, arg(c, 1), (unsigned)arg(c, 2), (unsigned)arg(c, 3));
    }
    int e = cuStreamEndCapture(s, &g);
    unsigned long long ns = now_ns() - t0;
    size_t n = 0, kernels = 0;
    if (g && cuGraphGetNodes(g, NULL, &n) == 0 && n) {
        CUgraphNode *nodes = calloc(n, sizeof *nodes);
        cuGraphGetNodes(g, nodes, &n);
        for (size_t i = 0; i < n; i++) {
            CUgraphNodeType t;
            if (cuGraphNodeGetType(nodes[i], &t) == 0 && t == CU_GRAPH_NODE_TYPE_KERNEL)
                kernels++;
        }
        free(nodes);
    }
    int inst = g ? (int)cuGraphInstantiateWithFlags(&exec, g, 0) : -1;
    printf("%s %d %d %d %zu %zu %d %llu\n", fork ? "fork" : "capture", b, l, e, n, kernels, inst,
           ns);
}

/* The same, through entry points found by cuGetProcAddress_v2 (CUDA 12.8, flags:
 * 0 legacy, 2 per-thread default stream) as cudart finds them. */
static void pcapture(const char *c)
{
    void *b = NULL, *e = NULL, *l = NULL;
    cuuint64_t fl = arg(c, 4);
    int r = cuGetProcAddress_v2("cuStreamBeginCapture", &b, 12080, fl, NULL);
    if (!r) r = cuGetProcAddress_v2("cuStreamEndCapture", &e, 12080, fl, NULL);
    if (!r) r = cuGetProcAddress_v2("cuLaunchKernel", &l, 12080, fl, NULL);
    if (r) {
        printf("pcapture lookup %d\n", r);
        return;
    }
    CUgraph g = NULL;
    unsigned long long t0 = now_ns();
    int rb = ((tgs_pfn_cuStreamBeginCapture_v2)b)(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    int rl = 0;
    for (unsigned long long i = 0; i < arg(c, 1) && !rl; i++)
        rl = ((tgs_pfn_cuLaunchKernel)l)(fn, (unsigned)arg(c, 2), 1, 1, (unsigned)arg(c, 3), 1, 1,
                                         0, s, NULL, NULL);
    int re = ((tgs_pfn_cuStreamEndCapture)e)(s, &g);
    size_t n = 0;
    if (g)
        cuGraphGetNodes(g, NULL, &n);
    int inst = g ? (int)cuGraphInstantiateWithFlags(&exec, g, 0) : -1;
    printf("pcapture %d %d %d %zu %zu %d %llu\n", rb, rl, re, n, n, inst, now_ns() - t0);
}

/* mixed: while s captures, the same thread also launches for real on s3. */
static void mixed(const char *c)
{
    CUgraph g = NULL;
    unsigned long long n = arg(c, 1), t0 = now_ns();
    unsigned gx = (unsigned)arg(c, 2), bx = (unsigned)arg(c, 3);
    int b = cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    int l = 0;
    for (unsigned long long i = 0; i < n && !l; i++) {
        l = launch_n(s, 1, gx, bx);
        if (!l) l = launch_n(s3, 1, gx, bx);
    }
    int e = cuStreamEndCapture(s, &g);
    size_t nodes = 0;
    if (g)
        cuGraphGetNodes(g, NULL, &nodes);
    int inst = g ? (int)cuGraphInstantiateWithFlags(&exec, g, 0) : -1;
    int sy = cuStreamSynchronize(s3);
    printf("mixed %d %d %d %zu %zu %d %llu %d\n", b, l, e, nodes, nodes, inst, now_ns() - t0, sy);
}

/* The per-thread default stream: begun through CU_STREAM_PER_THREAD, launched to and ended
 * through NULL with the _ptsz entry points. */
static void ptcapture(const char *c)
{
    CUgraph g = NULL;
    unsigned long long t0 = now_ns();
    int b = cuStreamBeginCapture_v2((CUstream)0x2, CU_STREAM_CAPTURE_MODE_GLOBAL);
    int l = 0;
    for (unsigned long long i = 0; i < arg(c, 1) && !l; i++)
        l = cuLaunchKernel_ptsz(fn, (unsigned)arg(c, 2), 1, 1, (unsigned)arg(c, 3), 1, 1, 0, NULL,
                                NULL, NULL);
    int e = cuStreamEndCapture_ptsz(NULL, &g);
    size_t n = 0;
    if (g)
        cuGraphGetNodes(g, NULL, &n);
    int inst = g ? (int)cuGraphInstantiateWithFlags(&exec, g, 0) : -1;
    printf("ptcapture %d %d %d %zu %zu %d %llu\n", b, l, e, n, n, inst, now_ns() - t0);
}

static int cmd(const char *c)
{
    int r = 0;
    if (!strcmp(c, "init")) {
        printf("init %d\n", init());
    } else if (!strncmp(c, "kick:", 5)) {
        r = launch_n(s, arg(c, 1), (unsigned)arg(c, 2), (unsigned)arg(c, 3));
        printf("kick %d\n", r);
    } else if (!strncmp(c, "capture:", 8)) {
        capture(c, 0);
    } else if (!strncmp(c, "ptcapture:", 10)) {
        ptcapture(c);
    } else if (!strncmp(c, "mixed:", 6)) {
        mixed(c);
    } else if (!strncmp(c, "pcapture:", 9)) {
        pcapture(c);
    } else if (!strncmp(c, "fork:", 5)) {
        capture(c, 1);
    } else if (!strncmp(c, "replay:", 7)) {
        unsigned long long t0 = now_ns();
        for (unsigned long long i = 0; i < arg(c, 1) && !r; i++)
            r = cuGraphLaunch(exec, s);
        int sy = cuStreamSynchronize(s);
        printf("replay %d %d %llu\n", r, sy, now_ns() - t0);
    } else if (!strcmp(c, "illegal")) {
        CUgraph g = (CUgraph)1;
        CUstreamCaptureStatus st = 99;
        cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
        launch_n(s, 1, 1000, 1000);
        int sy = cuStreamSynchronize(s);
        cuStreamIsCapturing(s, &st);
        int e = cuStreamEndCapture(s, &g);
        printf("illegal %d %d %d %d\n", sy, (int)st, e, g == NULL);
    } else if (!strcmp(c, "ready")) {
        char line[16];
        printf("ready\n");
        fflush(stdout);
        if (!fgets(line, sizeof line, stdin)) { /* parent closed stdin: go on */ }
    } else {
        return PROBE_UNKNOWN;
    }
    return 0;
}

int main(int argc, char **argv)
{
    return probe_main(argc, argv, cmd);
}
