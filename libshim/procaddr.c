/*
 * libshim/procaddr.c: cuGetProcAddress and cuGetProcAddress_v2.  The real
 * driver picks the ABI variant for (symbol, cudaVersion, flags); we then
 * swap in the hook of exactly that variant, found by comparing the returned
 * pointer with the real addresses of the hooked symbols.  Status codes,
 * symbolStatus and every unhooked pointer pass through untouched.  Works
 * before cuInit (cudart resolves ~440 entry points that way).
 */
#include "shim.h"

TGS_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                     cuuint64_t flags)
{
    TGS_HIT(cuGetProcAddress);
    tgs_ensure_init();
    if (!tgs_g.real.cuGetProcAddress)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = tgs_g.real.cuGetProcAddress(symbol, pfn, cudaVersion, flags);
    if (r == CUDA_SUCCESS && pfn && *pfn) {
        void *hook = tgs_hook_for_real(*pfn);
        if (hook)
            *pfn = hook;
    }
    return r;
}

TGS_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                        cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)
{
    TGS_HIT(cuGetProcAddress_v2);
    tgs_ensure_init();
    if (!tgs_g.real.cuGetProcAddress_v2)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = tgs_g.real.cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, symbolStatus);
    if (r == CUDA_SUCCESS && pfn && *pfn) {
        void *hook = tgs_hook_for_real(*pfn);
        if (hook)
            *pfn = hook;
    }
    return r;
}
