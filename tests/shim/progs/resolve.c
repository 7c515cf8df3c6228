/*
 * resolve.c: the resolution matrix probe.  For every hooked symbol (the
 * shim's own list, TGS_HOOKED) it prints where each lookup path lands:
 *   link  - the address the dynamic linker bound for a direct reference
 *   dlsym - dlsym on a dlopen("libcuda.so.1") handle, and on RTLD_DEFAULT
 *   proc / proc2 - cuGetProcAddress / _v2 on the base name, for several
 *           cudaVersions and both default and per-thread flags
 * as "method|name|version|flags|rc|status|library|symbol" (dladdr).  The test
 * runs it with and without the shim and compares.
 */
#include <dlfcn.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>

#include "shim.h"

#define STR_(x) #x
#define WEAK(name) _Pragma(STR_(weak name))
TGS_HOOKED(WEAK)

static void where(const char *method, const char *name, int ver, unsigned long long flags, int rc,
                  int status, void *p)
{
    Dl_info di;
    const char *lib = "-", *sym = "-";
    char buf[4096];
    if (p && dladdr(p, &di)) {
        snprintf(buf, sizeof buf, "%s", di.dli_fname ? di.dli_fname : "?");
        lib = basename(buf);
        sym = di.dli_sname ? di.dli_sname : "?";
    }
    printf("%s|%s|%d|%llu|%d|%d|%s|%s\n", method, name, ver, flags, rc, status, lib, sym);
}

static const char *bases[] = {
    "cuGetProcAddress", "cuMemAlloc", "cuMemAllocPitch", "cuMemAllocManaged", "cuMemAllocAsync",
    "cuMemAllocFromPoolAsync", "cuMemCreate", "cuMemRelease", "cuArrayCreate", "cuArray3DCreate",
    "cuMipmappedArrayCreate", "cuMemFree", "cuMemFreeAsync", "cuArrayDestroy",
    "cuMipmappedArrayDestroy", "cuMemGetInfo", "cuDeviceTotalMem", "cuLaunchKernel",
    "cuLaunchKernelEx", "cuLaunchCooperativeKernel", "cuGraphLaunch", "cuGraphInstantiate",
    "cuGraphInstantiateWithFlags", "cuGraphInstantiateWithParams", "cuGraphExecDestroy",
    "cuCtxSynchronize", "cuStreamSynchronize", "cuStreamQuery", "cuEventQuery",
    "cuEventSynchronize", "cuEventRecord",
    /* not hooked: must pass through untouched */
    "cuInit", "cuCtxCreate", "cuMemcpyHtoD", "cuStreamCreate", "cuNoSuchFunction",
};

int main(void)
{
#define LINKED(name) where("link", #name, 0, 0, 0, 0, (void *)&name);
    TGS_HOOKED(LINKED)
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) {
        printf("error|dlopen|%s\n", dlerror());
        return 1;
    }
#define DLSYMED(name) \
    where("dlsym", #name, 0, 0, 0, 0, dlsym(h, #name)); \
    where("default", #name, 0, 0, 0, 0, dlsym(RTLD_DEFAULT, #name));
    TGS_HOOKED(DLSYMED)
    tgs_pfn_cuGetProcAddress gpa = (tgs_pfn_cuGetProcAddress)dlsym(h, "cuGetProcAddress");
    tgs_pfn_cuGetProcAddress_v2 gpa2 = (tgs_pfn_cuGetProcAddress_v2)dlsym(h, "cuGetProcAddress_v2");
    static const int versions[] = { 11030, 12000, 12080, 13000 };
    static const unsigned long long flagset[] = { CU_GET_PROC_ADDRESS_DEFAULT,
                                                  CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM };
    for (size_t b = 0; b < sizeof bases / sizeof bases[0]; b++)
        for (size_t v = 0; v < 4; v++)
            for (size_t f = 0; f < 2; f++) {
                void *p = NULL;
                int rc = gpa ? (int)gpa(bases[b], &p, versions[v], flagset[f]) : -1;
                where("proc", bases[b], versions[v], flagset[f], rc, -1, rc == 0 ? p : NULL);
                CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)-1;
                p = NULL;
                rc = gpa2 ? (int)gpa2(bases[b], &p, versions[v], flagset[f], &st) : -1;
                where("proc2", bases[b], versions[v], flagset[f], rc, (int)st, rc == 0 ? p : NULL);
            }
    return 0;
}
