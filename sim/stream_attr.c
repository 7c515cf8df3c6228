/*
 * stream_attr.c: stream attributes, the stream's device, and stream memory
 * operations.  Of the launch attributes a stream can carry, PRIORITY is the
 * stream's priority; the others are kept as set and read back (the time
 * model does not use them).  cuStreamWriteValue writes at once, like every
 * other device write here.
 */
#include <string.h>

#include "sim.h"

#define NATTR 16 /* sizeof CUstream_st.attrs */

static CUresult resolve(CUstream s, struct CUctx_st **ctx, struct CUstream_st **obj)
{
    return sim_stream_resolve(s, ctx, obj);
}

CUresult cuStreamGetDevice(CUstream hStream, CUdevice *device)
{
    struct CUctx_st *ctx;
    struct CUstream_st *obj;
    CUresult r = resolve(hStream, &ctx, &obj);
    if (r != CUDA_SUCCESS)
        return r;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    *device = ctx->dev;
    return CUDA_SUCCESS;
}
CUresult cuStreamGetDevice_ptsz(CUstream hStream, CUdevice *device)
{
    return cuStreamGetDevice(hStream, device);
}

CUresult cuStreamGetAttribute(CUstream hStream, CUstreamAttrID attr, CUstreamAttrValue *value)
{
    struct CUctx_st *ctx;
    struct CUstream_st *obj;
    CUresult r = resolve(hStream, &ctx, &obj);
    if (r != CUDA_SUCCESS)
        return r;
    if (!value || (int)attr <= 0 || (int)attr >= NATTR)
        return CUDA_ERROR_INVALID_VALUE;
    memset(value, 0, sizeof *value);
    if (attr == CU_LAUNCH_ATTRIBUTE_PRIORITY)
        value->priority = obj ? obj->priority : 0;
    else if (obj && obj->attrs_set & (1u << attr))
        memcpy(value, &obj->attrs[attr], sizeof *value);
    return CUDA_SUCCESS;
}
CUresult cuStreamGetAttribute_ptsz(CUstream hStream, CUstreamAttrID attr,
                                   CUstreamAttrValue *value)
{
    return cuStreamGetAttribute(hStream, attr, value);
}

CUresult cuStreamSetAttribute(CUstream hStream, CUstreamAttrID attr,
                              const CUstreamAttrValue *param)
{
    struct CUctx_st *ctx;
    struct CUstream_st *obj;
    CUresult r = resolve(hStream, &ctx, &obj);
    if (r != CUDA_SUCCESS)
        return r;
    if (!param || (int)attr <= 0 || (int)attr >= NATTR || !obj)
        return CUDA_ERROR_INVALID_VALUE; /* the default streams have fixed attributes */
    if (attr == CU_LAUNCH_ATTRIBUTE_PRIORITY) {
        int p = param->priority; /* clamped to the range, as the driver does */
        obj->priority = p > 0 ? 0 : p < -5 ? -5 : p;
        return CUDA_SUCCESS;
    }
    memcpy(&obj->attrs[attr], param, sizeof *param);
    obj->attrs_set |= 1u << attr;
    return CUDA_SUCCESS;
}
CUresult cuStreamSetAttribute_ptsz(CUstream hStream, CUstreamAttrID attr,
                                   const CUstreamAttrValue *param)
{
    return cuStreamSetAttribute(hStream, attr, param);
}

CUresult cuStreamCopyAttributes(CUstream dstStream, CUstream srcStream)
{
    struct CUctx_st *c1, *c2;
    struct CUstream_st *dst, *src;
    CUresult r = resolve(dstStream, &c1, &dst);
    if (r == CUDA_SUCCESS)
        r = resolve(srcStream, &c2, &src);
    if (r != CUDA_SUCCESS)
        return r;
    if (!dst)
        return CUDA_ERROR_INVALID_VALUE;
    if (src) {
        memcpy(dst->attrs, src->attrs, sizeof dst->attrs);
        dst->attrs_set = src->attrs_set;
        dst->priority = src->priority;
    } else {
        dst->attrs_set = 0;
    }
    return CUDA_SUCCESS;
}
CUresult cuStreamCopyAttributes_ptsz(CUstream dstStream, CUstream srcStream)
{
    return cuStreamCopyAttributes(dstStream, srcStream);
}

static CUresult write_value(CUstream s, CUdeviceptr addr, uint64_t v, size_t n,
                            unsigned int flags)
{
    struct CUctx_st *ctx;
    struct CUstream_st *obj;
    CUresult r = resolve(s, &ctx, &obj);
    if (r != CUDA_SUCCESS)
        return r;
    if (flags > 1 || addr % n || !sim_mem_range_ok(addr, n))
        return CUDA_ERROR_INVALID_VALUE;
    if (n == 4) {
        uint32_t w = (uint32_t)v;
        __atomic_store_n((uint32_t *)(uintptr_t)addr, w, __ATOMIC_RELEASE);
    } else {
        __atomic_store_n((uint64_t *)(uintptr_t)addr, v, __ATOMIC_RELEASE);
    }
    return CUDA_SUCCESS;
}

#define WRITE(name, T, n)                                                                  \
    CUresult name(CUstream stream, CUdeviceptr addr, T value, unsigned int flags)          \
    {                                                                                      \
        return write_value(stream, addr, value, n, flags);                                 \
    }
WRITE(cuStreamWriteValue32, cuuint32_t, 4)
WRITE(cuStreamWriteValue32_ptsz, cuuint32_t, 4)
WRITE(cuStreamWriteValue32_v2, cuuint32_t, 4)
WRITE(cuStreamWriteValue32_v2_ptsz, cuuint32_t, 4)
WRITE(cuStreamWriteValue64, cuuint64_t, 8)
WRITE(cuStreamWriteValue64_ptsz, cuuint64_t, 8)
WRITE(cuStreamWriteValue64_v2, cuuint64_t, 8)
WRITE(cuStreamWriteValue64_v2_ptsz, cuuint64_t, 8)

/* CUDA 12.5: the context, or the green context the stream belongs to
 * (green contexts are not modelled: always a plain context). */
CUresult cuStreamGetCtx_v2(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx)
{
    if (!pCtx || !pGreenCtx)
        return sim_check_init() ? sim_check_init() : CUDA_ERROR_INVALID_VALUE;
    CUresult r = cuStreamGetCtx(hStream, pCtx);
    if (r == CUDA_SUCCESS)
        *pGreenCtx = NULL;
    return r;
}
CUresult cuStreamGetCtx_v2_ptsz(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx)
{
    return cuStreamGetCtx_v2(hStream, pCtx, pGreenCtx);
}
