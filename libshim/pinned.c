/*
 * libshim/pinned.c: page-locked host memory (cuMemAllocHost_v2, cuMemHostAlloc,
 * cuMemHostRegister_v2 and their frees) against the job's host_pinned_max
 * (segment.h; 0 = no limit), counted in the job ledger's pinned_used.  Like
 * device memory: admitted before the driver is called, undone if the driver
 * fails, refused with CUDA_ERROR_OUT_OF_MEMORY, and a free returns exactly
 * what its allocation took.  Page-locked memory cannot be paged out: on a host
 * shared by jobs it is the host memory an operator must bound.
 */
#include "shim.h"

#define REAL_OR_FAIL(name) \
    do { \
        TGS_HIT(name); \
        if (TGS_UNLIKELY(!tgs_g.real.name)) \
            return tgs_g.real.handle ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_NOT_INITIALIZED; \
    } while (0)

static CUresult admitted(CUresult r, void *p, uint64_t bytes)
{
    if (r == CUDA_SUCCESS)
        tgs_ptrmap_put(&tgs_g.ptrs, TGS_KIND_PINNED, (uint64_t)(uintptr_t)p, bytes);
    else
        tgs_pinned_release(bytes);
    return r;
}

static CUresult released(CUresult r, void *p)
{
    uint64_t b;
    if (r == CUDA_SUCCESS && tgs_ptrmap_take(&tgs_g.ptrs, TGS_KIND_PINNED, (uint64_t)(uintptr_t)p,
                                             &b))
        tgs_pinned_release(b);
    return r;
}

TGS_EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    REAL_OR_FAIL(cuMemAllocHost_v2);
    if (pp && bytesize && tgs_pinned_admit(bytesize) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = tgs_g.real.cuMemAllocHost_v2(pp, bytesize);
    return pp && bytesize ? admitted(r, r == CUDA_SUCCESS ? *pp : NULL, bytesize) : r;
}

TGS_EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    REAL_OR_FAIL(cuMemHostAlloc);
    if (pp && bytesize && tgs_pinned_admit(bytesize) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = tgs_g.real.cuMemHostAlloc(pp, bytesize, Flags);
    return pp && bytesize ? admitted(r, r == CUDA_SUCCESS ? *pp : NULL, bytesize) : r;
}

TGS_EXPORT CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    REAL_OR_FAIL(cuMemHostRegister_v2);
    if (p && bytesize && tgs_pinned_admit(bytesize) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = tgs_g.real.cuMemHostRegister_v2(p, bytesize, Flags);
    return p && bytesize ? admitted(r, p, bytesize) : r;
}

TGS_EXPORT CUresult cuMemFreeHost(void *p)
{
    REAL_OR_FAIL(cuMemFreeHost);
    return released(tgs_g.real.cuMemFreeHost(p), p);
}

TGS_EXPORT CUresult cuMemHostUnregister(void *p)
{
    REAL_OR_FAIL(cuMemHostUnregister);
    return released(tgs_g.real.cuMemHostUnregister(p), p);
}
