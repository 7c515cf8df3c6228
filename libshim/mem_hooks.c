/*
 * libshim/mem_hooks.c: every device allocation path and its free.  Each
 * allocation is admitted against the quota BEFORE the driver is called (so
 * concurrent processes never overshoot), undone if the driver fails, and
 * remembered so that its free returns exactly what it took.  Over quota the
 * call returns CUDA_ERROR_OUT_OF_MEMORY, the only code PyTorch's caching
 * allocator treats as "free the cache and retry".
 */
#include "shim.h"

#define REAL_OR_FAIL(name) \
    do { \
        tgs_ensure_init(); \
        if (TGS_UNLIKELY(!tgs_g.real.name)) \
            return tgs_g.real.handle ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_NOT_INITIALIZED; \
    } while (0)

/* admit -> call -> record or undo */
#define ALLOC_BODY(name, kind, keyexpr, bytes, call) \
    do { \
        TGS_HIT(name); \
        REAL_OR_FAIL(name); \
        uint64_t b_ = (bytes); \
        if (tgs_mem_admit(b_) != 0) { \
            tgs_log(TGS_LOG_INFO, #name ": %llu bytes refused by the memory quota", \
                    (unsigned long long)b_); \
            return CUDA_ERROR_OUT_OF_MEMORY; \
        } \
        CUresult r_ = tgs_g.real.name call; \
        if (r_ == CUDA_SUCCESS) \
            tgs_ptrmap_put(&tgs_g.ptrs, (kind), (uint64_t)(keyexpr), b_); \
        else \
            tgs_mem_release(b_); \
        return r_; \
    } while (0)

#define FREE_BODY(name, kind, key, call) \
    do { \
        TGS_HIT(name); \
        REAL_OR_FAIL(name); \
        CUresult r_ = tgs_g.real.name call; \
        uint64_t b_; \
        if (r_ == CUDA_SUCCESS && tgs_ptrmap_take(&tgs_g.ptrs, (kind), (uint64_t)(key), &b_)) \
            tgs_mem_release(b_); \
        return r_; \
    } while (0)

TGS_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    tgs_ensure_init();
    if (tgs_oversub_on()) { /* oversub.c: an opportunistic job's managed memory */
        TGS_HIT(cuMemAlloc_v2);
        return tgs_oversub_alloc(dptr, bytesize);
    }
    ALLOC_BODY(cuMemAlloc_v2, TGS_KIND_DPTR, *dptr, bytesize, (dptr, bytesize));
}

TGS_EXPORT CUresult cuMemAlloc(unsigned int *dptr, unsigned int bytesize)
{
    CUresult r;
    tgs_ensure_init();
    if (tgs_g.real.cuMemAlloc && tgs_oversub_on() && tgs_oversub_alloc32(dptr, bytesize, &r)) {
        TGS_HIT(cuMemAlloc);
        return r;
    }
    ALLOC_BODY(cuMemAlloc, TGS_KIND_DPTR, *dptr, bytesize, (dptr, bytesize));
}

TGS_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    ALLOC_BODY(cuMemAllocManaged, TGS_KIND_DPTR, *dptr, bytesize, (dptr, bytesize, flags));
}

TGS_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    tgs_ensure_init();
    /* oversub.c: managed memory, freed after its stream's work (not into a capture: there
     * it is a graph's allocation node) */
    if (tgs_oversub_on() && !tgs_capture_any()) {
        TGS_HIT(cuMemAllocAsync);
        return tgs_oversub_alloc_async(dptr, bytesize, hStream);
    }
    ALLOC_BODY(cuMemAllocAsync, TGS_KIND_DPTR, *dptr, bytesize, (dptr, bytesize, hStream));
}

TGS_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    tgs_ensure_init();
    if (tgs_oversub_on() && !tgs_capture_any()) {
        TGS_HIT(cuMemAllocAsync_ptsz);
        return tgs_oversub_alloc_async(dptr, bytesize, hStream);
    }
    ALLOC_BODY(cuMemAllocAsync_ptsz, TGS_KIND_DPTR, *dptr, bytesize, (dptr, bytesize, hStream));
}

TGS_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                            CUstream hStream)
{
    ALLOC_BODY(cuMemAllocFromPoolAsync, TGS_KIND_DPTR, *dptr, bytesize,
               (dptr, bytesize, pool, hStream));
}

TGS_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                                 CUmemoryPool pool, CUstream hStream)
{
    ALLOC_BODY(cuMemAllocFromPoolAsync_ptsz, TGS_KIND_DPTR, *dptr, bytesize,
               (dptr, bytesize, pool, hStream));
}

TGS_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                                const CUmemAllocationProp *prop, unsigned long long flags)
{
    /* only device-resident physical memory counts against the GPU quota */
    int device = prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE;
    ALLOC_BODY(cuMemCreate, TGS_KIND_HANDLE, *handle, device ? size : 0,
               (handle, size, prop, flags));
}

/* Pitch: the driver picks the pitch, so reserve an upper bound (width rounded
 * up to 1 KiB, above any pitch alignment a GPU reports) then settle. */
static uint64_t pitch_bound(uint64_t width, uint64_t height)
{
    uint64_t w = (width + 1023) & ~(uint64_t)1023;
    if (w < width || (height && w > UINT64_MAX / height))
        return UINT64_MAX;
    return w * height;
}

/* After the driver answered: give the reservation back, or settle it to the
 * bytes the driver's pitch really took and remember the pointer. */
static CUresult pitch_settle(CUresult r, uint64_t reserve, uint64_t dptr, uint64_t actual)
{
    if (r != CUDA_SUCCESS) {
        tgs_mem_release(reserve);
        return r;
    }
    tgs_mem_adjust(reserve, actual);
    tgs_ptrmap_put(&tgs_g.ptrs, TGS_KIND_DPTR, dptr, actual);
    return r;
}

TGS_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                       size_t Height, unsigned int ElementSizeBytes)
{
    TGS_HIT(cuMemAllocPitch_v2);
    REAL_OR_FAIL(cuMemAllocPitch_v2);
    if (tgs_oversub_on())
        return tgs_oversub_alloc_pitch(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    uint64_t reserve = pitch_bound(WidthInBytes, Height);
    if (tgs_mem_admit(reserve) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = tgs_g.real.cuMemAllocPitch_v2(dptr, pPitch, WidthInBytes, Height,
                                                ElementSizeBytes);
    return pitch_settle(r, reserve, r == CUDA_SUCCESS ? *dptr : 0,
                        r == CUDA_SUCCESS ? (uint64_t)*pPitch * Height : 0);
}

TGS_EXPORT CUresult cuMemAllocPitch(unsigned int *dptr, unsigned int *pPitch,
                                    unsigned int WidthInBytes, unsigned int Height,
                                    unsigned int ElementSizeBytes)
{
    TGS_HIT(cuMemAllocPitch);
    REAL_OR_FAIL(cuMemAllocPitch);
    if (tgs_oversub_on() && pPitch && WidthInBytes && Height &&
        (ElementSizeBytes == 4 || ElementSizeBytes == 8 || ElementSizeBytes == 16)) {
        uint64_t p = ((uint64_t)WidthInBytes + 511) & ~(uint64_t)511; /* as the v2's */
        CUresult r;
        if (p <= 0xffffffffull && tgs_oversub_alloc32(dptr, p * Height, &r)) {
            if (r == CUDA_SUCCESS)
                *pPitch = (unsigned int)p;
            return r;
        }
    }
    uint64_t reserve = pitch_bound(WidthInBytes, Height);
    if (tgs_mem_admit(reserve) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = tgs_g.real.cuMemAllocPitch(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    return pitch_settle(r, reserve, r == CUDA_SUCCESS ? *dptr : 0,
                        r == CUDA_SUCCESS ? (uint64_t)*pPitch * Height : 0);
}

/* Arrays: bytes per element from the format, times the extent.  Formats we do
 * not know (compressed, YUV) are charged 4 bytes per channel element, an
 * over-estimate for all of them. */
static uint64_t format_bytes(CUarray_format f)
{
    switch ((int)f) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF: return 2;
    default: return 4;
    }
}

static uint64_t mul_sat(uint64_t a, uint64_t b)
{
    return (a && b > UINT64_MAX / a) ? UINT64_MAX : a * b;
}

static uint64_t extent_bytes(uint64_t w, uint64_t h, uint64_t d, CUarray_format f, unsigned ch)
{
    uint64_t e = mul_sat(format_bytes(f), ch ? ch : 1);
    return mul_sat(mul_sat(mul_sat(e, w ? w : 1), h ? h : 1), d ? d : 1);
}

static uint64_t array3d_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    return d ? extent_bytes(d->Width, d->Height, d->Depth, d->Format, d->NumChannels) : 0;
}

static uint64_t mipmap_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels)
{
    if (!d)
        return 0;
    uint64_t w = d->Width, h = d->Height, z = d->Depth, sum = 0;
    /* layered arrays keep their layer count (depth) at every level */
    int layered = (d->Flags & 0x01) != 0;
    for (unsigned l = 0; l < (levels ? levels : 1); l++) {
        uint64_t b = extent_bytes(w, h, z, d->Format, d->NumChannels);
        sum = sum + b < sum ? UINT64_MAX : sum + b;
        w = w > 1 ? w / 2 : 1;
        h = h > 1 ? h / 2 : h;
        if (!layered)
            z = z > 1 ? z / 2 : z;
    }
    return sum;
}

TGS_EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray)
{
    const CUDA_ARRAY_DESCRIPTOR *d = pAllocateArray;
    ALLOC_BODY(cuArrayCreate_v2, TGS_KIND_ARRAY, (uintptr_t)*pHandle,
               d ? extent_bytes(d->Width, d->Height, 1, d->Format, d->NumChannels) : 0,
               (pHandle, pAllocateArray));
}

TGS_EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle,
                                       const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray)
{
    ALLOC_BODY(cuArray3DCreate_v2, TGS_KIND_ARRAY, (uintptr_t)*pHandle,
               array3d_bytes(pAllocateArray), (pHandle, pAllocateArray));
}

TGS_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle,
                                           const CUDA_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc,
                                           unsigned int numMipmapLevels)
{
    ALLOC_BODY(cuMipmappedArrayCreate, TGS_KIND_MIPMAP, (uintptr_t)*pHandle,
               mipmap_bytes(pMipmappedArrayDesc, numMipmapLevels),
               (pHandle, pMipmappedArrayDesc, numMipmapLevels));
}

TGS_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    tgs_oversub_forget(dptr); /* no prefetch of it from now on (oversub_watch.c) */
    FREE_BODY(cuMemFree_v2, TGS_KIND_DPTR, dptr, (dptr));
}

TGS_EXPORT CUresult cuMemFree(unsigned int dptr)
{
    FREE_BODY(cuMemFree, TGS_KIND_DPTR, dptr, (dptr));
}

TGS_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    CUresult r;
    tgs_ensure_init();
    if (tgs_oversub_free_async(dptr, hStream, 0, &r)) {
        TGS_HIT(cuMemFreeAsync);
        return r;
    }
    FREE_BODY(cuMemFreeAsync, TGS_KIND_DPTR, dptr, (dptr, hStream));
}

TGS_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    CUresult r;
    tgs_ensure_init();
    if (tgs_oversub_free_async(dptr, hStream, 1, &r)) {
        TGS_HIT(cuMemFreeAsync_ptsz);
        return r;
    }
    FREE_BODY(cuMemFreeAsync_ptsz, TGS_KIND_DPTR, dptr, (dptr, hStream));
}

TGS_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    FREE_BODY(cuMemRelease, TGS_KIND_HANDLE, handle, (handle));
}

TGS_EXPORT CUresult cuArrayDestroy(CUarray hArray)
{
    FREE_BODY(cuArrayDestroy, TGS_KIND_ARRAY, (uintptr_t)hArray, (hArray));
}

TGS_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
    FREE_BODY(cuMipmappedArrayDestroy, TGS_KIND_MIPMAP, (uintptr_t)hMipmappedArray,
              (hMipmappedArray));
}
