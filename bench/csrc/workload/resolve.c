/*
 * Driver resolution, three ways, like the programs TGS must cope with:
 *   proc  - dlopen + cuGetProcAddress(_v2) by BASE name (cudart, PyTorch);
 *   dlsym - dlopen + dlsym of the exported versioned names (older tools);
 *   link  - linked against libcuda (this binary built with TGS_WORKLOAD_LINKED).
 */
#include <dlfcn.h>
#include <limits.h>
#include <stddef.h>
#include <string.h>

#include "workload.h"

#ifdef TGS_WORKLOAD_LINKED
#define WL_ADDR(sym) ((void *)(sym))
#else
#define WL_ADDR(sym) NULL
#endif

/* One way to fill a slot: the variant chosen for cudaVersion in [vmin, vmax). */
struct wl_entry {
    size_t offset;          /* offsetof(struct wl_driver, slot) */
    const char *base;       /* name given to cuGetProcAddress */
    const char *sym;        /* exported name, legacy default stream */
    const char *sym_pt;     /* exported name, per-thread default stream */
    void *addr;             /* linked address (link mode) */
    void *addr_pt;
    int vmin, vmax;
    int required;           /* every run needs it */
};

/* Indirect, so that WL_ANY expands into two arguments first. */
#define WL_E(...) WL_E_(__VA_ARGS__)
#define WL_E_(slot, base, sym, sym_pt, vmin, vmax, req) \
    { offsetof(struct wl_driver, slot), #base, #sym, #sym_pt, WL_ADDR(sym), WL_ADDR(sym_pt), \
      vmin, vmax, req }
#define WL_ANY 0, INT_MAX

/* Versions as in cudaTypedefs.h (PFN_<name>_v<version>). */
static const struct wl_entry wl_entries[] = {
    WL_E(init, cuInit, cuInit, cuInit, WL_ANY, 1),
    WL_E(driver_get_version, cuDriverGetVersion, cuDriverGetVersion, cuDriverGetVersion,
         WL_ANY, 1),
    WL_E(device_get, cuDeviceGet, cuDeviceGet, cuDeviceGet, WL_ANY, 1),
    WL_E(device_get_count, cuDeviceGetCount, cuDeviceGetCount, cuDeviceGetCount, WL_ANY, 1),
    WL_E(device_get_name, cuDeviceGetName, cuDeviceGetName, cuDeviceGetName, WL_ANY, 1),
    WL_E(device_get_attribute, cuDeviceGetAttribute, cuDeviceGetAttribute, cuDeviceGetAttribute,
         WL_ANY, 1),
    WL_E(device_total_mem, cuDeviceTotalMem, cuDeviceTotalMem_v2, cuDeviceTotalMem_v2, WL_ANY, 1),
    WL_E(primary_ctx_retain, cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain,
         cuDevicePrimaryCtxRetain, WL_ANY, 1),
    WL_E(primary_ctx_release, cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease,
         cuDevicePrimaryCtxRelease, 0, 11000, 1),
    WL_E(primary_ctx_release, cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2,
         cuDevicePrimaryCtxRelease_v2, 11000, INT_MAX, 1),
    WL_E(ctx_set_current, cuCtxSetCurrent, cuCtxSetCurrent, cuCtxSetCurrent, WL_ANY, 1),
    WL_E(ctx_synchronize, cuCtxSynchronize, cuCtxSynchronize, cuCtxSynchronize, 0, 13000, 1),
    WL_E(ctx_synchronize_v2, cuCtxSynchronize, cuCtxSynchronize_v2, cuCtxSynchronize_v2,
         13000, INT_MAX, 1),
    WL_E(stream_create_with_priority, cuStreamCreateWithPriority, cuStreamCreateWithPriority,
         cuStreamCreateWithPriority, WL_ANY, 0),
    WL_E(stream_destroy, cuStreamDestroy, cuStreamDestroy_v2, cuStreamDestroy_v2, WL_ANY, 0),
    WL_E(stream_synchronize, cuStreamSynchronize, cuStreamSynchronize, cuStreamSynchronize_ptsz,
         WL_ANY, 0),
    WL_E(event_create, cuEventCreate, cuEventCreate, cuEventCreate, WL_ANY, 0),
    WL_E(event_record, cuEventRecord, cuEventRecord, cuEventRecord_ptsz, WL_ANY, 0),
    WL_E(event_synchronize, cuEventSynchronize, cuEventSynchronize, cuEventSynchronize,
         WL_ANY, 0),
    WL_E(event_destroy, cuEventDestroy, cuEventDestroy_v2, cuEventDestroy_v2, WL_ANY, 0),
    WL_E(module_load_data, cuModuleLoadData, cuModuleLoadData, cuModuleLoadData, WL_ANY, 1),
    WL_E(module_get_function, cuModuleGetFunction, cuModuleGetFunction, cuModuleGetFunction,
         WL_ANY, 1),
    WL_E(module_unload, cuModuleUnload, cuModuleUnload, cuModuleUnload, WL_ANY, 1),
    WL_E(mem_alloc, cuMemAlloc, cuMemAlloc_v2, cuMemAlloc_v2, WL_ANY, 1),
    WL_E(mem_alloc_managed, cuMemAllocManaged, cuMemAllocManaged, cuMemAllocManaged, WL_ANY, 0),
    WL_E(mem_advise, cuMemAdvise, cuMemAdvise, cuMemAdvise, 0, 12020, 0),
    WL_E(mem_advise_v2, cuMemAdvise, cuMemAdvise_v2, cuMemAdvise_v2, 12020, INT_MAX, 0),
    WL_E(mem_free, cuMemFree, cuMemFree_v2, cuMemFree_v2, WL_ANY, 1),
    WL_E(mem_get_info, cuMemGetInfo, cuMemGetInfo_v2, cuMemGetInfo_v2, WL_ANY, 1),
    WL_E(memset_d8, cuMemsetD8, cuMemsetD8_v2, cuMemsetD8_v2_ptds, WL_ANY, 1),
    WL_E(memcpy_htod, cuMemcpyHtoD, cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds, WL_ANY, 1),
    WL_E(memcpy_dtoh, cuMemcpyDtoH, cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds, WL_ANY, 1),
    WL_E(launch_kernel, cuLaunchKernel, cuLaunchKernel, cuLaunchKernel_ptsz, WL_ANY, 0),
    WL_E(launch_kernel_ex, cuLaunchKernelEx, cuLaunchKernelEx, cuLaunchKernelEx_ptsz, WL_ANY, 0),
    WL_E(launch_cooperative_kernel, cuLaunchCooperativeKernel, cuLaunchCooperativeKernel,
         cuLaunchCooperativeKernel_ptsz, WL_ANY, 0),
    WL_E(graph_create, cuGraphCreate, cuGraphCreate, cuGraphCreate, WL_ANY, 0),
    WL_E(graph_add_kernel_node, cuGraphAddKernelNode, cuGraphAddKernelNode, cuGraphAddKernelNode,
         0, 12000, 0),
    WL_E(graph_add_kernel_node_v2, cuGraphAddKernelNode, cuGraphAddKernelNode_v2,
         cuGraphAddKernelNode_v2, 12000, INT_MAX, 0),
    WL_E(graph_instantiate_with_flags, cuGraphInstantiateWithFlags, cuGraphInstantiateWithFlags,
         cuGraphInstantiateWithFlags, WL_ANY, 0),
    WL_E(graph_launch, cuGraphLaunch, cuGraphLaunch, cuGraphLaunch_ptsz, WL_ANY, 0),
    WL_E(graph_exec_destroy, cuGraphExecDestroy, cuGraphExecDestroy, cuGraphExecDestroy,
         WL_ANY, 0),
    WL_E(graph_destroy, cuGraphDestroy, cuGraphDestroy, cuGraphDestroy, WL_ANY, 0),
    WL_E(get_error_name, cuGetErrorName, cuGetErrorName, cuGetErrorName, WL_ANY, 0),
    WL_E(get_error_string, cuGetErrorString, cuGetErrorString, cuGetErrorString, WL_ANY, 0),
};

static void wl_store(struct wl_driver *drv, size_t offset, void *fn)
{
    memcpy((char *)drv + offset, &fn, sizeof fn);
}

#ifndef TGS_WORKLOAD_LINKED
/* Resolves one base name through the driver's own lookup. */
static void *wl_proc_lookup(const struct wl_driver *drv, tgs_pfn_cuGetProcAddress_v2 gpa2,
                            tgs_pfn_cuGetProcAddress gpa1, const struct wl_config *cfg,
                            const char *base)
{
    cuuint64_t flags = cfg->per_thread ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                                       : CU_GET_PROC_ADDRESS_DEFAULT;
    void *fn = NULL;
    CUresult rc;
    (void)drv;
    if (gpa2) {
        CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        rc = gpa2(base, &fn, cfg->cuda_version, flags, &status);
        if (status != CU_GET_PROC_ADDRESS_SUCCESS)
            fn = NULL;
    } else {
        rc = gpa1(base, &fn, cfg->cuda_version, flags);
    }
    return rc == CUDA_SUCCESS ? fn : NULL;
}
#endif

void wl_resolve_driver(struct wl_run *run, struct wl_driver *drv)
{
    const struct wl_config *cfg = &run->cfg;
    memset(drv, 0, sizeof *drv);
#ifdef TGS_WORKLOAD_LINKED
    if (cfg->resolve != WL_RESOLVE_LINK)
        wl_die(run, "this binary is linked against libcuda: use --resolve link "
                    "(or tgs-workload for proc/dlsym)");
#else
    if (cfg->resolve == WL_RESOLVE_LINK)
        wl_die(run, "--resolve link needs the linked binary tgs-workload-linked");
    drv->handle = dlopen("libcuda.so.1", RTLD_NOW);
    if (!drv->handle)
        wl_die(run, "cannot load the CUDA driver libcuda.so.1: %s", dlerror());
    tgs_pfn_cuGetProcAddress_v2 gpa2 = NULL;
    tgs_pfn_cuGetProcAddress gpa1 = NULL;
    if (cfg->resolve == WL_RESOLVE_PROC) {
        void *p = dlsym(drv->handle, "cuGetProcAddress_v2");
        drv->getproc_symbol = "cuGetProcAddress_v2";
        if (p) {
            memcpy(&gpa2, &p, sizeof p);
        } else {
            p = dlsym(drv->handle, "cuGetProcAddress");
            drv->getproc_symbol = "cuGetProcAddress";
            if (!p)
                wl_die(run, "libcuda.so.1 exports neither cuGetProcAddress_v2 nor "
                            "cuGetProcAddress: driver too old for --resolve proc");
            memcpy(&gpa1, &p, sizeof p);
        }
    }
#endif
    for (size_t i = 0; i < sizeof wl_entries / sizeof wl_entries[0]; i++) {
        const struct wl_entry *e = &wl_entries[i];
        if (cfg->cuda_version < e->vmin || cfg->cuda_version >= e->vmax)
            continue;
        const char *sym = cfg->per_thread ? e->sym_pt : e->sym;
        void *fn;
#ifdef TGS_WORKLOAD_LINKED
        fn = cfg->per_thread ? e->addr_pt : e->addr;
#else
        if (cfg->resolve == WL_RESOLVE_PROC)
            fn = wl_proc_lookup(drv, gpa2, gpa1, cfg, e->base);
        else
            fn = dlsym(drv->handle, sym);
#endif
        if (!fn && e->required)
            wl_die(run, "the driver does not provide %s (%s, cudaVersion %d)",
                   cfg->resolve == WL_RESOLVE_PROC ? e->base : sym,
                   wl_resolve_name(cfg->resolve), cfg->cuda_version);
        wl_store(drv, e->offset, fn);
    }
}

const char *wl_symbol_of(const void *fn)
{
    Dl_info info;
    if (!fn || !dladdr(fn, &info) || !info.dli_sname || info.dli_saddr != fn)
        return NULL;
    return info.dli_sname;
}
