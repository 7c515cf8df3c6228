/*
 * array.c: CUDA arrays and mipmapped arrays.  Their size counts against
 * device capacity: element size (format x channels) x extents, levels
 * summed.  An array keeps its bytes (lazily mapped, rows of width x element
 * bytes, no padding) for the array copies (array_copy.c); a mipmapped array
 * has none (its levels are not handed out).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "sim.h"

struct CUarray_st {
    struct sim_obj obj;
    int dev;
    uint64_t bytes;
    CUDA_ARRAY3D_DESCRIPTOR desc; /* as created (Height/Depth 0 for 1D/2D) */
    unsigned char *data;          /* bytes of an array, NULL for a mipmapped one */
};

struct CUmipmappedArray_st {
    struct sim_obj obj;
    int dev;
    uint64_t bytes;
    CUDA_ARRAY3D_DESCRIPTOR desc;
    unsigned char *data;
};

static unsigned int format_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT: return 4;
    default: return 0;
    }
}

static uint64_t ext(size_t x) { return x ? x : 1; }

/* Bytes of a 3D descriptor over `levels` mip levels; 0 when invalid. */
static uint64_t desc_bytes(size_t w, size_t h, size_t d, CUarray_format f, unsigned int ch,
                           unsigned int levels)
{
    unsigned int eb = format_bytes(f);
    if (!eb || (ch != 1 && ch != 2 && ch != 4) || !w || w > (1u << 20) || h > (1u << 20) ||
        d > (1u << 20) || !levels || levels > 32)
        return 0;
    double total = 0;
    for (unsigned int l = 0; l < levels; l++) {
        size_t lw = w >> l, lh = h >> l, ld = d >> l;
        total += (double)ext(lw) * (double)ext(lh) * (double)ext(ld);
        if (lw <= 1 && lh <= 1 && ld <= 1)
            break;
    }
    total *= (double)eb * ch;
    return total > 1.8e19 ? 0 : (uint64_t)total;
}

static CUresult make(void **out, uint32_t kind, uint64_t bytes,
                     const CUDA_ARRAY3D_DESCRIPTOR *desc)
{
    struct CUctx_st *ctx;
    CUresult r = sim_current_ctx(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    if (!out || !bytes)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUarray_st *a = calloc(1, sizeof *a);
    if (!a)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if ((r = sim_mem_account(ctx->dev, (int64_t)bytes, 0)) != CUDA_SUCCESS) {
        free(a);
        return r;
    }
    a->obj.kind = kind;
    a->dev = ctx->dev;
    a->bytes = bytes;
    a->desc = *desc;
    if (kind == SIM_K_ARRAY) {
        void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) {
            sim_mem_account(ctx->dev, -(int64_t)bytes, 0);
            free(a);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        a->data = p;
    }
    sim_handle_add(a);
    *out = a;
    return CUDA_SUCCESS;
}

static CUresult destroy(void *h, uint32_t kind)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_handle_ok(h, kind))
        return CUDA_ERROR_INVALID_HANDLE;
    struct CUarray_st *a = h; /* same layout for both kinds */
    sim_handle_del(a);
    if (a->data)
        munmap(a->data, a->bytes);
    sim_mem_account(a->dev, -(int64_t)a->bytes, 0);
    a->obj.kind = 0;
    free(a);
    return CUDA_SUCCESS;
}

CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray)
{
    if (!pHandle || !pAllocateArray)
        return sim_check_init() ? sim_check_init() : CUDA_ERROR_INVALID_VALUE;
    const CUDA_ARRAY_DESCRIPTOR *d = pAllocateArray;
    CUDA_ARRAY3D_DESCRIPTOR d3 = {d->Width, d->Height, 0, d->Format, d->NumChannels, 0};
    return make((void **)pHandle, SIM_K_ARRAY,
                desc_bytes(d->Width, d->Height, 0, d->Format, d->NumChannels, 1), &d3);
}

CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray)
{
    if (!pHandle || !pAllocateArray)
        return sim_check_init() ? sim_check_init() : CUDA_ERROR_INVALID_VALUE;
    const CUDA_ARRAY3D_DESCRIPTOR *d = pAllocateArray;
    return make((void **)pHandle, SIM_K_ARRAY,
                desc_bytes(d->Width, d->Height, d->Depth, d->Format, d->NumChannels, 1), d);
}

CUresult cuArrayDestroy(CUarray hArray) { return destroy(hArray, SIM_K_ARRAY); }

CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle,
                                const CUDA_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc,
                                unsigned int numMipmapLevels)
{
    if (!pHandle || !pMipmappedArrayDesc)
        return sim_check_init() ? sim_check_init() : CUDA_ERROR_INVALID_VALUE;
    const CUDA_ARRAY3D_DESCRIPTOR *d = pMipmappedArrayDesc;
    return make((void **)pHandle, SIM_K_MIPMAP,
                desc_bytes(d->Width, d->Height, d->Depth, d->Format, d->NumChannels,
                           numMipmapLevels),
                d);
}

CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
    return destroy(hMipmappedArray, SIM_K_MIPMAP);
}

int sim_array_layout(CUarray a, unsigned char **data, size_t *bytes, size_t *row,
                     size_t *height)
{
    if (!sim_handle_ok(a, SIM_K_ARRAY))
        return -1;
    *data = a->data;
    *bytes = a->bytes;
    *row = a->desc.Width * format_bytes(a->desc.Format) * a->desc.NumChannels;
    *height = a->desc.Height ? a->desc.Height : 1;
    return 0;
}

CUresult cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR *pArrayDescriptor, CUarray hArray)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!pArrayDescriptor)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_handle_ok(hArray, SIM_K_ARRAY))
        return CUDA_ERROR_INVALID_HANDLE;
    *pArrayDescriptor = hArray->desc;
    return CUDA_SUCCESS;
}

CUresult cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR *pArrayDescriptor, CUarray hArray)
{
    CUDA_ARRAY3D_DESCRIPTOR d;
    if (!pArrayDescriptor)
        return sim_check_init() ? sim_check_init() : CUDA_ERROR_INVALID_VALUE;
    CUresult r = cuArray3DGetDescriptor_v2(&d, hArray);
    if (r != CUDA_SUCCESS)
        return r;
    if (d.Depth) /* a 3D array has no 2D descriptor */
        return CUDA_ERROR_INVALID_HANDLE;
    *pArrayDescriptor = (CUDA_ARRAY_DESCRIPTOR){d.Width, d.Height, d.Format, d.NumChannels};
    return CUDA_SUCCESS;
}
