/*
 * capture.c: stream capture scenarios on the simulated driver (no shim).
 * Each argument names a scenario; it prints one line "<name> k=v ..." with
 * the return codes the driver gave, which tests/sim/test_sim_capture.py
 * checks against the real driver's documented rules.  Kernels: grid 1000 x
 * block 1000 = 1 ms each at the default 1 ns per thread.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "probe_common.h"

static CUfunction fn;

static int init(void)
{
    return probe_init_kernel(PROBE_PTX, &fn);
}

static int kern(CUstream s) { return cuLaunchKernel(fn, 1000, 1, 1, 1000, 1, 1, 0, s, NULL, NULL); }

static int status(CUstream s)
{
    CUstreamCaptureStatus st = 99;
    int r = cuStreamIsCapturing(s, &st);
    return r ? -r : (int)st;
}

static size_t nodes(CUgraph g)
{
    size_t n = 0;
    return g && cuGraphGetNodes(g, NULL, &n) == 0 ? n : 0;
}

/* basic: capture 3 kernels, nothing runs; replay runs them (3 ms). */
static void basic(void)
{
    CUstream s;
    CUgraph g = NULL;
    CUgraphExec ex;
    cuStreamCreate(&s, 0);
    unsigned long long t0 = now_ns();
    int b = cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    int st = status(s);
    CUstreamCaptureStatus cs;
    cuuint64_t id = 0;
    CUgraph cg = NULL;
    const CUgraphNode *deps = NULL;
    const CUgraphEdgeData *ed = NULL;
    size_t nd = 99;
    int i0 = cuStreamGetCaptureInfo_v3(s, &cs, &id, &cg, &deps, &ed, &nd);
    size_t nd0 = nd;
    int gd = cuGraphDestroy(cg); /* not while the capture builds it */
    int k = 0;
    for (int i = 0; i < 3; i++)
        k |= kern(s);
    cuStreamGetCaptureInfo_v2(s, &cs, &id, &cg, &deps, &nd);
    int e = cuStreamEndCapture(s, &g);
    unsigned long long cap_ns = now_ns() - t0;
    int after = status(s);
    CUgraphNodeType t = 99;
    CUgraphNode ns[3];
    size_t n = 3;
    cuGraphGetNodes(g, ns, &n);
    cuGraphNodeGetType(ns[0], &t);
    int same = cg == g;
    int inst = cuGraphInstantiateWithFlags(&ex, g, 0);
    t0 = now_ns();
    int l = cuGraphLaunch(ex, s);
    int sy = cuStreamSynchronize(s);
    unsigned long long run_ns = now_ns() - t0;
    printf("basic begin=%d status=%d info=%d id=%llu deps0=%zu launch=%d deps=%zu end=%d after=%d "
           "nodes=%zu type=%d same_graph=%d inst=%d replay=%d sync=%d capture_ms=%.1f "
           "replay_ms=%.1f destroy=%d\n",
           b, st, i0, (unsigned long long)id, nd0, k, nd, e, after, nodes(g), (int)t, same, inst,
           l, sy, cap_ns / 1e6, run_ns / 1e6, gd);
}

/* sync: an illegal synchronize invalidates; the stream is usable after the end. */
static void sync_invalidates(const char *what)
{
    CUstream s;
    CUevent ev;
    CUgraph g = (CUgraph)1;
    cuStreamCreate(&s, 0);
    cuEventCreate(&ev, 0);
    int b = cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    int k = kern(s);
    int bad;
    if (!strcmp(what, "streamsync"))
        bad = cuStreamSynchronize(s);
    else if (!strcmp(what, "streamquery"))
        bad = cuStreamQuery(s);
    else if (!strcmp(what, "ctxsync"))
        bad = cuCtxSynchronize();
    else if (!strcmp(what, "legacy"))
        bad = kern(NULL);
    else if (!strcmp(what, "eventquery")) {
        cuEventRecord(ev, s);
        bad = cuEventQuery(ev);
    } else if (!strcmp(what, "eventsync")) {
        cuEventRecord(ev, s);
        bad = cuEventSynchronize(ev);
    } else {
        CUdeviceptr p;
        bad = cuMemAlloc_v2(&p, 4096);
    }
    int st = status(s);
    int k2 = kern(s);
    int e = cuStreamEndCapture(s, &g);
    int after = status(s);
    int again = kern(s);
    int sy = cuStreamSynchronize(s);
    printf("%s begin=%d launch=%d bad=%d status=%d launch2=%d end=%d graph_null=%d after=%d "
           "again=%d sync=%d\n",
           what, b, k, bad, st, k2, e, g == NULL, after, again, sy);
}

/* nonblocking: the legacy stream does not depend on a non-blocking stream. */
static void nonblocking(void)
{
    CUstream s;
    CUgraph g = NULL;
    cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
    int b = cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    int k = kern(s);
    int leg = kern(NULL);
    int legsync = cuStreamSynchronize(NULL);
    int e = cuStreamEndCapture(s, &g);
    printf("nonblocking begin=%d launch=%d legacy=%d legacy_sync=%d end=%d nodes=%zu\n", b, k,
           leg, legsync, e, nodes(g));
}

/* relaxed: cuMemAlloc is allowed in a RELAXED capture, but not event queries. */
static void relaxed(void)
{
    CUstream s;
    CUgraph g = NULL;
    CUdeviceptr p = 0;
    cuStreamCreate(&s, 0);
    int b = cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED);
    int k = kern(s);
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    int x = cuThreadExchangeStreamCaptureMode(&m);
    int old = (int)m;
    int a = cuMemAlloc_v2(&p, 4096);
    int f = cuMemFree_v2(p);
    int x2 = cuThreadExchangeStreamCaptureMode(&m);
    int e = cuStreamEndCapture(s, &g);
    printf("relaxed begin=%d launch=%d exchange=%d old=%d alloc=%d free=%d restored=%d end=%d "
           "nodes=%zu\n", b, k, x, old, a, f, x2 == 0 && m == 2, e, nodes(g));
}

struct other_arg { int mode; int alloc; int end; CUstream s; };

static void *other_thread(void *p)
{
    struct other_arg *a = p;
    CUcontext c;
    CUdevice d;
    cuDeviceGet(&d, 0);
    cuDevicePrimaryCtxRetain(&c, d);
    cuCtxSetCurrent(c);
    if (a->s) {
        CUgraph g;
        a->end = cuStreamEndCapture(a->s, &g);
        return NULL;
    }
    CUstreamCaptureMode m = (CUstreamCaptureMode)a->mode;
    cuThreadExchangeStreamCaptureMode(&m);
    CUdeviceptr ptr = 0;
    a->alloc = cuMemAlloc_v2(&ptr, 4096);
    if (!a->alloc)
        cuMemFree_v2(ptr);
    return NULL;
}

/* modes: another thread's cuMemAlloc while this thread captures in GLOBAL mode. */
static void modes(void)
{
    int res[3][2];
    for (int mode = 0; mode < 3; mode++) {
        CUstream s;
        CUgraph g = NULL;
        cuStreamCreate(&s, 0);
        cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
        kern(s);
        struct other_arg a = {mode, -1, -1, NULL};
        pthread_t t;
        pthread_create(&t, NULL, other_thread, &a);
        pthread_join(t, NULL);
        res[mode][0] = a.alloc;
        res[mode][1] = cuStreamEndCapture(s, &g);
    }
    printf("modes global=%d,%d thread_local=%d,%d relaxed=%d,%d\n", res[0][0], res[0][1],
           res[1][0], res[1][1], res[2][0], res[2][1]);
}

/* wrongthread: a GLOBAL capture must end in the thread that began it. */
static void wrongthread(void)
{
    CUstream s;
    CUgraph g = NULL;
    cuStreamCreate(&s, 0);
    cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    kern(s);
    struct other_arg a = {0, -1, -1, s};
    pthread_t t;
    pthread_create(&t, NULL, other_thread, &a);
    pthread_join(t, NULL);
    int e = cuStreamEndCapture(s, &g);
    printf("wrongthread other=%d own=%d nodes=%zu\n", a.end, e, nodes(g));
}

/* forkjoin: a second stream joins through an event and is joined back. */
static void forkjoin(int join_back)
{
    CUstream s1, s2;
    CUevent e1, e2;
    CUgraph g = NULL;
    cuStreamCreate(&s1, 0);
    cuStreamCreate(&s2, 0);
    cuEventCreate(&e1, CU_EVENT_DISABLE_TIMING);
    cuEventCreate(&e2, CU_EVENT_DISABLE_TIMING);
    int b = cuStreamBeginCapture_v2(s1, CU_STREAM_CAPTURE_MODE_GLOBAL);
    int r = kern(s1);
    r |= cuEventRecord(e1, s1);
    int w = cuStreamWaitEvent(s2, e1, 0);
    int st2 = status(s2);
    cuuint64_t id1 = 0, id2 = 0;
    CUstreamCaptureStatus cs;
    cuStreamGetCaptureInfo(s1, &cs, &id1);
    cuStreamGetCaptureInfo(s2, &cs, &id2);
    r |= kern(s2);
    r |= kern(s1);
    if (join_back) {
        r |= cuEventRecord(e2, s2);
        r |= cuStreamWaitEvent(s1, e2, 0);
    }
    const CUgraphNode *deps;
    size_t nd = 0;
    CUgraph cg;
    cuStreamGetCaptureInfo_v2(s1, &cs, &id1, &cg, &deps, &nd);
    int e = cuStreamEndCapture(s1, &g);
    int after2 = status(s2);
    int q = cuEventQuery(e1);
    printf("forkjoin%s begin=%d ops=%d wait=%d joined=%d same_id=%d deps=%zu end=%d nodes=%zu "
           "after2=%d evquery=%d\n", join_back ? "" : "_unjoined", b, r, w, st2, id1 == id2, nd,
           e, nodes(g), after2, q);
}

/* waits that cross captures: an uncaptured event (isolation), two captures (merge). */
static void crossing(void)
{
    CUstream s1, s2;
    CUevent plain, ev;
    CUgraph g1 = NULL, g2 = NULL;
    cuStreamCreate(&s1, 0);
    cuStreamCreate(&s2, 0);
    cuEventCreate(&plain, 0);
    cuEventCreate(&ev, 0);
    kern(s1);
    cuEventRecord(plain, s1);
    cuStreamBeginCapture_v2(s1, CU_STREAM_CAPTURE_MODE_GLOBAL);
    int iso = cuStreamWaitEvent(s1, plain, 0);
    int e = cuStreamEndCapture(s1, &g1);
    cuStreamBeginCapture_v2(s1, CU_STREAM_CAPTURE_MODE_GLOBAL);
    cuStreamBeginCapture_v2(s2, CU_STREAM_CAPTURE_MODE_GLOBAL);
    kern(s1);
    cuEventRecord(ev, s1);
    int merge = cuStreamWaitEvent(s2, ev, 0);
    int e1 = cuStreamEndCapture(s1, &g1);
    int e2 = cuStreamEndCapture(s2, &g2);
    int again = cuStreamBeginCapture_v2(s1, CU_STREAM_CAPTURE_MODE_GLOBAL);
    int twice = cuStreamBeginCapture_v2(s1, CU_STREAM_CAPTURE_MODE_GLOBAL);
    int unmatched = cuStreamEndCapture(s2, &g2);
    int legacy = cuStreamBeginCapture_v2(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL);
    int e3 = cuStreamEndCapture(s1, &g1);
    int notcap = cuStreamEndCapture(s1, &g1);
    cuStreamBeginCapture_v2(s1, CU_STREAM_CAPTURE_MODE_GLOBAL);
    kern(s1);
    cuEventRecord(ev, s1);
    cuStreamWaitEvent(s2, ev, 0);
    int fe = cuStreamEndCapture(s2, &g2);
    CUstream s3;
    cuStreamCreate(&s3, 0);
    int idle_join = cuStreamWaitEvent(s3, ev, 0); /* ev's capture is invalidated now */
    int fe1 = cuStreamEndCapture(s1, &g1);
    printf("crossing isolation=%d,%d merge=%d,%d,%d twice=%d,%d unmatched=%d legacy=%d end=%d "
           "not_capturing=%d forked_end=%d,%d idle_join=%d\n", iso, e, merge, e1, e2, again,
           twice, unmatched, legacy, e3, notcap, fe, fe1, idle_join);
}

/* memcpy: async copies become memcpy nodes; the bytes move at replay. */
static void memcpy_nodes(void)
{
    CUstream s;
    CUgraph g = NULL;
    CUgraphExec ex;
    CUdeviceptr d;
    unsigned char in[64], out[64];
    memset(in, 7, sizeof in);
    memset(out, 0, sizeof out);
    cuStreamCreate(&s, 0);
    cuMemAlloc_v2(&d, 64);
    cuMemsetD8_v2(d, 0, 64);
    int b = cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    int c1 = cuMemcpyHtoDAsync_v2(d, in, 64, s);
    int k = kern(s);
    int c2 = cuMemcpyDtoHAsync_v2(out, d, 64, s);
    int e = cuStreamEndCapture(s, &g);
    int before = out[0];
    CUgraphNode ns[3];
    size_t n = 3;
    CUgraphNodeType t0 = 99, t2 = 99;
    cuGraphGetNodes(g, ns, &n);
    cuGraphNodeGetType(ns[0], &t0);
    cuGraphNodeGetType(ns[2], &t2);
    cuGraphInstantiateWithFlags(&ex, g, 0);
    int l = cuGraphLaunch(ex, s);
    cuStreamSynchronize(s);
    printf("memcpy begin=%d copy1=%d launch=%d copy2=%d end=%d nodes=%zu types=%d,%d "
           "before=%d replay=%d after=%d\n", b, c1, k, c2, e, n, (int)t0, (int)t2, before, l,
           out[0]);
}

/* plainevent: querying an ordinary event is a potentially unsafe call during a
 * GLOBAL capture; a thread in RELAXED mode may. */
static void plainevent(void)
{
    CUstream s, s2;
    CUevent ev;
    CUgraph g = NULL;
    cuStreamCreate(&s, 0);
    cuStreamCreate(&s2, 0);
    cuEventCreate(&ev, 0);
    kern(s2);
    cuEventRecord(ev, s2);
    cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    kern(s);
    int q1 = cuEventQuery(ev);
    int e1 = cuStreamEndCapture(s, &g);
    cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    kern(s);
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    cuThreadExchangeStreamCaptureMode(&m);
    int q2 = cuEventSynchronize(ev);
    cuThreadExchangeStreamCaptureMode(&m);
    int e2 = cuStreamEndCapture(s, &g);
    printf("plainevent global=%d,%d relaxed=%d,%d\n", q1, e1, q2, e2);
}

/* updatedeps: replace and extend a capturing stream's dependency set. */
static void updatedeps(void)
{
    CUstream s, idle;
    CUgraph g = NULL, cg;
    CUstreamCaptureStatus cs;
    cuuint64_t id;
    const CUgraphNode *deps;
    size_t n1 = 0, n2 = 0;
    cuStreamCreate(&s, 0);
    cuStreamCreate(&idle, 0);
    cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    kern(s);
    cuStreamGetCaptureInfo_v2(s, &cs, &id, &cg, &deps, &n1);
    CUgraphNode a = deps[0], b;
    kern(s);
    cuStreamGetCaptureInfo_v2(s, &cs, &id, &cg, &deps, &n1);
    b = deps[0];
    int set = cuStreamUpdateCaptureDependencies(s, &a, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES);
    cuStreamGetCaptureInfo_v2(s, &cs, &id, &cg, &deps, &n1);
    int first_is_a = n1 == 1 && deps[0] == a;
    int add = cuStreamUpdateCaptureDependencies_v2(s, &b, NULL, 1, 0);
    cuStreamGetCaptureInfo_v2(s, &cs, &id, &cg, &deps, &n2);
    int bad = cuStreamUpdateCaptureDependencies(s, &a, 1, 5);
    int notcap = cuStreamUpdateCaptureDependencies(idle, &a, 1, 0);
    kern(s);
    int e = cuStreamEndCapture(s, &g);
    printf("updatedeps set=%d,%zu,%d add=%d,%zu bad=%d not_capturing=%d end=%d nodes=%zu\n", set,
           n1, first_is_a, add, n2, bad, notcap, e, nodes(g));
}

/* otherstream: querying and synchronizing a stream that does not capture, while another
 * does (GLOBAL); modelled as allowed (docs/simulator.md). */
static void otherstream(void)
{
    CUstream s, s2;
    CUgraph g = NULL;
    cuStreamCreate(&s, 0);
    cuStreamCreate(&s2, 0);
    kern(s2);
    cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    kern(s);
    int q = cuStreamQuery(s2);
    int sy = cuStreamSynchronize(s2);
    int e = cuStreamEndCapture(s, &g);
    printf("otherstream query=%d sync=%d end=%d nodes=%zu\n", q == CUDA_ERROR_NOT_READY ? 0 : q,
           sy, e, nodes(g));
}

/* perthread: capture on the per-thread default stream (CU_STREAM_PER_THREAD, or NULL
 * through the _ptsz entry points); it is a blocking stream, so the legacy one is unusable. */
static void perthread(void)
{
    CUstream pt = (CUstream)0x2, s2;
    CUevent ev, back;
    CUgraph g = NULL;
    cuStreamCreate(&s2, 0);
    cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING);
    cuEventCreate(&back, CU_EVENT_DISABLE_TIMING);
    int b = cuStreamBeginCapture_v2(pt, CU_STREAM_CAPTURE_MODE_GLOBAL);
    int l1 = cuLaunchKernel_ptsz(fn, 1000, 1, 1, 1000, 1, 1, 0, NULL, NULL, NULL);
    int l2 = kern(pt);
    CUstreamCaptureStatus st = 99;
    int q = cuStreamIsCapturing_ptsz(NULL, &st);
    CUstreamCaptureStatus lst = 99;
    int lq = cuStreamIsCapturing(NULL, &lst);
    int j = cuEventRecord(ev, pt);
    j |= cuStreamWaitEvent(s2, ev, 0);
    j |= kern(s2);
    j |= cuEventRecord(back, s2);
    j |= cuStreamWaitEvent_ptsz(NULL, back, 0);
    int e = cuStreamEndCapture_ptsz(NULL, &g);
    CUstreamCaptureStatus after = 99;
    cuStreamIsCapturing(pt, &after);
    printf("perthread begin=%d launch=%d,%d status=%d,%d legacy=%d joins=%d end=%d nodes=%zu "
           "after=%d\n", b, l1, l2, q, (int)st, lq, j, e, nodes(g), (int)after);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    int r = init();
    printf("init %d\n", r);
    for (int i = 1; i < argc && !r; i++) {
        const char *c = argv[i];
        if (!strcmp(c, "basic")) basic();
        else if (!strcmp(c, "nonblocking")) nonblocking();
        else if (!strcmp(c, "relaxed")) relaxed();
        else if (!strcmp(c, "modes")) modes();
        else if (!strcmp(c, "wrongthread")) wrongthread();
        else if (!strcmp(c, "forkjoin")) forkjoin(1);
        else if (!strcmp(c, "unjoined")) forkjoin(0);
        else if (!strcmp(c, "crossing")) crossing();
        else if (!strcmp(c, "memcpy")) memcpy_nodes();
        else if (!strcmp(c, "plainevent")) plainevent();
        else if (!strcmp(c, "updatedeps")) updatedeps();
        else if (!strcmp(c, "otherstream")) otherstream();
        else if (!strcmp(c, "perthread")) perthread();
        else sync_invalidates(c);
    }
    return r;
}
