/*
 * libshim/procaddr.c: cuGetProcAddress and cuGetProcAddress_v2.  The real
 * driver picks the ABI variant for (symbol, cudaVersion, flags); we then
 * swap in the hook of exactly that variant, found by comparing the returned
 * pointer with the real addresses of the hooked symbols.  Status codes,
 * symbolStatus and every unhooked pointer pass through untouched.  Works
 * before cuInit (cudart resolves ~440 entry points that way).
 */
#include <dlfcn.h>

#include "shim.h"

/* TGS_LOG_LEVEL=debug: one line per lookup, naming the variant the driver
 * chose and whether its hook was substituted (tests read these). */
static void log_lookup(const char *api, const char *symbol, int ver, cuuint64_t flags,
                       void *real_fn, void *hook)
{
    if (tgs_g.opt.log_level < TGS_LOG_DEBUG)
        return;
    Dl_info di;
    const char *variant = real_fn && dladdr(real_fn, &di) && di.dli_sname ? di.dli_sname : "?";
    tgs_log(TGS_LOG_DEBUG, "%s %s %d %llu -> %s %s", api, symbol ? symbol : "(null)", ver,
            (unsigned long long)flags, hook ? "hook" : "pass", variant);
}

TGS_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                     cuuint64_t flags)
{
    TGS_HIT(cuGetProcAddress);
    if (!tgs_g.real.cuGetProcAddress)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = tgs_g.real.cuGetProcAddress(symbol, pfn, cudaVersion, flags);
    if (r == CUDA_SUCCESS && pfn && *pfn) {
        void *hook = tgs_hook_for_real(*pfn);
        log_lookup("cuGetProcAddress", symbol, cudaVersion, flags, *pfn, hook);
        if (hook)
            *pfn = hook;
    }
    return r;
}

TGS_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                        cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)
{
    TGS_HIT(cuGetProcAddress_v2);
    if (!tgs_g.real.cuGetProcAddress_v2)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = tgs_g.real.cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, symbolStatus);
    if (r == CUDA_SUCCESS && pfn && *pfn) {
        void *hook = tgs_hook_for_real(*pfn);
        log_lookup("cuGetProcAddress_v2", symbol, cudaVersion, flags, *pfn, hook);
        if (hook)
            *pfn = hook;
    }
    return r;
}
