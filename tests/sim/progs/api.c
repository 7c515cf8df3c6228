/*
 * api.c: checks the simulated driver's entry points and argument handling.
 * Prints "FAIL ..." lines for every broken expectation and "ok N" at the end;
 * exit status 0 only when all passed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tgs/cuda_abi.h"

static int fails, checks;

#define EXPECT(call, want)                                                                     \
    do {                                                                                       \
        CUresult r_ = (call);                                                                  \
        checks++;                                                                              \
        if (r_ != (want)) {                                                                    \
            printf("FAIL line %d: %s = %d, want %d\n", __LINE__, #call, (int)r_, (int)(want)); \
            fails++;                                                                           \
        }                                                                                      \
    } while (0)
#define OK(call) EXPECT(call, CUDA_SUCCESS)
#define TRUE(cond)                                                                             \
    do {                                                                                       \
        checks++;                                                                              \
        if (!(cond)) {                                                                         \
            printf("FAIL line %d: %s\n", __LINE__, #cond);                                     \
            fails++;                                                                           \
        }                                                                                      \
    } while (0)

static void before_init(void)
{
    int v = 0, n = 0;
    const char *s = NULL;
    CUdevice d;
    void *fn = NULL;
    OK(cuDriverGetVersion(&v));
    TRUE(v == 13000);
    EXPECT(cuDriverGetVersion(NULL), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT(cuDeviceGet(&d, 0), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT(cuMemAlloc_v2((CUdeviceptr *)&fn, 16), CUDA_ERROR_NOT_INITIALIZED);
    OK(cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s));
    TRUE(s && !strcmp(s, "out of memory"));
    OK(cuGetErrorName(CUDA_ERROR_INVALID_VALUE, &s));
    TRUE(s && !strcmp(s, "CUDA_ERROR_INVALID_VALUE"));
    EXPECT(cuGetErrorName((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
    OK(cuGetProcAddress("cuInit", &fn, 12000, 0));
    TRUE(fn == (void *)cuInit);
    EXPECT(cuInit(1), CUDA_ERROR_INVALID_VALUE);
}

static void devices(void)
{
    int n = 0, v = 0;
    CUdevice d;
    char name[64], bus[32];
    size_t total = 0;
    unsigned int t32 = 0;
    CUuuid u1, u2;
    const void *tbl = (void *)1;
    OK(cuDeviceGetCount(&n));
    TRUE(n == 1);
    EXPECT(cuDeviceGetCount(NULL), CUDA_ERROR_INVALID_VALUE);
    OK(cuDeviceGet(&d, 0));
    EXPECT(cuDeviceGet(&d, 5), CUDA_ERROR_INVALID_DEVICE);
    EXPECT(cuDeviceGet(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    OK(cuDeviceGetName(name, sizeof name, 0));
    TRUE(!strcmp(name, "TGS Simulated GPU"));
    OK(cuDeviceGetUuid(&u1, 0));
    OK(cuDeviceGetUuid_v2(&u2, 0));
    TRUE(!memcmp(&u1, &u2, sizeof u1));
    EXPECT(cuDeviceGetUuid_v2(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    OK(cuDeviceTotalMem_v2(&total, 0));
    TRUE(total == 512ull << 20);
    OK(cuDeviceTotalMem(&t32, 0));
    TRUE(t32 == 512u << 20);
    OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
    TRUE(v == 108);
    OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0));
    TRUE(v == 9);
    OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0));
    TRUE(v == 0);
    OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 0));
    TRUE(v == 1024);
    OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0));
    TRUE(v == 32);
    EXPECT(cuDeviceGetAttribute(&v, (CUdevice_attribute)100000, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 3), CUDA_ERROR_INVALID_DEVICE);
    OK(cuDeviceGetPCIBusId(bus, sizeof bus, 0));
    TRUE(!strcmp(bus, "0000:01:00.0"));
    CUuuid id = {{0}};
    EXPECT(cuGetExportTable(&tbl, &id), CUDA_ERROR_INVALID_VALUE); /* unknown table */
    printf("uuid ");
    for (int i = 0; i < 16; i++)
        printf("%02x", (unsigned char)u1.bytes[i]);
    printf("\n");
}

static CUcontext contexts(void)
{
    CUcontext p, c, cur, c2;
    CUdevice d = -1;
    unsigned int fl;
    int active = -1;
    OK(cuDevicePrimaryCtxGetState(0, &fl, &active));
    TRUE(active == 0);
    OK(cuCtxGetCurrent(&cur));
    TRUE(cur == NULL);
    EXPECT(cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT(cuCtxGetDevice(&d), CUDA_ERROR_INVALID_CONTEXT);
    OK(cuDevicePrimaryCtxRetain(&p, 0));
    OK(cuDevicePrimaryCtxGetState(0, &fl, &active));
    TRUE(active == 1);
    OK(cuCtxCreate_v2(&c, 0, 0));
    OK(cuCtxGetCurrent(&cur));
    TRUE(cur == c);
    OK(cuCtxPushCurrent_v2(p));
    OK(cuCtxGetCurrent(&cur));
    TRUE(cur == p);
    OK(cuCtxPopCurrent_v2(&cur));
    TRUE(cur == p);
    OK(cuCtxGetDevice(&d));
    TRUE(d == 0);
    OK(cuCtxGetDevice_v2(&d, p));
    OK(cuCtxSynchronize());
    OK(cuCtxSynchronize_v2(c));
    OK(cuCtxDestroy_v2(c));
    OK(cuCtxGetCurrent(&cur));
    TRUE(cur == NULL);
    EXPECT(cuCtxDestroy_v2(c), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT(cuCtxPushCurrent_v2((CUcontext)(uintptr_t)0x1234), CUDA_ERROR_INVALID_CONTEXT);
    CUexecAffinityParam ap = {CU_EXEC_AFFINITY_TYPE_SM_COUNT, {{54}}};
    OK(cuCtxCreate_v3(&c2, &ap, 1, 0, 0));
    OK(cuCtxDestroy(c2));
    CUctxCreateParams cp = {0};
    OK(cuCtxCreate_v4(&c2, &cp, 0, 0));
    OK(cuCtxPopCurrent(&cur));
    TRUE(cur == c2);
    OK(cuCtxDestroy(c2));
    OK(cuCtxSetCurrent(p));
    return p;
}

static void memory(void)
{
    CUdeviceptr d, d2, m;
    size_t pitch = 0, fr0, tot, fr1;
    OK(cuMemGetInfo_v2(&fr0, &tot));
    TRUE(tot == 512ull << 20);
    OK(cuMemAlloc_v2(&d, 1 << 20));
    OK(cuMemGetInfo_v2(&fr1, &tot));
    TRUE(fr0 - fr1 == 1 << 20);
    EXPECT(cuMemAlloc_v2(NULL, 16), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemAlloc_v2(&d2, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemAlloc_v2(&d2, 600ull << 20), CUDA_ERROR_OUT_OF_MEMORY);
    /* copies round-trip exactly */
    unsigned char in[4096], out[4096];
    for (int i = 0; i < 4096; i++)
        in[i] = (unsigned char)(i * 7 + 3);
    OK(cuMemcpyHtoD_v2(d, in, sizeof in));
    OK(cuMemAlloc_v2(&d2, 8192));
    OK(cuMemcpyDtoD_v2(d2, d, sizeof in));
    memset(out, 0, sizeof out);
    OK(cuMemcpyDtoH_v2(out, d2, sizeof out));
    TRUE(!memcmp(in, out, sizeof in));
    OK(cuMemcpyHtoDAsync_v2(d + 100, in, 10, NULL));
    OK(cuMemcpyDtoHAsync_v2_ptsz(out, d + 100, 10, TGS_CU_STREAM_PER_THREAD));
    OK(cuMemsetD8_v2(d2, 0xab, 16));
    OK(cuMemsetD32_v2_ptds(d2 + 16, 0x01020304, 4));
    OK(cuMemcpyDtoH_v2_ptds(out, d2, 32));
    TRUE(out[0] == 0xab && out[15] == 0xab && out[16] == 0x04 && out[19] == 0x01);
    EXPECT(cuMemsetD32_v2(d2 + 1, 0, 1), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemcpyHtoD_v2(d2 + 8000, in, 4096), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemcpyDtoH_v2(out, (CUdeviceptr)(uintptr_t)in, 16), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemFree_v2(d2));
    EXPECT(cuMemFree_v2(d2), CUDA_ERROR_INVALID_VALUE);
    /* pitch: rows rounded up to 512 bytes */
    OK(cuMemGetInfo_v2(&fr0, &tot));
    OK(cuMemAllocPitch_v2(&d2, &pitch, 1000, 100, 4));
    TRUE(pitch == 1024);
    OK(cuMemGetInfo_v2(&fr1, &tot));
    TRUE(fr0 - fr1 >= 1024 * 100 && fr0 - fr1 < 1024 * 100 + 4096);
    EXPECT(cuMemAllocPitch_v2(&d2, &pitch, 1000, 100, 3), CUDA_ERROR_INVALID_VALUE);
    /* managed: accounted separately, may exceed capacity */
    OK(cuMemAllocManaged(&m, 1ull << 30, CU_MEM_ATTACH_GLOBAL));
    EXPECT(cuMemAllocManaged(&m, 16, 0), CUDA_ERROR_INVALID_VALUE);
    CUmemLocation loc = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
    OK(cuMemAdvise(m, 4096, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, 0));
    OK(cuMemAdvise_v2(m, 4096, CU_MEM_ADVISE_SET_ACCESSED_BY, loc));
    OK(cuMemPrefetchAsync(m, 4096, 0, NULL));
    OK(cuMemPrefetchAsync_v2_ptsz(m, 4096, loc, 0, NULL));
    EXPECT(cuMemAdvise(m, 4096, (CUmem_advise)99, 0), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemFree_v2(m));
    /* async and pools */
    CUmemoryPool pool;
    CUstream s;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    OK(cuMemAllocAsync(&d2, 4096, s));
    OK(cuMemFreeAsync(d2, s));
    OK(cuDeviceGetDefaultMemPool(&pool, 0));
    OK(cuMemAllocFromPoolAsync_ptsz(&d2, 4096, pool, s));
    OK(cuMemFreeAsync_ptsz(d2, s));
    EXPECT(cuMemAllocFromPoolAsync(&d2, 4096, (CUmemoryPool)(uintptr_t)8, s),
           CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemAllocAsync(&d2, 4096, (CUstream)(uintptr_t)0x999), CUDA_ERROR_INVALID_HANDLE);
    OK(cuStreamDestroy_v2(s));
    OK(cuMemFree_v2(d));
}

static void vmm_arrays(void)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t g = 0, fr0, fr1, tot;
    OK(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    TRUE(g == 2u << 20);
    CUmemGenericAllocationHandle h;
    CUdeviceptr va;
    OK(cuMemGetInfo_v2(&fr0, &tot));
    OK(cuMemCreate(&h, 4u << 20, &prop, 0));
    OK(cuMemGetInfo_v2(&fr1, &tot));
    TRUE(fr0 - fr1 == 4u << 20);
    EXPECT(cuMemCreate(&h, 1000, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemAddressReserve(&va, 8u << 20, 0, 0, 0));
    TRUE(va % (2u << 20) == 0);
    OK(cuMemMap(va, 4u << 20, 0, h, 0));
    OK(cuMemMap(va + (4u << 20), 2u << 20, 2u << 20, h, 0)); /* alias the second half */
    CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    OK(cuMemSetAccess(va, 4u << 20, &acc, 1));
    OK(cuMemSetAccess(va + (4u << 20), 2u << 20, &acc, 1));
    unsigned int x = 0xdeadbeef, y = 0;
    OK(cuMemcpyHtoD_v2(va + (2u << 20), &x, 4));
    OK(cuMemcpyDtoH_v2(&y, va + (4u << 20), 4));
    TRUE(y == 0xdeadbeef);
    OK(cuMemRelease(h)); /* still mapped: memory stays until unmapped */
    OK(cuMemUnmap(va, 4u << 20));
    OK(cuMemUnmap(va + (4u << 20), 2u << 20));
    EXPECT(cuMemUnmap(va, 4u << 20), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemGetInfo_v2(&fr1, &tot));
    TRUE(fr1 == fr0);
    OK(cuMemAddressFree(va, 8u << 20));
    /* arrays: element size x extents, mip levels summed */
    CUarray a;
    CUmipmappedArray mm;
    CUDA_ARRAY_DESCRIPTOR ad = {1024, 1024, CU_AD_FORMAT_FLOAT, 4};
    OK(cuMemGetInfo_v2(&fr0, &tot));
    OK(cuArrayCreate_v2(&a, &ad));
    OK(cuMemGetInfo_v2(&fr1, &tot));
    TRUE(fr0 - fr1 == 16u << 20);
    OK(cuArrayDestroy(a));
    CUDA_ARRAY3D_DESCRIPTOR a3 = {64, 64, 64, CU_AD_FORMAT_UNSIGNED_INT8, 1, 0};
    OK(cuArray3DCreate_v2(&a, &a3));
    OK(cuMemGetInfo_v2(&fr1, &tot));
    TRUE(fr0 - fr1 == 64 * 64 * 64);
    OK(cuArrayDestroy(a));
    CUDA_ARRAY3D_DESCRIPTOR m2 = {256, 256, 0, CU_AD_FORMAT_HALF, 2, 0};
    OK(cuMipmappedArrayCreate(&mm, &m2, 3));
    OK(cuMemGetInfo_v2(&fr1, &tot));
    TRUE(fr0 - fr1 == 4ull * (256 * 256 + 128 * 128 + 64 * 64));
    OK(cuMipmappedArrayDestroy(mm));
    EXPECT(cuArrayDestroy(a), CUDA_ERROR_INVALID_HANDLE);
    ad.NumChannels = 3;
    EXPECT(cuArrayCreate_v2(&a, &ad), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemGetInfo_v2(&fr1, &tot));
    TRUE(fr1 == fr0);
}

static void work(void)
{
    CUmodule mod;
    CUfunction f, f2;
    CUstream s;
    CUevent e0, e1;
    int prio = 9;
    float ms = 0;
    const char img[] = "// ptx\n// tgs-sim: cost slow 4.0\n.entry slow()\n.entry fast()\n";
    OK(cuModuleLoadDataEx(&mod, img, 0, NULL, NULL));
    OK(cuModuleGetFunction(&f, mod, "slow"));
    OK(cuModuleGetFunction(&f2, mod, "slow"));
    TRUE(f == f2);
    OK(cuModuleGetFunction(&f2, mod, "fast"));
    OK(cuStreamCreateWithPriority(&s, 0, -3));
    OK(cuStreamGetPriority(s, &prio));
    TRUE(prio == -3);
    OK(cuEventCreate(&e0, 0));
    OK(cuEventCreate(&e1, 0));
    EXPECT(cuEventElapsedTime(&ms, e0, e1), CUDA_ERROR_INVALID_HANDLE);
    /* a 30 ms kernel first keeps the device busy while the host issues the rest,
     * so the timed kernels run back to back whatever the host's delays */
    OK(cuLaunchKernel(f2, 30000, 1, 1, 1000, 1, 1, 0, s, NULL, NULL));
    OK(cuEventRecord(e0, s));
    /* 1000 x 1000 threads x 4.0 (cost) = 4 ms; then 1 ms "fast" */
    OK(cuLaunchKernel(f, 1000, 1, 1, 1000, 1, 1, 0, s, NULL, NULL));
    CUlaunchConfig cfg = {1000, 1, 1, 1000, 1, 1, 0, s, NULL, 0};
    OK(cuLaunchKernelEx(&cfg, f2, NULL, NULL));
    OK(cuEventRecord_ptsz(e1, s));
    EXPECT(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    EXPECT(cuEventQuery(e1), CUDA_ERROR_NOT_READY);
    OK(cuEventSynchronize(e1));
    OK(cuEventQuery(e1));
    OK(cuStreamQuery_ptsz(s));
    OK(cuEventElapsedTime_v2(&ms, e0, e1));
    TRUE(ms > 4.999f && ms < 5.001f);
    printf("elapsed_ms %.4f\n", (double)ms);
    OK(cuLaunchCooperativeKernel(f2, 10, 1, 1, 32, 1, 1, 0, NULL, NULL));
    OK(cuLaunchKernel_ptsz(f2, 10, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
    OK(cuStreamSynchronize(NULL));
    OK(cuStreamSynchronize_ptsz(TGS_CU_STREAM_LEGACY));
    EXPECT(cuLaunchKernel(f2, 0, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuLaunchKernel(f2, 1, 1, 1, 2048, 1, 1, 0, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuLaunchKernel((CUfunction)(uintptr_t)0x42, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL),
           CUDA_ERROR_INVALID_HANDLE);
    /* graphs */
    CUgraph g;
    CUgraphNode n1, n2, nodes[4];
    CUgraphExec ge;
    CUgraphNodeType t;
    size_t nn = 0;
    OK(cuGraphCreate(&g, 0));
    CUDA_KERNEL_NODE_PARAMS_v1 k1 = {f2, 500, 1, 1, 1000, 1, 1, 0, NULL, NULL};
    CUDA_KERNEL_NODE_PARAMS_v2 k2 = {f2, 1500, 1, 1, 1000, 1, 1, 0, NULL, NULL, NULL, NULL};
    OK(cuGraphAddKernelNode(&n1, g, NULL, 0, &k1));
    OK(cuGraphAddKernelNode_v2(&n2, g, &n1, 1, &k2));
    OK(cuGraphGetNodes(g, NULL, &nn));
    TRUE(nn == 2);
    nn = 4;
    OK(cuGraphGetNodes(g, nodes, &nn));
    TRUE(nn == 2 && nodes[0] == n1 && nodes[1] == n2 && nodes[2] == NULL);
    OK(cuGraphNodeGetType(n2, &t));
    TRUE(t == CU_GRAPH_NODE_TYPE_KERNEL);
    CUDA_KERNEL_NODE_PARAMS_v2 got;
    OK(cuGraphKernelNodeGetParams_v2(n2, &got));
    TRUE(got.gridDimX == 1500 && got.func == f2);
    CUDA_KERNEL_NODE_PARAMS_v1 got1;
    OK(cuGraphKernelNodeGetParams(n1, &got1));
    TRUE(got1.gridDimX == 500);
    OK(cuGraphInstantiateWithFlags(&ge, g, 0));
    OK(cuLaunchKernel(f2, 30000, 1, 1, 1000, 1, 1, 0, s, NULL, NULL));
    OK(cuEventRecord(e0, s));
    OK(cuGraphLaunch(ge, s));
    OK(cuGraphLaunch_ptsz(ge, s));
    OK(cuEventRecord(e1, s));
    OK(cuStreamSynchronize(s));
    OK(cuEventElapsedTime(&ms, e0, e1));
    TRUE(ms > 3.999f && ms < 4.001f); /* 2 x (0.5 + 1.5) ms */
    CUgraphExec ge2, ge3;
    OK(cuGraphInstantiate_v2(&ge2, g, NULL, NULL, 0));
    OK(cuGraphInstantiate(&ge3, g, NULL, NULL, 0));
    OK(cuGraphExecDestroy(ge2));
    OK(cuGraphExecDestroy(ge3));
    OK(cuGraphExecDestroy(ge));
    OK(cuGraphDestroy(g));
    EXPECT(cuGraphLaunch(ge, s), CUDA_ERROR_INVALID_VALUE);
    OK(cuEventDestroy_v2(e0));
    OK(cuEventDestroy(e1));
    EXPECT(cuEventQuery(e1), CUDA_ERROR_INVALID_HANDLE);
    OK(cuStreamDestroy(s));
    EXPECT(cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
    OK(cuModuleUnload(mod));
    EXPECT(cuModuleGetFunction(&f, mod, "x"), CUDA_ERROR_INVALID_HANDLE);
}

int main(void)
{
    before_init();
    OK(cuInit(0));
    devices();
    contexts();
    memory();
    vmm_arrays();
    work();
    OK(cuDevicePrimaryCtxRelease_v2(0));
    OK(cuDevicePrimaryCtxReset_v2(0));
    printf("ok %d/%d\n", checks - fails, checks);
    return fails ? 1 : 0;
}
