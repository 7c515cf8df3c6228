/*
 * probe.c: a small driver-API client for the shim tests.  Runs its arguments
 * as commands, in order, printing one line per result:
 *   init                       cuInit, primary context, a module with kernel "k"
 *   dev:N                      cuInit, ordinal N's primary context made current, the module
 *                              loaded in it: "dev <rc>"
 *   count  ctxdev  uuid:N      "count <rc> <n>", "ctxdev <rc> <ordinal>", "uuid <rc> GPU-..."
 *   alloc:B  alloc32:B  managed:B  async:B  pool:B  create:B  pitch:W:H
 *   array:W:H  array3d:W:H:D  mipmap:W:H:L
 *                              one allocation each: "<cmd> <rc>"; kept for free_all
 *   alloc_until:B:N            up to N allocations of B bytes: "admitted <n> <last rc>"
 *   free_all                   frees everything kept: "free_all <first bad rc or 0>"
 *   meminfo  totalmem          "meminfo <free> <total>", "totalmem <bytes>"
 *   launch:N:G:B               N cuLaunchKernel (grid G, block B), then a sync:
 *                              "launch <N> <work> <ns>"
 *   kick:N:G:B                 N launches, no sync: "kick <rc>"
 *   timed:N:G:B                N launches, no sync: "timed <N> <ns the calls took> <rc>"
 *   cycle:N:K:G:B:US           N x (K launches, sync, sleep US microseconds): "cycle <rc>"
 *   launchfor:S:G:B            launch for S seconds (sync every 16): "launchfor <work> <ns>"
 *   ex:N:G:B  coop:N:G:B  graph:K:N:G:B (K kernel nodes, N launches)
 *   grid3:N:GX:GY:GZ:BX:BY     N cuLaunchKernel of a 3D grid (GX x GY x GZ blocks of
 *                              BX x BY x 1 threads), then a sync: "grid3 <rc>"
 *   proc:NAME:VER:FLAGS        call cuMemGetInfo-like NAME found by cuGetProcAddress_v2
 *   hits:SYM                   "hits <SYM> <count>" (tgs_shim_debug_hits, -2 without shim)
 *   record  evsync             cuEventRecord of one event on the NULL stream, and
 *                              cuEventSynchronize of it: "record <rc>", "evsync <rc>"
 *   ready                      prints "ready", waits for a line on stdin
 *   sleep:MS  sync
 *   sigbus                     touch a mapping of a file truncated under it: a real SIGBUS,
 *                              which must kill the process (prints "sigbus survived" if not)
 *   bushandler                 install the program's own SIGBUS handler: it prints
 *                              "app handler" and exits 3
 *   busowner                   "busowner app" if that handler is the installed one, else
 *                              "busowner other"
 */
#include <dlfcn.h>
#include <stdio.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "probe_common.h"

static CUfunction fn;

static void app_bus(int sig)
{
    (void)sig;
    static const char msg[] = "app handler\n";
    if (write(1, msg, sizeof msg - 1) < 0) { /* nothing to do */ }
    _exit(3);
}
static CUdeviceptr ptrs[65536];
static int nptrs;
static CUmemGenericAllocationHandle handles[256];
static int nhandles;
static CUarray arrays[256];
static int narrays;
static CUmipmappedArray mips[256];
static int nmips;

static int init(void)
{
    return probe_init_kernel(PROBE_SIM_IMAGE, &fn);
}

static void keep(CUdeviceptr p)
{
    if (nptrs < 65536) ptrs[nptrs++] = p;
}

static int launch_n(unsigned long long n, unsigned g, unsigned b)
{
    int r = 0;
    for (unsigned long long i = 0; i < n && !r; i++)
        r = cuLaunchKernel(fn, g, 1, 1, b, 1, 1, 0, NULL, NULL, NULL);
    return r;
}

static int cmd(const char *c)
{
    int r = 0;
    CUdeviceptr p = 0;
    if (!strcmp(c, "init")) {
        r = init();
        printf("init %d\n", r);
    } else if (!strncmp(c, "dev:", 4)) {
        CUdevice d;
        CUcontext ctx;
        CUmodule m;
        r = cuInit(0);
        if (!r) r = cuDeviceGet(&d, (int)arg(c, 1));
        if (!r) r = cuDevicePrimaryCtxRetain(&ctx, d);
        if (!r) r = cuCtxSetCurrent(ctx);
        if (!r) r = cuModuleLoadData(&m, PROBE_SIM_IMAGE);
        if (!r) r = cuModuleGetFunction(&fn, m, "k");
        printf("dev %d\n", r);
    } else if (!strcmp(c, "count")) {
        int n = -1;
        r = cuInit(0);
        if (!r) r = cuDeviceGetCount(&n);
        printf("count %d %d\n", r, n);
    } else if (!strcmp(c, "ctxdev")) {
        CUdevice d = -1;
        r = cuCtxGetDevice(&d);
        printf("ctxdev %d %d\n", r, (int)d);
    } else if (!strncmp(c, "uuid:", 5)) {
        CUdevice d = 0;
        CUuuid u;
        memset(&u, 0, sizeof u);
        r = cuInit(0);
        if (!r) r = cuDeviceGet(&d, (int)arg(c, 1));
        if (!r) r = cuDeviceGetUuid_v2(&u, d);
        const unsigned char *b = (const unsigned char *)u.bytes;
        printf("uuid %d GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x\n",
               r, b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
               b[13], b[14], b[15]);
    } else if (!strncmp(c, "alloc:", 6)) {
        r = cuMemAlloc_v2(&p, arg(c, 1));
        if (!r) keep(p);
        printf("alloc %d\n", r);
    } else if (!strncmp(c, "alloc32:", 8)) {
        unsigned int q = 0;
        r = cuMemAlloc(&q, (unsigned)arg(c, 1));
        if (!r) keep(q);
        printf("alloc32 %d\n", r);
    } else if (!strncmp(c, "managed:", 8)) {
        r = cuMemAllocManaged(&p, arg(c, 1), CU_MEM_ATTACH_GLOBAL);
        if (!r) keep(p);
        printf("managed %d\n", r);
    } else if (!strncmp(c, "async:", 6)) {
        r = cuMemAllocAsync(&p, arg(c, 1), NULL);
        if (!r) keep(p);
        printf("async %d\n", r);
    } else if (!strncmp(c, "pool:", 5)) {
        CUmemoryPool pool;
        r = cuDeviceGetDefaultMemPool(&pool, 0);
        if (!r) r = cuMemAllocFromPoolAsync(&p, arg(c, 1), pool, NULL);
        if (!r) keep(p);
        printf("pool %d\n", r);
    } else if (!strncmp(c, "create:", 7)) {
        CUmemAllocationProp prop = { 0 };
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = 0;
        r = cuMemCreate(&handles[nhandles], arg(c, 1), &prop, 0);
        if (!r) nhandles++;
        printf("create %d\n", r);
    } else if (!strncmp(c, "pitch:", 6)) {
        size_t pitch = 0;
        r = cuMemAllocPitch_v2(&p, &pitch, arg(c, 1), arg(c, 2), 4);
        if (!r) keep(p);
        printf("pitch %d %zu\n", r, pitch);
    } else if (!strncmp(c, "array:", 6)) {
        CUDA_ARRAY_DESCRIPTOR d = { arg(c, 1), arg(c, 2), CU_AD_FORMAT_FLOAT, 1 };
        r = cuArrayCreate_v2(&arrays[narrays], &d);
        if (!r) narrays++;
        printf("array %d\n", r);
    } else if (!strncmp(c, "array3d:", 8)) {
        CUDA_ARRAY3D_DESCRIPTOR d = { arg(c, 1), arg(c, 2), arg(c, 3), CU_AD_FORMAT_FLOAT, 1, 0 };
        r = cuArray3DCreate_v2(&arrays[narrays], &d);
        if (!r) narrays++;
        printf("array3d %d\n", r);
    } else if (!strncmp(c, "mipmap:", 7)) {
        CUDA_ARRAY3D_DESCRIPTOR d = { arg(c, 1), arg(c, 2), 0, CU_AD_FORMAT_FLOAT, 1, 0 };
        r = cuMipmappedArrayCreate(&mips[nmips], &d, (unsigned)arg(c, 3));
        if (!r) nmips++;
        printf("mipmap %d\n", r);
    } else if (!strncmp(c, "alloc_until:", 12)) {
        unsigned long long b = arg(c, 1), n = arg(c, 2), k = 0;
        while (k < n) {
            r = cuMemAlloc_v2(&p, b);
            if (r) break;
            keep(p);
            k++;
        }
        printf("admitted %llu %d\n", k, r);
        r = 0;
    } else if (!strcmp(c, "free_all")) {
        int bad = 0;
        for (int i = 0; i < nptrs; i++) { int x = cuMemFree_v2(ptrs[i]); if (x && !bad) bad = x; }
        for (int i = 0; i < nhandles; i++) { int x = cuMemRelease(handles[i]); if (x && !bad) bad = x; }
        for (int i = 0; i < narrays; i++) { int x = cuArrayDestroy(arrays[i]); if (x && !bad) bad = x; }
        for (int i = 0; i < nmips; i++) { int x = cuMipmappedArrayDestroy(mips[i]); if (x && !bad) bad = x; }
        nptrs = nhandles = narrays = nmips = 0;
        printf("free_all %d\n", bad);
    } else if (!strcmp(c, "meminfo")) {
        size_t f = 0, t = 0;
        r = cuMemGetInfo_v2(&f, &t);
        printf("meminfo %zu %zu %d\n", f, t, r);
    } else if (!strcmp(c, "totalmem")) {
        size_t t = 0;
        r = cuDeviceTotalMem_v2(&t, 0);
        printf("totalmem %zu %d\n", t, r);
    } else if (!strncmp(c, "launch:", 7)) {
        unsigned long long n = arg(c, 1), g = arg(c, 2), b = arg(c, 3), t0 = now_ns();
        r = launch_n(n, (unsigned)g, (unsigned)b);
        if (!r) r = cuCtxSynchronize();
        printf("launch %llu %llu %llu %d\n", n, n * g * b, now_ns() - t0, r);
    } else if (!strcmp(c, "record") || !strcmp(c, "evsync")) {
        static CUevent ev;
        r = ev ? CUDA_SUCCESS : cuEventCreate(&ev, 0);
        if (!r) r = c[0] == 'r' ? cuEventRecord(ev, NULL) : cuEventSynchronize(ev);
        printf("%s %d\n", c, r);
    } else if (!strncmp(c, "kick:", 5)) {
        r = launch_n(arg(c, 1), (unsigned)arg(c, 2), (unsigned)arg(c, 3));
        printf("kick %d\n", r);
    } else if (!strncmp(c, "timed:", 6)) {
        unsigned long long n = arg(c, 1), t0 = now_ns();
        r = launch_n(n, (unsigned)arg(c, 2), (unsigned)arg(c, 3));
        printf("timed %llu %llu %d\n", n, now_ns() - t0, r);
    } else if (!strncmp(c, "cycle:", 6)) {
        unsigned long long us = arg(c, 5);
        struct timespec ts = { (time_t)(us / 1000000), (long)(us % 1000000) * 1000L };
        for (unsigned long long i = 0; i < arg(c, 1) && !r; i++) {
            r = launch_n(arg(c, 2), (unsigned)arg(c, 3), (unsigned)arg(c, 4));
            if (!r) r = cuCtxSynchronize();
            nanosleep(&ts, NULL);
        }
        printf("cycle %d\n", r);
    } else if (!strncmp(c, "launchfor:", 10)) {
        unsigned long long s = arg(c, 1), g = arg(c, 2), b = arg(c, 3), t0 = now_ns(), w = 0;
        while (!r && now_ns() - t0 < s * 1000000000ull) {
            r = launch_n(16, (unsigned)g, (unsigned)b);
            w += 16 * g * b;
            if (!r) r = cuCtxSynchronize();
        }
        printf("launchfor %llu %llu %d\n", w, now_ns() - t0, r);
    } else if (!strncmp(c, "grid3:", 6)) {
        for (unsigned long long i = 0; i < arg(c, 1) && !r; i++)
            r = cuLaunchKernel(fn, (unsigned)arg(c, 2), (unsigned)arg(c, 3), (unsigned)arg(c, 4),
                               (unsigned)arg(c, 5), (unsigned)arg(c, 6), 1, 0, NULL, NULL, NULL);
        if (!r) r = cuCtxSynchronize();
        printf("grid3 %d\n", r);
    } else if (!strncmp(c, "ex:", 3)) {
        CUlaunchConfig cfg = { (unsigned)arg(c, 2), 1, 1, (unsigned)arg(c, 3), 1, 1, 0, NULL, NULL, 0 };
        for (unsigned long long i = 0; i < arg(c, 1) && !r; i++)
            r = cuLaunchKernelEx(&cfg, fn, NULL, NULL);
        if (!r) r = cuCtxSynchronize();
        printf("ex %d\n", r);
    } else if (!strncmp(c, "coop:", 5)) {
        for (unsigned long long i = 0; i < arg(c, 1) && !r; i++)
            r = cuLaunchCooperativeKernel(fn, (unsigned)arg(c, 2), 1, 1, (unsigned)arg(c, 3), 1, 1, 0, NULL, NULL);
        if (!r) r = cuCtxSynchronize();
        printf("coop %d\n", r);
    } else if (!strncmp(c, "graph:", 6)) {
        CUgraph gr;
        CUgraphExec ex;
        r = cuGraphCreate(&gr, 0);
        for (unsigned long long i = 0; i < arg(c, 1) && !r; i++) {
            CUgraphNode node;
            CUDA_KERNEL_NODE_PARAMS_v2 kp = { fn, (unsigned)arg(c, 3), 1, 1, (unsigned)arg(c, 4), 1, 1, 0, NULL, NULL, NULL, NULL };
            r = cuGraphAddKernelNode_v2(&node, gr, NULL, 0, &kp);
        }
        if (!r) r = cuGraphInstantiateWithFlags(&ex, gr, 0);
        for (unsigned long long i = 0; i < arg(c, 2) && !r; i++)
            r = cuGraphLaunch(ex, NULL);
        if (!r) r = cuCtxSynchronize();
        printf("graph %d\n", r);
    } else if (!strncmp(c, "proc:", 5)) {
        char name[128];
        snprintf(name, sizeof name, "%s", c + 5);
        *strchr(name, ':') = 0;
        void *f = NULL;
        CUdriverProcAddressQueryResult st;
        r = cuGetProcAddress_v2(name, &f, (int)arg(c, 2), arg(c, 3), &st);
        if (!r && !strcmp(name, "cuMemAlloc")) {
            r = ((tgs_pfn_cuMemAlloc_v2)f)(&p, 4096);
            if (!r) keep(p);
        } else if (!r && !strcmp(name, "cuLaunchKernel")) {
            r = ((tgs_pfn_cuLaunchKernel)f)(fn, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
        }
        printf("proc %d\n", r);
    } else if (!strncmp(c, "hits:", 5)) {
        long long (*h)(const char *) = (long long (*)(const char *))dlsym(RTLD_DEFAULT, "tgs_shim_debug_hits");
        printf("hits %s %lld\n", c + 5, h ? h(c + 5) : -2);
    } else if (!strcmp(c, "ready")) {
        char line[16];
        printf("ready\n");
        fflush(stdout);
        if (!fgets(line, sizeof line, stdin)) { /* parent closed stdin: go on */ }
    } else if (!strncmp(c, "sleep:", 6)) {
        struct timespec ts = { (time_t)(arg(c, 1) / 1000), (long)(arg(c, 1) % 1000) * 1000000L };
        nanosleep(&ts, NULL);
    } else if (!strcmp(c, "bushandler")) {
        signal(SIGBUS, app_bus);
        printf("bushandler 0\n");
    } else if (!strcmp(c, "busowner")) {
        struct sigaction cur;
        sigaction(SIGBUS, NULL, &cur);
        printf("busowner %s\n", !(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == app_bus
                                     ? "app" : "other");
    } else if (!strcmp(c, "sigbus")) {
        char path[] = "/tmp/tgs-probe-bus-XXXXXX";
        int fd = mkstemp(path);
        volatile char *m = MAP_FAILED;
        if (fd >= 0 && ftruncate(fd, 4096) == 0)
            m = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
        if (fd >= 0)
            unlink(path);
        if (m == MAP_FAILED || ftruncate(fd, 0) != 0) {
            printf("sigbus setup failed\n");
            return 2;
        }
        fflush(stdout);
        printf("sigbus survived %d\n", m[0]);
    } else {
        return PROBE_UNKNOWN;
    }
    return 0;
}

int main(int argc, char **argv)
{
    return probe_main(argc, argv, cmd);
}
